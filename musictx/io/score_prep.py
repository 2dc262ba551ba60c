"""Scores ready for the metrical tokenizer (no torch): tracks told apart by role, bars where the music's bars are.

Two things a MIDI file does not say reliably and a metrical, multi-track token stream needs:

- **Which track is which.** MidiTok's ``use_programs`` keys a note's track by its program, and POP909's
  MELODY, BRIDGE and PIANO are all program 0, so they would merge. Each track gets an *internal* program:
  a known role by name (``ROLE_PROGRAMS``), else its own program, moved to the next free one of its GM
  family when another track already has it. A `TrackMap` remembers each track's name and real program, so
  the decoded music comes back as the same named tracks.
- **Where the bars are.** POP909's time-signature events are mostly 1/4 or 2/4 whatever the song's meter,
  and songs open with a pickup. Its ``beat_midi.txt`` has the real downbeats: the meter is taken from them
  and the notes are moved so that the first downbeat falls on a bar line. A user's file keeps its own
  tempo map and meter.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from symusic import Score, TimeSignature

from musictx.listed import listed

# The roles a pop song's tracks play, and the internal program each one is written with. Lead-like GM
# programs for the melodies, so that a user's piano track (program 0) reads as accompaniment.
ROLE_PROGRAMS = {"MELODY": 80, "BRIDGE": 81, "PIANO": 0}
_ROLE_OF_PROGRAM = {program: role for role, program in ROLE_PROGRAMS.items()}
BASS_CEILING = 55  # a bar's lowest downbeat note at or below G3 is its bass (a pop melody rarely goes this low)
_ROLE_NAMES = [("MELODY", re.compile(r"melod|vocal|voice|lead|sing|soprano", re.I)),
               ("BRIDGE", re.compile(r"bridge|counter|second|\bcau\b", re.I)),  # CAU: POP909's other arrangements
               ("PIANO", re.compile(r"^\s*piano\s*$", re.I))]  # a name that is only piano: the accompaniment


@dataclass(frozen=True)
class Track:
    """One track of the music: its internal program in the tokens, its name and its real program."""

    program: int  # internal program (MidiTok's Program token); -1 for drums
    name: str
    real_program: int
    is_drum: bool = False

    def describe(self, nth: int = 1) -> str:
        """How a message names it: ``bass (program 33)``, ``(unnamed) (drums)``; ``nth``: the how-manieth track
        named so it is, counted from the second (``Violin (2) (program 40)``)."""
        name = self.name.strip() or "(unnamed)"
        return f"{name}{f' ({nth})' if nth > 1 else ''} ({'drums' if self.is_drum else f'program {self.real_program}'})"


@dataclass(frozen=True)
class TrackMap:
    tracks: tuple[Track, ...]

    def by_program(self) -> dict[int, Track]:
        return {t.program: t for t in self.tracks}

    def to_list(self) -> list[dict]:
        return [asdict(t) for t in self.tracks]

    @classmethod
    def from_list(cls, rows: list[dict]) -> TrackMap:
        return cls(tuple(Track(**r) for r in rows))

    def describe(self) -> str:
        return listed(t.describe() for t in self.tracks)


def part_name(program: int) -> str:
    """How a message names the part an internal program plays: its role (``MELODY``), ``drums``, else ``program N``."""
    return _ROLE_OF_PROGRAM.get(program, "drums" if program == -1 else f"program {program}")


def role_of(name: str) -> str | None:
    for role, pattern in _ROLE_NAMES:
        if pattern.search(name or ""):
            return role
    return None


def _free_program(wanted: int, taken: set[int]) -> int:
    """``wanted`` if free, else the next free program of its GM family of 8, else any free one."""
    family = wanted - wanted % 8
    for p in [wanted, *range(family, family + 8), *range(128)]:
        if p not in taken:
            return p
    raise ValueError("more than 128 pitched tracks: no internal program left for another one")


def assign_programs(score: Score) -> TrackMap:
    """Give every track of ``score`` its own internal program, in place, and return the map back."""
    taken: set[int] = set()
    rows: list[Track | None] = [None] * len(score.tracks)
    roles = [None if t.is_drum else role_of(t.name) for t in score.tracks]
    # the tracks named for a role first, so that an unnamed track on program 0 cannot take the named piano's place
    for k in sorted(range(len(score.tracks)), key=lambda k: roles[k] is None):
        track = score.tracks[k]
        if track.is_drum:
            rows[k] = Track(-1, track.name, int(track.program), True)
            continue
        program = _free_program(ROLE_PROGRAMS[roles[k]] if roles[k] else int(track.program), taken)
        taken.add(program)
        rows[k] = Track(program, track.name, int(track.program))
        track.program = program
    return TrackMap(tuple(rows))


def drum_tracks_merged(score: Score) -> int:
    """How many drum tracks share the one drum stream (MidiTok keeps a single drum program)."""
    return max(sum(t.is_drum for t in score.tracks) - 1, 0)


# ----- meter from annotated beats (POP909) ------------------------------------------------------
@dataclass(frozen=True)
class Meter:
    beats_per_bar: int
    first_downbeat_tick: int
    beat_ticks: int

    @property
    def bar_ticks(self) -> int:
        return self.beats_per_bar * self.beat_ticks


def beats_file_of(path: str | os.PathLike) -> Path | None:
    """POP909's ``beat_midi.txt`` beside ``path``, if there is one."""
    p = Path(path).with_name("beat_midi.txt")
    return p if p.exists() else None


