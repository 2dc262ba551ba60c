"""Seeds (prompts) for generation, shared by ``musictx-generate`` and the continuation metrics of
``musictx-evaluate``: a seed MIDI file or a dataset piece counted from its first note (or from the first
note at or after ``seed_from`` seconds of it) and cut after some seconds, or the one-id prompt of unconditional
generation. A seed file's tempo map and time signatures come with its seed, so that what is generated
from it can be written on its bar grid (`musictx.io.midi_timing`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from musictx.decoding.errors import GenerateError
from musictx.io.dynamics import Dynamics, LevelRule, heard_dynamics, scaled
from musictx.io.midi_io import MidiReadError, Notes
from musictx.io.midi_timing import MidiTiming, read_timing
from musictx.io.pedal_ids import pedal_after
from musictx.io.seed_tracks import track_merge
from musictx.io.tokenizer import EventTokenizer

# A seed with one of these suffixes is a recording, not MIDI: said so rather than "unreadable MIDI".
AUDIO_SUFFIXES = (".wav", ".mp3", ".flac", ".ogg")


@dataclass
class Seed:
    """The prompt: ``ids`` and the time (seconds) where the model takes over."""

    ids: np.ndarray  # (T0,) int64
    seconds: float
    path: str | None = None  # None: unconditional
    silence_dropped: float = 0.0  # seconds of the file before the seed's first note (silence; with seed_from,
    # the music before it too), left out: where the seed starts in the file
    timing: MidiTiming | None = None  # the seed file's tempo map and metre over the seed; None: 120 bpm, 4/4
    dynamics: Dynamics = field(default_factory=Dynamics)  # a pp (ff) seed heard louder (softer): `musictx.io.dynamics`
    played_ids: np.ndarray | None = None  # an ff seed's ids as played, to write its own notes back (heard softer, its
    # velocities' bins are coarser than as played; a pp seed's finer: it is written back from ``ids``); None: ``ids``


def drop_leading_silence(tokenizer: EventTokenizer, ids: np.ndarray) -> tuple[np.ndarray, int]:
    """(ids without the TIME_SHIFTs before the first NOTE_ON, steps dropped): time then counts from the
    first note. Real recordings often open with seconds of silence; a VELOCITY event before the first
    note is kept."""
    lay = tokenizer.layout
    ids = np.asarray(ids, dtype=np.int64)
    notes = np.flatnonzero((ids >= lay.note_on) & (ids < lay.note_off))
    first = int(notes[0]) if len(notes) else len(ids)
    lead = ids[:first]
    shift = tokenizer.shift_steps(lead)
    return np.concatenate([lead[shift == 0], ids[first:]]), int(shift.sum())


def cut_at_seconds(tokenizer: EventTokenizer, ids: np.ndarray, seconds: float) -> np.ndarray:
    """The ids of the events before ``seconds``, ending exactly at ``seconds`` when the piece goes on.

    Notes sounding across the cut stay open (the model may end them). A TIME_SHIFT that crosses the cut
    is shortened to end on it; events at or after the cut are dropped.
    """
    lay = tokenizer.layout
    target = round(seconds / tokenizer.config.time_step)
    shift = tokenizer.shift_steps(ids)
    before = np.cumsum(shift) - shift  # steps before each id
    n = int(np.searchsorted(before, target, side="left"))  # `before` is non-decreasing
    out = ids[:n].copy()
    if n and shift[n - 1] and before[n - 1] + shift[n - 1] > target:
        out[n - 1] = lay.time_shift + (target - before[n - 1]) - 1
    return out


def seed_from_midi(tokenizer: EventTokenizer, path: str | os.PathLike, seed_seconds: float | None = None,
                   seed_from: float = 0.0, level: LevelRule | None = None) -> Seed:
    """Encode a seed file with the checkpoint's tokenizer, counted from its first note (leading silence is
    dropped), and keep its first ``seed_seconds`` from there. ``seed_from`` (seconds of the file, as a DAW's
    timeline shows them) starts the seed mid-file: at the first note struck at or after it, notes struck
    earlier being left out, held or not. The file's tempo map and time signatures over that same span come
    with it (`MidiTiming.window`): the ones in force at the seed's first note move to time 0. ``level``: when a
    seed is heard at the model's level (pp, ff, one velocity: `musictx.io.dynamics.LevelRule`; None: as it is)."""
    if getattr(tokenizer, "kind", None) != "performance":  # a metrical one has no notes-to-ids (encode_notes)
        raise GenerateError(f"seed_from_midi takes a Performance tokenizer (piano's), not {type(tokenizer).__name__}; "
                            "a metrical model's seed: musictx.tasks.metrical_seed")
    if Path(path).suffix.lower() in AUDIO_SUFFIXES and Path(path).is_file():
        raise GenerateError(f"seed_midi={path}: an audio file; musictx continues MIDI files (.mid/.midi)")
    ids, silent_steps = _seed_ids(tokenizer, path, seed_seconds, seed_from)
    dynamics, played = heard_dynamics(tokenizer.decode_notes(ids).velocity, level), None
    if dynamics.scale != 1.0:  # the same notes, each velocity id louder (softer)
        played = ids if dynamics.scale < 1.0 else None
        ids, silent_steps = _seed_ids(tokenizer, path, seed_seconds, seed_from, dynamics.scale)
    step = tokenizer.config.time_step
    seconds, dropped = tokenizer.split_time_shifts(ids)[2] * step, silent_steps * step
    timing = read_timing(path).window(dropped, dropped + seconds)
    return Seed(ids, seconds, str(Path(path).resolve()), dropped, timing, dynamics, played)


