"""Continuing a `Seed` with a net: the sampled ids of a batch of continuations, their notes, and why each
stopped. ``musictx-generate`` (`musictx.generation.continue_midi`), the web app, the continuation and motif
measures of ``musictx-evaluate`` and the benches all sample through `continuation_prompt`;
`performance_job` is ``musictx-generate``'s run, which hands its samples on decoded (`take_of`).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from musictx.decoding.errors import GenerateError
from musictx.decoding.hook import HookInputs
from musictx.decoding.option_fields import whole_number
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.dynamics import seed_rule
from musictx.io.midi_io import Notes
from musictx.io.midi_timing import MidiTiming
from musictx.io.tokenizer import EventTokenizer
from musictx.tasks.progress import progress_bar
from musictx.tasks.prompt import Job, Prompt, sample
from musictx.tasks.seeds import Seed, seed_for
from musictx.tasks.take import Take

# The token cap when max_tokens is unset: recorded piano runs at ~40-80 ids per second of music, so this is
# only reached by a model that has gone wrong; DEFAULT_MAX_TOKENS without length_seconds.
TOKENS_PER_SECOND = 200
DEFAULT_MAX_TOKENS = 2048


def token_cap(max_tokens: int | None, length_seconds: float | None) -> int:
    """New ids per sample at most: ``max_tokens``, or when it is unset room for ``length_seconds`` of dense
    piano (`TOKENS_PER_SECOND`), never below `DEFAULT_MAX_TOKENS`, so that the length asked for is what
    stops a sample."""
    if max_tokens is not None:
        return max_tokens
    return max(DEFAULT_MAX_TOKENS, math.ceil(TOKENS_PER_SECOND * (length_seconds or 0)))


def continuation_prompt(net, tokenizer: EventTokenizer, seed: Seed, sampling: SamplingOptions, *,
                        num_samples: int, length_seconds: float | None, max_tokens: int | None,
                        ending: bool = False) -> Prompt:
    """The prompt of ``num_samples`` continuations of ``seed``: each stops after ``length_seconds`` of new
    music (None: no limit) or `token_cap` ids; ``ending``: on its key's chord (`musictx.decoding.hooks.final_chord`)."""
    if whole_number("num_samples", num_samples, nullable=False) < 1:  # 0 failed in a hook's numpy stack
        raise GenerateError(f"num_samples must be >= 1, got {num_samples}")
    device = next(net.parameters()).device
    ids = torch.as_tensor(seed.ids, dtype=torch.long, device=device).expand(num_samples, -1)  # (B, T0)
    hooks = HookInputs("continue", tokenizer, sampling, seed=seed, length_seconds=length_seconds, ending=ending)
    return Prompt(ids, hooks, token_cap(max_tokens, length_seconds))


def sample_continuations(net, tokenizer: EventTokenizer, seed: Seed, sampling: SamplingOptions, *,
                         num_samples: int, length_seconds: float | None, max_tokens: int | None,
                         on_step=None, ending: bool = False) -> list[np.ndarray]:
    """New ids of ``num_samples`` continuations of ``seed`` (`continuation_prompt`), sampled as one batch (EOS
    kept, PAD dropped). ``on_step(next_ids, done)`` is called after every draw (progress); a Ctrl-C raises
    `GenerationInterrupted`."""
    prompt = continuation_prompt(net, tokenizer, seed, sampling, num_samples=num_samples,
                                 length_seconds=length_seconds, max_tokens=max_tokens, ending=ending)
    prompt.hooks.on_step = on_step
    return new_ids(tokenizer, seed, sample(net, prompt))


def new_ids(tokenizer: EventTokenizer, seed: Seed, ids: torch.Tensor) -> list[np.ndarray]:
    """Each row of the sampler's ``ids`` (B, T) after the seed, PAD dropped."""
    new = ids[:, len(seed.ids):].cpu().numpy()
    return [row[row != tokenizer.pad_id] for row in new]


def piece_notes(tokenizer: EventTokenizer, seed: Seed, new_ids: np.ndarray, include_seed: bool = True) -> Notes:
    """Notes of seed + continuation; with ``include_seed=False`` only the notes struck after the seed,
    moved to start at 0 (velocities still follow from the seed's last VELOCITY event)."""
    notes = tokenizer.decode_notes(np.concatenate([seed.ids, new_ids]))
    notes.velocity = seed.dynamics.back(notes.velocity)  # a pp (ff) seed: new notes as softly (loudly) as it is played
    if seed.played_ids is not None:  # and its own notes as played, not heard and scaled back (a bin's rounding times
        played = tokenizer.decode_notes(seed.played_ids)  # the scale): the first notes (struck by then, in order)
        k = len(played.pitch)
        if np.array_equal(notes.pitch[:k], played.pitch) and np.allclose(notes.start[:k], played.start):
            notes.velocity[:k] = played.velocity
    if include_seed:
        return notes
    step = tokenizer.config.time_step
    cut = round(seed.seconds / step)
    on, off = np.rint(notes.start / step).astype(np.int64), np.rint(notes.end / step).astype(np.int64)
    keep = on >= cut
    return Notes((on[keep] - cut) * step, (off[keep] - cut) * step, notes.pitch[keep], notes.velocity[keep])


