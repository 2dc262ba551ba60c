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
from symusic import Score, Tempo, TimeSignature

from musictx.decoding.hook import HookInputs
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.chord_labels import Chords
from musictx.tasks.metrical_seeds import MetricalSeed, bars_for, seed_of, ticks_to_seconds
from musictx.tasks.prompt import Job, Prompt, sample
from musictx.tasks.take import Take, score_roll

TOKENS_PER_BAR = 160  # the token cap's room per bar: dense POP909 bars run at 60-120 ids


def seed_programs(seed: MetricalSeed) -> list[int]:
    return sorted({t.program for t in seed.tracks.tracks})


def bars_prompt(net, tok, seed: MetricalSeed, sampling: SamplingOptions, *, num_samples: int, bars: int,
                max_tokens: int | None = None, chords=None) -> Prompt:
    """The prompt of ``num_samples`` continuations of ``seed``, ``bars`` bars each, under the hooks
    ``sampling.hooks`` sets (the grammar, the bar-repeat limit, the leans). ``chords`` (a lead sheet's
    `Chords`, on the seed file's clock): the new bars lean toward them."""
    device = next(net.parameters()).device
    ids = torch.as_tensor(seed.ids, dtype=torch.long, device=device).expand(num_samples, -1)  # (B, T0)
    # the first new id is the Bar that opens the first new bar: the seed ends on a bar line
    ids = torch.cat([ids, torch.full((num_samples, 1), tok.bar_id, device=device)], dim=1)
    lines = seed.new_bar_lines_seconds(bars) if chords is not None else None
    hooks = HookInputs("continue", tok, sampling, programs=seed_programs(seed), stop_after_bars=bars - 1,
                       chords=chords, new_bar_lines_s=lines)
    return Prompt(ids, hooks, max_tokens or TOKENS_PER_BAR * bars)


def sample_bars(net, tok, seed: MetricalSeed, sampling: SamplingOptions, *, num_samples: int, bars: int,
                max_tokens: int | None = None, on_step=None, chords=None) -> list[np.ndarray]:
    """New ids of ``num_samples`` continuations of ``seed`` (`bars_prompt`), ``bars`` bars each (the Bar id
    that would open one more is cut), sampled as one batch. ``on_step(next_ids, done)``: called after every
    draw."""
    prompt = bars_prompt(net, tok, seed, sampling, num_samples=num_samples, bars=bars, max_tokens=max_tokens,
                         chords=chords)
    prompt.hooks.on_step = on_step
    ids = sample(net, prompt)
    return [strip_after_bars(tok, row, bars) for row in ids[:, len(seed.ids):].cpu().numpy()]


def metrical_job(opts, net, tok) -> Job:
    """``musictx-generate``'s run on a metrical model, as its options (`GenerateOptions`) ask: the seed read
    (`musictx.tasks.metrical_seeds.seed_of`), its continuations' prompt, whole bars each; a Ctrl-C keeps
    the partial samples."""
    seed = seed_of(tok, opts)
    bars = bars_for(seed, opts.length_seconds, opts.length_bars)
    chords = Chords.read_option(opts.chords)  # a folder, a FIFO, a bad line: one line naming it, before any sampling
    prompt = bars_prompt(net, tok, seed, opts, num_samples=opts.num_samples, bars=bars, max_tokens=opts.max_tokens,
                         chords=chords)
    about = {"seed": {"midi": seed.path, "seconds": seed.seconds, "bars": seed.bars, "first_bar": seed.first_bar + 1,
                      "starts_at_seconds": seed.origin_seconds, "tokens": len(seed.ids),
                      "tracks": seed.tracks.to_list()},
             "bars": bars}

    def takes(ids, cut_short: bool, _wall) -> list[Take]:
        rows = ids[:, len(seed.ids):].cpu().numpy()
        pieces = list(rows) if cut_short else [strip_after_bars(tok, row, bars) for row in rows]
        return [metrical_take(tok, seed, piece, opts.include_seed) for piece in pieces]

    return Job(prompt, takes, about)


