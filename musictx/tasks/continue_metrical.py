"""Continuing a metrical seed (`MetricalSeed`) with a net: sampling by bars, and the continuation as a score
that keeps the seed's named tracks, tempo map and meter.

The length asked for in seconds becomes whole bars at the seed's own tempo and meter (a sample stops at the
bar line, never in the middle of a bar), or is given in bars directly. The sampler follows the tokenizer's
own grammar (`musictx.decoding.hooks.metrical_guard`): bars and positions in order, only the seed's tracks.
`metrical_job` is ``musictx-generate``'s run, which hands its samples on decoded (`metrical_take`).
"""

from __future__ import annotations

import numpy as np
import torch

from musictx.decoding.errors import GenerateError
from musictx.decoding.hook import HookInputs
from musictx.decoding.hooks.phrase_return import replaying_rows, replays_asked
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.chord_labels import Chords
from musictx.io.dynamics import seed_rule
from musictx.listed import counted, counts_listed
from musictx.tasks.critic_choice import candidates_per_sample, choose
from musictx.tasks.drum_loop import DrumLoop, drum_loop, loop_drums, loop_words, no_loop_said
from musictx.tasks.metrical_score import continuation_score, new_bars_seconds
from musictx.tasks.metrical_seeds import MetricalSeed, bars_for, grid_ticks, seed_of
from musictx.tasks.played_as import parts_named, parts_said
from musictx.tasks.prompt import Job, Prompt, sample
from musictx.tasks.take import Take, score_roll

TOKENS_PER_BAR = 160  # the token cap's room per bar: dense POP909 bars run at 60-120 ids
SEED_BAR_ROOM = 2  # times the seed's densest bar: a seed denser than POP909 (a Chopin etude: 250 ids a bar) ran
# out of room at 160 and its samples came back bars short


def token_cap(tok, seed: MetricalSeed, bars: int, max_tokens: int | None = None) -> int:
    """New ids a sample of ``bars`` bars may take when ``max_tokens`` is unset: `TOKENS_PER_BAR` a bar, or twice
    the seed's densest bar where that is more, so that the bars asked for are what stops a sample."""
    if max_tokens:
        return max_tokens
    at = np.flatnonzero(seed.ids == tok.bar_id)
    densest = int(np.diff(np.append(at, len(seed.ids))).max()) if len(at) else 0
    return max(TOKENS_PER_BAR, SEED_BAR_ROOM * densest) * bars


def seed_programs(seed: MetricalSeed) -> list[int]:
    return sorted({t.program for t in seed.tracks.tracks})


def learnt_parts(net) -> str:
    """The parts a model learnt, as a message says them (`musictx.tasks.played_as.parts_named`)."""
    return parts_named(net.learnt_programs)


def playable_programs(net, seed: MetricalSeed) -> list[int]:
    """The seed's (internal) programs that the continuation may play: those of the parts the model learnt.
    GenerateError naming the file where that leaves none (a drum loop continued by a model of pitched parts)."""
    learnt = getattr(net, "learnt_programs", None)
    programs = [p for p in seed_programs(seed) if learnt is None or p in learnt]
    if not programs:
        raise GenerateError(f"seed_midi={seed.path}: none of its tracks ({seed.tracks.describe()}) is a part the "
                            f"model learnt ({learnt_parts(net)}), so it has nothing to continue; give a file with "
                            "one of those (a track named melody or bridge is read as one)")
    return programs


def parts_line(net, seed: MetricalSeed, loop: DrumLoop | None = None, drums_off: str | None = None,
               say_off: bool = True) -> str | None:
    """The one line that says which seed tracks are played as a part the model learnt (`seed.parts`), which it
    leaves silent, and why, that its drums ``loop`` where they do (``drums_off``: how to stop them, where not the
    command's option), which it hears by octaves into its pitches (`seed.registers`), and whether it hears a soft
    seed louder (or a loud one softer: `seed.dynamics`; ``say_off``: whether to name the option that stops it);
    None where there is nothing to say."""
    parts = parts_said(getattr(net, "learnt_programs", None), seed.tracks, seed.score, seed.parts,
                       drums=loop_words(loop, drums_off))
    moved = seed.registers.line() if seed.registers else ""  # tracks heard by octaves into the tokens' pitches
    return "; ".join(text for text in (parts, moved, seed.dynamics.line(say_off)) if text) or None