def chord_file_of(path: str | os.PathLike) -> Path | None:
    """POP909's ``chord_midi.txt`` beside ``path``, if there is one."""
    p = Path(path).with_name("chord_midi.txt")
    return p if p.exists() else None


def read_meter(beats_path: str | os.PathLike, score_in_ticks: Score) -> Meter:
    """Beats per bar and the first downbeat's tick from a beat file: rows of time (s), half-bar flag,
    downbeat flag. (POP909's notes already sit on its MIDI ticks' grid; re-timing them by the annotated
    beats instead put no more of them on the grid.)"""
    try:
        rows = np.loadtxt(beats_path, ndmin=2)
    except ValueError as err:
        raise ValueError(f"{beats_path}: not a beat file ({err})") from None
    if rows.shape[1] < 3 or len(rows) < 2:
        raise ValueError(f"{beats_path}: expected 2 or more rows of (time, half-bar flag, downbeat flag)")
    downbeats = np.flatnonzero(rows[:, 2] == 1)
    if len(downbeats) == 0:
        raise ValueError(f"{beats_path}: no downbeat marked")
    beats_per_bar = max(int(np.median(np.diff(downbeats))), 1) if len(downbeats) > 1 else 4
    tpq = score_in_ticks.ticks_per_quarter
    first_s = np.array([float(rows[downbeats[0], 0])])
    first = int(round(float(seconds_to_ticks(score_in_ticks, first_s)[0])))
    beat_s = float(np.median(np.diff(rows[:, 0])))
    beat_ends = seconds_to_ticks(score_in_ticks, np.array([first_s[0], first_s[0] + beat_s]))
    beat_ticks = int(round(float(beat_ends[1] - beat_ends[0])))
    # beats are quarters in all 800 songs; an eighth-note beat would make n/8
    beat_ticks = tpq // 2 if abs(beat_ticks - tpq / 2) < abs(beat_ticks - tpq) else tpq
    return Meter(beats_per_bar, first, beat_ticks)


def seconds_to_ticks(score: Score, seconds: np.ndarray) -> np.ndarray:
    """Ticks (float) of times in seconds under the score's tempo map (120 bpm before its first tempo)."""
    tpq = score.ticks_per_quarter
    tempos = sorted(score.tempos, key=lambda t: t.time)
    ticks = np.array([0] + [t.time for t in tempos if t.time > 0], dtype=np.float64)
    mspq = np.full(len(ticks), 500000.0)
    for t in tempos:
        mspq[int(np.searchsorted(ticks, t.time, side="right")) - 1] = t.mspq
    sec_per_tick = mspq / 1e6 / tpq
    starts = np.concatenate([[0.0], np.cumsum(np.diff(ticks) * sec_per_tick[:-1])])  # seconds at each change
    k = np.clip(np.searchsorted(starts, seconds, side="right") - 1, 0, len(starts) - 1)
    return ticks[k] + (np.asarray(seconds, dtype=np.float64) - starts[k]) / sec_per_tick[k]


def apply_meter(score: Score, meter: Meter) -> int:
    """Move every event of ``score`` later, in place, so that the first downbeat lands on a bar line, and
    write the meter as its only time signature. Returns the shift in ticks (0 <= shift < one bar)."""
    shift = (-meter.first_downbeat_tick) % meter.bar_ticks
    if shift:
        score.shift_time(shift, inplace=True)
        for tempo in score.tempos[:1]:  # the first tempo applies from the start, as before the shift
            tempo.time = 0
    denominator = 8 if meter.beat_ticks * 2 == score.ticks_per_quarter else 4
    score.time_signatures = [TimeSignature(0, meter.beats_per_bar, denominator)]
    return shift