def metrical_take(tok, seed: MetricalSeed, new_ids: np.ndarray, include_seed: bool = True) -> Take:
    """One continuation decoded for writing: its score (`continuation_score`), its record and summary line."""
    score = continuation_score(tok, seed, new_ids, include_seed)
    notes, tracks, end, parts = score_roll(score)
    record = {"new_tokens": len(new_ids), "new_bars": int((new_ids == tok.bar_id).sum()),
              "new_seconds": new_bars_seconds(seed, score, include_seed), "total_seconds": end,
              "notes": len(notes), "tracks": tracks}
    line = f"{len(notes)} notes in {tracks}, {record['new_bars']} bars ({record['new_seconds']:.1f} s) new"
    return Take(score, notes, record, line, takeover=seed.seconds if include_seed else None, parts=parts)


def strip_after_bars(tok, ids: np.ndarray, bars: int) -> np.ndarray:
    """``ids`` up to (without) the Bar id opening bar ``bars + 1``, PAD and EOS dropped."""
    ids = ids[(ids != tok.pad_id) & (ids != tok.eos_id)]
    at = np.flatnonzero(ids == tok.bar_id)
    return ids[: at[bars]] if len(at) > bars else ids


def continuation_score(tok, seed: MetricalSeed, new_ids: np.ndarray, include_seed: bool = True) -> Score:
    """Seed + continuation (or the continuation alone, from its first bar line) as a score in the seed file's
    ticks, with its named tracks, its tempo map and meter from the seed's first bar line on."""
    prefix = seed.ids if include_seed else np.array([], dtype=np.int64)
    score = tok.decode_score(np.concatenate([prefix, new_ids]), seed.tracks)
    tpq = output_tpq(seed.score.ticks_per_quarter, score.ticks_per_quarter)
    score = score.resample(tpq, min_dur=1)
    first = seed.first_bar if include_seed else seed.first_bar + seed.bars
    tempos, sigs = _timing_from(seed, first)
    factor = tpq / seed.score.ticks_per_quarter  # the seed file's ticks -> the output's
    # the song's tempo map and meter go on under the new bars; their events after the last note are dropped,
    # or a DAW (and the file's length) would run on to the end of the song the seed came from
    end = max((n.end for t in score.tracks for n in t.notes), default=0)
    score.tempos = [Tempo(round(t.time * factor), t.qpm) for k, t in enumerate(tempos)
                    if k == 0 or round(t.time * factor) < end]
    score.time_signatures = [TimeSignature(round(s.time * factor), s.numerator, s.denominator)
                             for k, s in enumerate(sigs) if k == 0 or round(s.time * factor) < end]
    # every seed track stays in the file, even one the continuation left silent
    present = {t.name for t in score.tracks}
    for info in seed.tracks.tracks:
        if info.name not in present and not info.is_drum:
            from symusic import Track

            score.tracks.append(Track(info.name, info.real_program, False))
    return score


def output_tpq(seed_tpq: int, token_tpq: int) -> int:
    """The seed's ticks per quarter when the tokens' grid falls on its ticks, else 480 (a tick grid that
    rounds no onset: pretty_midi's default 220 does not hold MidiTok's 8 per quarter)."""
    return seed_tpq if seed_tpq % token_tpq == 0 else 480


def _timing_from(seed: MetricalSeed, bar: int):
    shifted = MetricalSeed(seed.ids, seed.tracks, seed.score, bar, 1, seed.lines)
    return shifted.output_timing()


def new_bars_seconds(seed: MetricalSeed, score: Score, include_seed: bool = True) -> float:
    """Seconds of new music in ``score``: from the seed's last bar line to the end of the last note."""
    factor = score.ticks_per_quarter / seed.score.ticks_per_quarter
    seed_ticks = int(seed.lines[seed.first_bar + seed.bars] - seed.lines[seed.first_bar])
    start = round(seed_ticks * factor) if include_seed else 0
    end = max(score.end(), start)
    t = ticks_to_seconds(score, np.array([start, end]))
    return float(t[1] - t[0])