def seed_drum_loop(net, tok, seed: MetricalSeed, drums: str, ending: bool = False) -> DrumLoop | None:
    """The seed's drums looped under the new bars (`musictx.tasks.drum_loop`) where ``drums`` asks for it and the
    model learnt no drums (it records its parts and drums are not among them); else None. ``ending``: the
    continuation ends, and the loop's last bar with it."""
    if drums != "loop" or not _loops_drums(net):
        return None
    return drum_loop(seed, grid_ticks(tok, seed.score, seed.start_tick), ending)


def _loops_drums(net) -> bool:
    """Whether the seed's drums are looped for ``net``: it records the parts it learnt, and drums are not one."""
    learnt = getattr(net, "learnt_programs", None)
    return learnt is not None and -1 not in learnt


def bars_prompt(net, tok, seed: MetricalSeed, sampling: SamplingOptions, *, num_samples: int, bars: int,
                max_tokens: int | None = None, chords=None, candidates: int = 1, ending: bool = False) -> Prompt:
    """The prompt of ``num_samples`` continuations of ``seed``, ``bars`` bars each, under the hooks
    ``sampling.hooks`` sets (the grammar, the bar-repeat limit, the leans). ``chords`` (a lead sheet's
    `Chords`, on the seed file's clock): the new bars lean toward them. ``candidates``: the rows are the
    candidates of ``num_samples // candidates`` samples, in turn (`best_of`; the phrase return's replays).
    ``ending``: the last two bars close the piece (`musictx.decoding.hooks.cadence`)."""
    device = next(net.parameters()).device
    ids = torch.as_tensor(seed.ids, dtype=torch.long, device=device).expand(num_samples, -1)  # (B, T0)
    # the first new id is the Bar that opens the first new bar: the seed ends on a bar line
    ids = torch.cat([ids, torch.full((num_samples, 1), tok.bar_id, device=device)], dim=1)
    lines = seed.new_bar_lines_seconds(bars) if chords is not None else None
    hooks = HookInputs("continue", tok, sampling, programs=playable_programs(net, seed), stop_after_bars=bars - 1,
                       chords=chords, new_bar_lines_s=lines, candidates=candidates, ending=ending)
    return Prompt(ids, hooks, token_cap(tok, seed, bars, max_tokens))


def sample_bars(net, tok, seed: MetricalSeed, sampling: SamplingOptions, *, num_samples: int, bars: int,
                max_tokens: int | None = None, on_step=None, chords=None, ending: bool = False) -> list[np.ndarray]:
    """New ids of ``num_samples`` continuations of ``seed`` (`bars_prompt`), ``bars`` bars each (the Bar id
    that would open one more is cut), sampled as one batch; each the best of ``sampling.best_of`` candidates
    by the model's critic (`musictx.tasks.critic_choice`). ``on_step(next_ids, done)``: called after every
    draw."""
    critic = getattr(net, "critic", None)
    k = candidates_per_sample(sampling.best_of, critic)
    prompt = bars_prompt(net, tok, seed, sampling, num_samples=num_samples * k, bars=bars, max_tokens=max_tokens,
                         chords=chords, candidates=k, ending=ending)
    prompt.hooks.on_step = on_step
    ids = sample(net, prompt)
    pieces = [strip_after_bars(tok, row, bars) for row in ids[:, len(seed.ids):].cpu().numpy()]
    return choose(tok, seed, pieces, k, bars, critic)[0]


