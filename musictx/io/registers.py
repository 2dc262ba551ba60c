"""A track played outside the tokenizer's pitches, read an octave (or more) into them and written back where it was.

MidiTok's REMI knows the pitches of a piano (21..108) and leaves every other note out, silently: a piccolo's top
octave or a synth's sub-bass vanished from the seed the model heard, and from the seed written back with the new
bars. So before a metrical seed or song is encoded each pitched track whose notes fall outside the range moves by
whole octaves to where the fewest of them are left out (the nearest such move, none where none helps): its line
and pitch classes are the same, only the register changes. The notes still outside after that (a track wider than
the range) are left out, counted. `Registers.back` moves the written tracks back by their octaves, new notes and
all, so the piccolo goes on in the piccolo's register; `Registers.line` says what moved in one line.

Drum notes are no pitches (a drum kit's pitch is its instrument) and never move.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from symusic import Score

from musictx.io.score_io import note_list
from musictx.listed import counted

OCTAVE = 12
MIDI_PITCHES = (0, 127)


@dataclass(frozen=True)
class Registers:
    """What `fit_registers` did to a score's tracks."""

    low: int  # the tokenizer's pitches
    high: int
    moves: dict[tuple[str, int], int] = field(default_factory=dict)  # (name, program) -> semitones added (octaves)
    left_out: int = 0  # notes outside the pitches after the move, left out
    described: dict[tuple[str, int], str] = field(default_factory=dict)  # (name, program) -> how a line names it

    def line(self) -> str:
        """E.g. ``Piccolo (program 72) read 1 octave down, into the model's pitches 21..108, and written back where
        it was; 3 notes outside them left out``; "" where nothing moved or was left out."""
        said = []
        if self.moves:
            moved = [f"{self.described[key]} read {_octaves(semitones)}" for key, semitones in self.moves.items()]
            back = "where it was" if len(moved) == 1 else "where they were"
            into = f"into the model's pitches {self.low}..{self.high}"
            said.append(f"{', '.join(moved)}, {into}, and written back {back}")
        if self.left_out:
            noun = "note" if self.left_out == 1 else "notes"
            said.append(f"{self.left_out} {noun} outside pitches {self.low}..{self.high} left out")
        return "; ".join(said)

    def pitch_back(self, key: tuple[str, int], pitch: int) -> int:
        """A note's ``pitch`` on the track ``key`` (name, program) moved back (`back`, one note)."""
        return int(_within_midi(np.array([pitch - self.moves.get(key, 0)]))[0])

    def back(self, score: Score) -> Score:
        """``score`` (in place) with each moved track's notes moved back by its octaves: a track is known by its name
        and program, as the written file names it. A new note moved past MIDI's pitches stays an octave inside."""
        for track in score.tracks:
            semitones = self.moves.get((track.name, int(track.program)))
            if semitones and not track.is_drum:
                track.notes = _moved_notes(track.notes, -semitones)
        return score


def fit_registers(score: Score, keys: list[tuple[str, int]], names: list[str], low: int, high: int) -> Registers:
    """Move each pitched track of ``score`` (in place) by the octaves that leave the fewest of its notes outside
    ``low..high``, and drop those still outside. ``keys``: (name, real program) of each track, how the written file
    will name it (tracks of one key move together); ``names``: how a message names each."""
    pitches: dict[tuple[str, int], list[np.ndarray]] = {}
    for track, key in zip(score.tracks, keys, strict=True):
        if not track.is_drum and len(track.notes):
            pitches.setdefault(key, []).append(track.notes.numpy()["pitch"])
    moves = {key: best_move(np.concatenate(arrays), low, high) for key, arrays in pitches.items()}
    moves = {key: semitones for key, semitones in moves.items() if semitones}
    left_out = 0
    for track, key in zip(score.tracks, keys, strict=True):
        if track.is_drum or not len(track.notes):
            continue
        moved = (track.notes.numpy()["pitch"] + moves.get(key, 0)).astype(np.int64)
        outside = (moved < low) | (moved > high)
        if moves.get(key) or outside.any():
            left_out += int(outside.sum())
            track.notes = _moved_notes(track.notes, moves.get(key, 0), keep=~outside)
    described = {key: name for key, name in zip(keys, names, strict=True) if key in moves}
    return Registers(low, high, moves, left_out, described)


def best_move(pitches: np.ndarray, low: int, high: int) -> int:
    """The octaves (in semitones) that put the most of ``pitches`` inside ``low..high``, the nearest first; 0 where
    they are all inside already."""
    best, kept = 0, int(np.sum((pitches >= low) & (pitches <= high)))
    for octaves in sorted(range(-10, 11), key=abs):
        shifted = pitches + octaves * OCTAVE
        inside = int(np.sum((shifted >= low) & (shifted <= high)))
        if inside > kept:
            best, kept = octaves * OCTAVE, inside
    return best


def _moved_notes(notes, semitones: int, keep: np.ndarray | None = None):
    """A copy of a symusic note list with every pitch moved by ``semitones`` (kept within MIDI's pitches by
    octaves), only the notes ``keep`` says (None: all)."""
    a = notes.numpy()
    pitch = _within_midi(a["pitch"].astype(np.int64) + semitones)
    rows = slice(None) if keep is None else keep
    return note_list(a["time"][rows], a["duration"][rows], pitch[rows], a["velocity"][rows])


def _within_midi(pitch: np.ndarray) -> np.ndarray:
    """``pitch`` (N,), each past MIDI's pitches brought back inside by whole octaves."""
    low, high = MIDI_PITCHES
    pitch = np.where(pitch > high, pitch - OCTAVE * np.ceil((pitch - high) / OCTAVE), pitch)
    return np.where(pitch < low, pitch + OCTAVE * np.ceil((low - pitch) / OCTAVE), pitch).astype(np.int64)


def _octaves(semitones: int) -> str:
    n = abs(semitones) // OCTAVE
    return f"{counted(n, 'octave')} {'up' if semitones > 0 else 'down'}"