def new_seconds(tokenizer: EventTokenizer, new_ids: np.ndarray) -> float:
    """Seconds of music the TIME_SHIFTs of ``new_ids`` add."""
    return tokenizer.split_time_shifts(new_ids)[2] * tokenizer.config.time_step


def stop_reason(tokenizer: EventTokenizer, new_ids: np.ndarray, length_seconds: float | None, cap: int) -> str:
    """Why a continuation ended: "eos", "length_seconds", "max_tokens" (``cap`` ids) or "interrupted"."""
    if len(new_ids) and new_ids[-1] == tokenizer.eos_id:
        return "eos"
    if length_seconds and new_seconds(tokenizer, new_ids) >= length_seconds - 1e-9:
        return "length_seconds"
    return "max_tokens" if len(new_ids) >= cap else "interrupted"


def performance_job(opts, net, tokenizer: EventTokenizer) -> Job:
    """``musictx-generate``'s run on a Performance model, as its options (`GenerateOptions`) ask: the seed
    read (`musictx.tasks.seeds.seed_for`), its continuations' prompt, a progress bar in seconds of
    music; a Ctrl-C keeps the partial samples."""
    seed, tracks = seed_for(tokenizer, opts, seed_rule(opts, net))
    prompt = continuation_prompt(net, tokenizer, seed, opts, num_samples=opts.num_samples,
                                 length_seconds=opts.length_seconds, max_tokens=opts.max_tokens, ending=opts.ending)
    about = {"seed": {"midi": seed.path, "seconds": seed.seconds, "tokens": len(seed.ids),
                      "unconditional": seed.path is None, "silence_dropped_seconds": seed.silence_dropped,
                      "starts_at_seconds": seed.silence_dropped, "tracks": tracks}}

    def takes(ids, _cut_short, _wall) -> list[Take]:
        return [take_of(tokenizer, seed, row, opts) for row in new_ids(tokenizer, seed, ids)]

    return Job(prompt, takes, about, lambda: _progress(tokenizer, opts))


@contextmanager
def _progress(tokenizer: EventTokenizer, opts):
    with progress_bar(tokenizer, opts.length_seconds, opts.progress_every_s) as progress:
        yield progress and progress.update


def take_of(tokenizer: EventTokenizer, seed: Seed, new_ids: np.ndarray, opts,
            earlier_from: float | None = None) -> Take:
    """One continuation decoded for writing: its notes (with the seed's unless ``opts.include_seed`` is
    False), the seed's tempo map and track name, its record and summary line. ``earlier_from``: see
    `musictx.io.piano_roll.plot_piano_roll`."""
    notes = piece_notes(tokenizer, seed, new_ids, opts.include_seed)
    cap = token_cap(opts.max_tokens, opts.length_seconds)
    lay = tokenizer.layout
    struck = int(np.count_nonzero((new_ids >= lay.note_on) & (new_ids < lay.note_off)))  # the new NOTE_ON ids
    record = {"new_tokens": len(new_ids), "new_seconds": new_seconds(tokenizer, new_ids),
              "total_seconds": notes.duration(), "notes": len(notes), "new_notes": struck,
              "stop": stop_reason(tokenizer, new_ids, opts.length_seconds, cap)}
    if record["stop"] == "max_tokens" and opts.length_seconds:
        line = (f"only {record['new_seconds']:.1f} s of the {opts.length_seconds:g} s asked for: stopped at "
                f"max_tokens={cap} ({record['notes']} notes); raise max_tokens for more")
    else:
        line = (f"{record['notes']} notes, {record['new_tokens']} new tokens, {record['new_seconds']:.1f} s new "
                f"({record['stop']})")
    if not struck and seed.path:  # the model let the seed's last notes ring on: a sample a listener calls silent
        line += "; no new note struck: the seed's last notes ring on (another seed= draws again)"
    # written on the seed file's tempo map and metre (120 bpm, 4/4 without one); the continuation alone, moved
    # to start at 0, on those in force where the model takes over
    timing = seed.timing or MidiTiming()
    timing = timing if opts.include_seed else timing.window(seed.seconds)
    track = f"musictx continuation of {Path(seed.path).name}" if seed.path else "musictx piano"  # as a DAW shows it
    return Take(notes, notes, record, line, timing=timing, track=track,
                takeover=seed.seconds if opts.include_seed else None, earlier_from=earlier_from)