def _seed_ids(tokenizer: EventTokenizer, path, seed_seconds: float | None, seed_from: float, scale: float = 1.0
              ) -> tuple[np.ndarray, int]:
    """(the seed's ids from its first note, the silent steps before it left out), velocities times ``scale``."""
    ids, silent_steps = drop_leading_silence(tokenizer, _encode_from(tokenizer, path, seed_from, scale))
    if seed_seconds is not None:
        ids = cut_at_seconds(tokenizer, ids, seed_seconds)
        if not (ids < tokenizer.layout.note_off).any():
            raise GenerateError(f"seed_midi={path}: no note starts in its first seed_seconds={seed_seconds} s "
                                "(counted from its first note, on a grid of "
                                f"{tokenizer.config.time_step} s); raise seed_seconds.")
    return ids, silent_steps


def seed_refused(path, reason: str) -> GenerateError:
    """The error of a seed file that cannot be continued, for ``reason`` (unreadable, no notes) as its reader says."""
    if "notes" in reason:  # readable, but nothing to continue
        return GenerateError(f"seed_midi={path}: {reason}; nothing to continue. Leave seed_midi unset for "
                             "unconditional generation.")
    return GenerateError(f"seed_midi={path}: {reason}")


def _encode_from(tokenizer: EventTokenizer, path: str | os.PathLike, seed_from: float, scale: float = 1.0
                 ) -> np.ndarray:
    """Ids of the notes of ``path`` struck at or after ``seed_from`` seconds (on the tokenizer's grid), time
    still counted from the start of the file, velocities times ``scale``; GenerateError naming the file when there
    are none."""
    try:
        notes = tokenizer.read(path)
    except MidiReadError as err:
        raise seed_refused(path, err.reason) from None
    if seed_from:
        step = tokenizer.config.time_step
        later = np.floor(notes.start / step + 0.5) >= np.floor(seed_from / step + 0.5)  # the grid encode uses
        if not later.any():
            raise GenerateError(f"seed_midi={path}: no note starts at or after seed_from={seed_from:g} s (its "
                                f"last note starts at {notes.start.max():.2f} s); lower seed_from.")
        notes = Notes(*(getattr(notes, f)[later] for f in Notes.FIELDS), pedal=pedal_after(notes.pedal, seed_from))
    if scale != 1.0:
        notes = Notes(notes.start, notes.end, notes.pitch, scaled(notes.velocity, scale), pedal=notes.pedal)
    ids = tokenizer.encode_notes(notes)
    if len(ids) == 0:
        where = f" at or after seed_from={seed_from:g} s" if seed_from else ""
        raise GenerateError(f"seed_midi={path}: no notes inside the tokenizer's pitch range{where}; nothing to "
                            "continue. Leave seed_midi unset for unconditional generation.")
    return ids


LONG_SEED_SECONDS = 60.0  # a whole-file seed longer than this is said to be one (a user may have meant a part)


def unconditional_seed(tokenizer: EventTokenizer, velocity: int = 64) -> Seed:
    """A one-id prompt: the VELOCITY event of ``velocity`` (as a piece's first note would carry)."""
    vbin = int(tokenizer.config.velocity_bin(velocity))
    return Seed(np.array([tokenizer.layout.velocity + vbin - 1], dtype=np.int64), 0.0, None)


def seed_past_end(opts, seconds: float, slack: float, start: str | None = None) -> str | None:
    """The line saying that ``seed_seconds`` asks for more than the file has (``seconds``: what the seed holds, ending
    where the file's music does; ``start``: where it starts, None: its first note): a 30 s seed of a 4 s file was
    silently 4 s. None where the seed is as long as asked (within ``slack`` seconds), where no length was asked, or
    for ``seed_from=end``, whose own line says its length."""
    asked = opts.seed_seconds
    if asked is None or getattr(opts, "seed_note", None) or seconds >= asked - slack:
        return None
    if start is None:
        start = f"its first note at or after seed_from={opts.seed_from:g} s" if opts.seed_from else "its first note"
    return (f"seed: seed_seconds={asked:g} asks for more than {opts.seed_midi} has from {start}: the {seconds:.2f} s "
            "to its end are the seed")


def seed_for(tokenizer: EventTokenizer, opts, level: LevelRule | None = None) -> tuple[Seed, str | None]:
    """``musictx-generate``'s seed as its options (`GenerateOptions`) ask, and the line saying how the seed
    file's tracks were read (printed, as are where the seed starts and the silence left out; None without a
    seed file). ``level``: as `seed_from_midi`'s."""
    if not opts.seed_midi:
        return unconditional_seed(tokenizer, opts.start_velocity), None
    seed = seed_from_midi(tokenizer, opts.seed_midi, opts.seed_seconds, opts.seed_from, level)
    tracks = track_merge(tokenizer, opts.seed_midi).line()
    print(tracks)
    if said := seed.dynamics.line():
        print(said)
    if opts.seed_from:
        print(f"seed: starts at {seed.silence_dropped:.2f} s of the file, its first note at or after "
              f"seed_from={opts.seed_from:g} s; {seed.seconds:.2f} s of it kept")
    elif seed.silence_dropped:
        print(f"seed: {seed.silence_dropped:.2f} s of silence before its first note left out")
    if line := seed_past_end(opts, seed.seconds, tokenizer.config.time_step / 2):
        print(line)
    if opts.seed_seconds is None and seed.seconds > LONG_SEED_SECONDS:
        print(f"seed: all {seed.seconds:.0f} s of {opts.seed_midi} (seed_seconds=null); the new music follows its "
              "end. seed_seconds=N keeps its first N s; seed_from=end its last 10 s")
    return seed, tracks
