"""What reading a seed file does to its tracks, said in one line: the model knows one piano, so
`musictx.io.midi_io` merges every track of a file into one stream of notes (a flute melody and a string pad
become piano notes), drops the drum channel (unless the tokenizer keeps drums), and the tokenizer leaves out
pitches outside its range. A musician handing over a band arrangement should see that happen rather than
wonder where the drums went, so ``musictx-generate`` prints this line and the app shows it.

The parts are counted as symusic reads them (the reader of the seed's notes): one per track, channel and
program, only notes that sound (a note-off on its note-on's tick sounds nothing, as `musictx.io.midi_io` says).
Notes struck together on one key (a chorale's tenor and bass in unison) are one note on a piano and in the
tokens; how many are so played once is said too (the line said "nothing dropped" while 9 of a chorale's went).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from musictx.io.tokenizer import EventTokenizer
from musictx.listed import counted

PIANO_PROGRAMS = range(8)  # General MIDI 1-8: the pianos, named by their track name alone


@dataclass
class TrackMerge:
    """The parts of one file: those merged into the piano stream and the drum parts dropped, with counts."""

    file: str  # the file's name, as the line shows it
    merged: list[str] = field(default_factory=list)  # one label per part merged
    merged_notes: int = 0
    drums: list[str] = field(default_factory=list)  # one label per drum part dropped
    drum_notes: int = 0
    out_of_range: int = 0  # merged notes outside the tokenizer's pitches, left out
    pitch_range: tuple[int, int] = (0, 127)
    unisons: int = 0  # notes struck with another on the same key at once (two voices in unison), played once

    @property
    def changed_anything(self) -> bool:
        """Whether reading did more than take one part as it is (what the app bothers to mention)."""
        return len(self.merged) > 1 or bool(self.drums) or bool(self.out_of_range) or bool(self.unisons)

    def line(self) -> str:
        """E.g. ``band.mid: merged 3 tracks (melody [Flute], bridge, piano; 96 notes) into one piano stream;
        dropped 1 drum track (kit, 412 notes)``."""
        if len(self.merged) == 1:
            text = f"{self.file}: 1 track ({self.merged[0]}, {self.merged_notes} notes) read as one piano stream"
        else:
            text = (f"{self.file}: merged {len(self.merged)} tracks ({_listing(self.merged)}; "
                    f"{self.merged_notes} notes) into one piano stream")
        dropped = []
        if self.drums:
            dropped.append(f"dropped {counted(len(self.drums), 'drum track')} ({_listing(self.drums)}, "
                           f"{self.drum_notes} notes)")
        if self.out_of_range:
            low, high = self.pitch_range
            dropped.append(f"left out {counted(self.out_of_range, 'note')} outside pitches {low}..{high}")
        if self.unisons:  # a piano has one key a pitch: a chorale's tenor and bass on one A are one note
            dropped.append(f"{counted(self.unisons, 'note')} struck with another on the same key at once (voices in "
                           "unison) played once")
        return "; ".join([text, *(dropped or ["nothing dropped"])])


def track_merge(tokenizer: EventTokenizer, path: str | os.PathLike) -> TrackMerge:
    """How ``tokenizer`` reads the tracks of ``path`` (a file it has already read: symusic opens it, without the
    grace notes the reader leaves out: `musictx.io.grace_notes`)."""
    from musictx.io.grace_notes import read_symusic

    score = read_symusic(path)
    config = tokenizer.config
    merge = TrackMerge(Path(path).name, pitch_range=(config.pitch_min, config.pitch_max))
    for track in score.tracks:
        notes = track.notes.numpy()
        pitch = notes["pitch"][notes["duration"] > 0]
        if len(pitch) == 0:
            continue
        if track.is_drum and config.drop_drums:
            merge.drums.append(_label(track))
            merge.drum_notes += len(pitch)
            continue
        merge.merged.append(_label(track))
        merge.merged_notes += len(pitch)
        merge.out_of_range += int(np.sum((pitch < config.pitch_min) | (pitch > config.pitch_max)))
    merge.unisons = _unisons(tokenizer, path)
    return merge


def _unisons(tokenizer: EventTokenizer, path) -> int:
    """How many of the notes the tokenizer keeps are struck on a key another note strikes at the same step: the
    tokens hold one note a key and onset, so all but one of them are not heard."""
    notes, c = tokenizer.read(path), tokenizer.config
    keep = (notes.pitch >= c.pitch_min) & (notes.pitch <= c.pitch_max) & (notes.velocity > 0)
    onset = np.floor(notes.start[keep] / c.time_step + 0.5).astype(np.int64)  # the grid the tokens use
    keys = np.unique(np.stack([np.maximum(onset, 0), notes.pitch[keep]]), axis=1)
    return int(keep.sum()) - keys.shape[1]


def _label(track) -> str:
    """The track's name, with its General MIDI instrument when that is not a piano; the instrument alone
    for an unnamed track ("drums" for an unnamed drum track)."""
    from pretty_midi import program_to_instrument_name

    name = track.name.strip()
    if track.is_drum:
        return name or "drums"
    instrument = program_to_instrument_name(track.program)
    if not name:
        return instrument
    return name if track.program in PIANO_PROGRAMS else f"{name} [{instrument}]"


def _listing(labels: list[str]) -> str:
    """Labels in file order, a repeated one once with its count (a track split over two channels)."""
    return ", ".join(label if n == 1 else f"{label} x{n}" for label, n in Counter(labels).items())

