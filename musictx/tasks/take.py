"""What a sampler hands the writer: each sample as plain data (`Take`), and the batch they came in (`Batch`).

The three kinds of ``musictx-generate`` run (a performance continued, a metrical seed continued by bars, bars
filled in or accompanied) sample differently but write alike. Each sampler decodes its ids, counts what its
record and summary line say, and returns a `Batch`; `musictx.generation.output_folder.write_run` writes
it without calling back into the sampler, so a run reads options -> model -> seed -> sample -> write.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from symusic import Score

from musictx.io.midi_io import Notes
from musictx.io.midi_timing import MidiTiming
from musictx.io.score_io import score_to_pretty_midi


@dataclass
class Take:
    """One sample, decoded and ready to write."""

    music: Notes | Score  # the MIDI file's content: piano notes (one track) or a score (named tracks)
    roll: Notes  # what the piano roll draws
    record: dict  # its entries in generation.json after the file names (notes, new_seconds, stop ...)
    line: str  # the summary printed after its path once the run's record is written
    timing: MidiTiming | None = None  # piano notes: the seed's tempo map and meter (None: 120 bpm, 4/4)
    track: str = "musictx piano"  # piano notes: the track's name
    program: int = 0  # piano notes: the track's General MIDI program (`musictx.generation.programs`)
    takeover: float | None = None  # the piano roll marks where the seed ends (None: no seed drawn)
    earlier_from: float | None = None  # see `musictx.io.piano_roll.plot_piano_roll`
    parts: list[tuple[str, Notes]] | None = None  # the roll's notes by track, drawn each in its colour
    marked: tuple[float, float] | None = None  # seconds of the bars a model wrote inside a song, shaded


@dataclass
class Batch:
    """A run's samples with what its record says about how they were made."""

    takes: list[Take]
    about: dict  # the kind's own entries of generation.json (its seed, bars or task), before "samples"
    wall: float  # seconds of sampling
    cut_short: bool = False  # a Ctrl-C stopped the sampling: the takes are the partial samples


def score_roll(score: Score) -> tuple[Notes, dict, float, list[tuple[str, Notes]]]:
    """(all notes of ``score`` in seconds, notes per track name, its end in seconds, the notes by track), as
    its MIDI file plays."""
    pm = score_to_pretty_midi(score)
    labels = track_labels(pm.instruments)
    parts = [(label, Notes(np.array([n.start for n in i.notes]), np.array([n.end for n in i.notes]),
                           np.array([n.pitch for n in i.notes], dtype=np.int64),
                           np.array([n.velocity for n in i.notes], dtype=np.int64)))
             for label, i in zip(labels, pm.instruments, strict=True)]
    notes = Notes.concat([p for _, p in parts])
    return notes, {label: len(i.notes) for label, i in zip(labels, pm.instruments, strict=True)}, \
        pm.get_end_time(), parts


def track_labels(tracks) -> list[str]:
    """Each track's label in a summary, told apart: its name, else ``program N`` (``drums``), a second of the
    same label numbered (``program 0 (2)``); one dictionary entry per track, where names alone collide."""
    labels, seen = [], Counter()
    for t in tracks:
        label = _as_written(t.name) or ("drums" if t.is_drum else f"program {t.program}")
        seen[label] += 1
        labels.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return labels


def _as_written(name: str) -> str:
    """A track name as its file spells it: pretty_midi (mido) reads a name's bytes as Latin-1, so a name written in
    UTF-8 (a Chinese 音轨1) came back as mojibake (é\x9f³è½¨1) in the sample's line and record, beside a seed line that
    names it right; a name that is not UTF-8 is left as read."""
    try:
        return name.encode("latin-1").decode("utf-8")
    except UnicodeError:  # not Latin-1 characters, or not UTF-8 bytes: a name read right already
        return name