def metrical_job(opts, net, tok) -> Job:
    """``musictx-generate``'s run on a metrical model, as its options (`GenerateOptions`) ask: the seed read
    (`musictx.tasks.metrical_seeds.seed_of`), its continuations' prompt, whole bars each; a Ctrl-C keeps
    the partial samples."""
    seed = seed_of(tok, opts, getattr(net, "learnt_programs", None), seed_rule(opts, net))
    playable_programs(net, seed)  # refused before anything else is said where the model can play none of it
    loop = seed_drum_loop(net, tok, seed, opts.drums, opts.ending)
    if line := parts_line(net, seed, loop):
        print(line)
    if loop is None and opts.drums == "loop" and _loops_drums(net) and (line := no_loop_said(seed)):
        print(line)  # asked for, and nothing to loop
    bars = bars_for(seed, opts.length_seconds, opts.length_bars)
    chords = Chords.read_option(opts.chords)  # a folder, a FIFO, a bad line: one line naming it, before any sampling
    if chords is not None:
        lines = seed.new_bar_lines_seconds(bars)  # (bars + 1,) on the seed file's clock, as the lead sheet's
        if short := chords.short_of(float(lines[0]), float(lines[-1]), f"chords={opts.chords}: the new music"):
            print(short)
    critic = getattr(net, "critic", None)
    k = candidates_per_sample(opts.best_of, critic)
    if k > 1:
        print(f"each sample: the best of {k} continuations by the model's critic (best_of=1: no choice)")
    prompt = bars_prompt(net, tok, seed, opts, num_samples=opts.num_samples * k, bars=bars,
                         max_tokens=opts.max_tokens, chords=chords, candidates=k, ending=opts.ending)
    about = {"seed": {"midi": seed.path, "seconds": seed.seconds, "bars": seed.bars, "first_bar": seed.first_bar + 1,
                      "starts_at_seconds": seed.origin_seconds, "tokens": len(seed.ids),
                      "tracks": seed.tracks.to_list()},
             "bars": bars, "best_of": k, "replay_candidates": replay_candidates(opts, k, chords)}

    def takes(ids, cut_short: bool, _wall) -> list[Take]:
        rows = ids[:, len(seed.ids):].cpu().numpy()
        if cut_short:  # a Ctrl-C: each sample's first candidate as far as it got, no choice among unfinished ones
            return [metrical_take(tok, seed, row, opts.include_seed, loop) for row in rows[::k]]
        pieces, choices = choose(tok, seed, [strip_after_bars(tok, row, bars) for row in rows], k, bars, critic)
        made = [metrical_take(tok, seed, piece, opts.include_seed, loop) for piece in pieces]
        for s, (take, choice) in enumerate(zip(made, choices, strict=True)):
            take.record.update(choice)
            row = rows[s * k + choice.get("kept", 0)]  # the candidate kept, as drawn
            say_bars_short(take, int((row == tok.bar_id).sum()), bars, prompt.max_new_tokens)  # the cap it ran under
        return made

    return Job(prompt, takes, about)


def say_bars_short(take: Take, bar_ids: int, bars: int, cap: int) -> None:
    """A sample that the token cap stopped before the end of its last bar (``bar_ids``: the Bar ids of its new ids as
    drawn, the one after its last bar included when it got there; the grammar forbids EOS, so nothing else stops it
    early) says so in its line and record, as a Performance sample does: not a shorter piece passed off as the length
    asked for."""
    if bar_ids <= bars:
        take.record["stop"] = "max_tokens"
        take.line += (f"; stopped in bar {bar_ids} of the {bars} asked for by max_tokens={cap} (new ids); raise "
                      "max_tokens for the rest")


def replay_candidates(sampling: SamplingOptions, k: int, chords) -> list[int]:
    """Which of a sample's ``k`` candidates (0-based) replay the seed's last bars where it restates nothing
    (`musictx.decoding.hooks.phrase_return`): what generation.json records beside the critic's scores."""
    asked = replays_asked(sampling.hooks.phrase_return, chords)
    return [j for j, replays in enumerate(replaying_rows(k, k, asked)) if replays]


def metrical_take(tok, seed: MetricalSeed, new_ids: np.ndarray, include_seed: bool = True,
                  loop: DrumLoop | None = None) -> Take:
    """One continuation decoded for writing: its score (`continuation_score`; the seed's drums ``loop``ed under
    its new bars where given), its record and summary line."""
    score = continuation_score(tok, seed, new_ids, include_seed)
    if loop is not None:
        loop_drums(score, seed, loop, int((new_ids == tok.bar_id).sum()), include_seed)
    notes, tracks, end, parts = score_roll(score)
    record = {"new_tokens": len(new_ids), "new_bars": int((new_ids == tok.bar_id).sum()),
              "new_seconds": new_bars_seconds(seed, score, include_seed), "total_seconds": end,
              "notes": len(notes), "tracks": tracks}
    bars = counted(record["new_bars"], "bar")
    line = f"{len(notes)} notes in {counts_listed(tracks)}, {bars} ({record['new_seconds']:.1f} s) new"
    return Take(score, notes, record, line, takeover=seed.seconds if include_seed else None, parts=parts)


def strip_after_bars(tok, ids: np.ndarray, bars: int) -> np.ndarray:
    """``ids`` up to (without) the Bar id opening bar ``bars + 1``, PAD and EOS dropped."""
    ids = ids[(ids != tok.pad_id) & (ids != tok.eos_id)]
    at = np.flatnonzero(ids == tok.bar_id)
    return ids[: at[bars]] if len(at) > bars else ids
