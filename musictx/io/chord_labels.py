"""Chord symbols and chord files: a song's harmony as (start s, end s, pitch classes). numpy only.

A chord file is the MIR "lab" format POP909 ships as ``chord_midi.txt``: one chord a line, ``START END
LABEL`` in seconds, whitespace between, with Harte-style labels (``G:min7``, ``Eb:sus2``, ``C:maj/3``, a bare
root ``C`` for a major triad, ``N`` for no chord). Both the accompaniment (a lead sheet's chords) and the
accompaniment scorecard (the annotated chords) read it here.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass

import numpy as np

_ROOTS = {"C": 0, "D": 2, "E": 4, "F": 5, "G": 7, "A": 9, "B": 11}
# chord tones above the root of the qualities POP909 uses (counted over its 800 songs: maj, min, sus2,
# min7, maj7, sus4, 7, sus4(b7), maj6, dim, hdim7, aug, min6, dim7, minmaj7)
QUALITIES = {
    "maj": (0, 4, 7), "min": (0, 3, 7), "dim": (0, 3, 6), "aug": (0, 4, 8), "sus2": (0, 2, 7),
    "sus4": (0, 5, 7), "7": (0, 4, 7, 10), "maj7": (0, 4, 7, 11), "min7": (0, 3, 7, 10),
    "hdim7": (0, 3, 6, 10), "dim7": (0, 3, 6, 9), "maj6": (0, 4, 7, 9), "min6": (0, 3, 7, 9),
    "minmaj7": (0, 3, 7, 11), "sus4(b7)": (0, 5, 7, 10),
}
NO_CHORD = ("N", "X", "")
MAX_SECONDS = 36_000.0  # a chord after 10 hours is a typo (an END of 1e12), not a song
_ROOT_NAME = re.compile(r"[A-G][#b]*")


class ChordFileError(ValueError):
    """A chord file that cannot be read; the message names the file, the line and the problem."""


def _root_and_quality(label: str) -> tuple[int, str] | None:
    """(root pitch class, quality) of a chord label; None for ``N`` (no chord) or a label this does not know."""
    if label in NO_CHORD:
        return None
    root_text, _, rest = label.partition(":")
    quality = rest.split("/")[0] or "maj"
    if not _ROOT_NAME.fullmatch(root_text) or quality not in QUALITIES:  # "Cmaj7" is not "C:maj7": refused
        return None
    return (_ROOTS[root_text[0]] + root_text[1:].count("#") - root_text[1:].count("b")) % 12, quality


def chord_pitch_classes(label: str) -> frozenset[int]:
    """The pitch classes of a chord label; empty for ``N`` (no chord) or a label this does not know."""
    parsed = _root_and_quality(label)
    if parsed is None:
        return frozenset()
    root, quality = parsed
    return frozenset((root + i) % 12 for i in QUALITIES[quality])


def chord_quality(label: str) -> str | None:
    """The quality of a chord label (``Eb:sus2`` -> ``sus2``, a bare root ``C`` -> ``maj``); None for ``N`` or
    a label this does not know."""
    parsed = _root_and_quality(label)
    return None if parsed is None else parsed[1]


def chord_root(label: str) -> int:
    """The root pitch class of a chord label (``Eb:sus2`` -> 3); -1 for ``N`` or a label this does not know."""
    parsed = _root_and_quality(label)
    return -1 if parsed is None else parsed[0]


@dataclass(frozen=True)
class Chords:
    """A song's chords in time order: (C,) starts and ends in seconds, each one's pitch classes, root
    pitch class (-1: no chord) and label as the file writes it."""

    starts: np.ndarray
    ends: np.ndarray
    tones: list[frozenset[int]]
    roots: np.ndarray  # (C,)
    labels: tuple[str, ...] = ()

    def at(self, t: float) -> frozenset[int]:
        """The pitch classes of the chord sounding at ``t`` seconds (empty where none is)."""
        k = int(np.searchsorted(self.starts, t, side="right")) - 1
        return self.tones[k] if 0 <= k < len(self.tones) and t < self.ends[k] else frozenset()

    def label_at(self, t: float) -> str:
        """The label of the chord sounding at ``t`` seconds as the file writes it (``N`` where none is)."""
        k = int(np.searchsorted(self.starts, t, side="right")) - 1
        return self.labels[k] if 0 <= k < len(self.labels) and t < self.ends[k] else "N"

    def short_of(self, start: float, end: float, what: str) -> str | None:
        """One line where these chords leave the end of the span ``start``-``end`` (seconds) without a chord: none of
        them reaches it, or they stop before its end; None where the last chord lasts to its end. ``what`` names the
        lead sheet and the span (e.g. "chords=sheet.lab ... the new music")."""
        sounding = [k for k, tones in enumerate(self.tones) if tones]
        first = min((float(self.starts[k]) for k in sounding), default=float("inf"))
        last = max((float(self.ends[k]) for k in sounding), default=float("-inf"))
        span = f"{start:.1f}-{end:.1f} s"
        if last <= start or first >= end:
            return f"{what} ({span}): no chord of the lead sheet falls there (its chords run {first:.1f}-{last:.1f} s)"
        if last < end - 1e-3:
            return (f"{what} ({span}): the lead sheet's chords end at {last:.1f} s, so the last {end - last:.1f} s "
                    "follow none")
        return None

    @classmethod
    def read_option(cls, path: str | os.PathLike | None, option: str = "chords") -> Chords | None:
        """A user's lead sheet given as ``option=path`` (None: no lead sheet): a bad file is a `ChordFileError`
        saying the option, the file, the line and the problem."""
        if path is None:
            return None
        try:
            return cls.read(path)
        except ChordFileError as err:
            raise ChordFileError(f"{option}={err}") from None

    @classmethod
    def read(cls, path: str | os.PathLike, strict: bool = True) -> Chords:
        """The chords of a lab file. ``strict``: a line that is not ``START END LABEL`` with START <= END, or a
        label this does not know, is a `ChordFileError` naming the file and line (a user's lead sheet);
        otherwise such lines are skipped (POP909's own files, read for scoring)."""
        starts, ends, tones, roots, numbers, labels = [], [], [], [], [], []
        lines = _lines(path)
        for n, line in enumerate(lines, 1):
            parts = line.split()
            if not parts or line.lstrip().startswith("#"):
                continue
            problem = _problem(parts)
            if problem:
                if strict:
                    raise ChordFileError(f"{path}, line {n}: {problem} (want 'START END LABEL', seconds, "
                                         f"e.g. '0.0 2.4 G:min7'), got {line.strip()!r}")
                continue
            starts.append(float(parts[0]))
            ends.append(float(parts[1]))
            tones.append(chord_pitch_classes(parts[2]))
            roots.append(chord_root(parts[2]))
            numbers.append(n)
            labels.append(parts[2])
        if strict and not any(tones):
            raise ChordFileError(f"{path}: no chords in the file (want lines 'START END LABEL', e.g. '0.0 2.4 C:maj')")
        order = np.argsort(starts, kind="stable")
        if strict:
            _check_overlaps(path, np.asarray(starts)[order], np.asarray(ends)[order], [numbers[k] for k in order])
        return cls(np.asarray(starts)[order], np.asarray(ends)[order], [tones[k] for k in order],
                   np.asarray(roots, dtype=np.int64)[order], tuple(labels[k] for k in order))


def _lines(path: str | os.PathLike) -> list[str]:
    """The lines of a lab file; ChordFileError naming it when it is a folder, a FIFO or device, or unreadable
    (a FIFO is not opened: reading one waits for a writer forever)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise ChordFileError(f"{path}: cannot read the chord file ({err.strerror or err})") from None
    if stat.S_ISDIR(mode):
        raise ChordFileError(f"{path}: a folder, not a chord file (a lab file of 'START END LABEL' lines)")
    if not stat.S_ISREG(mode):
        raise ChordFileError(f"{path}: not a regular file (a FIFO, socket or device), not a chord file")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(64 * 2**20).splitlines()  # a lab file of 64 MB would be a million chords
    except OSError as err:
        raise ChordFileError(f"{path}: cannot read the chord file ({err.strerror or err})") from None


def _check_overlaps(path, starts: np.ndarray, ends: np.ndarray, numbers: list[int]) -> None:
    """ChordFileError naming the two lines where a chord starts before the one before it ends (10 ms of
    rounding allowed): which of the two sounds there cannot be told."""
    for k in np.flatnonzero(starts[1:] < ends[:-1] - 0.01):
        raise ChordFileError(f"{path}, lines {numbers[k]} and {numbers[k + 1]}: the chords overlap ({starts[k]:g}-"
                             f"{ends[k]:g} s and {starts[k + 1]:g}-{ends[k + 1]:g} s); one chord at a time")


def _problem(parts: list[str]) -> str | None:
    """What is wrong with one split line of a lab file, or None."""
    if len(parts) < 3:
        return "a line needs three fields"
    try:
        start, end = float(parts[0]), float(parts[1])
    except ValueError:
        return "START and END must be numbers of seconds"
    if not (np.isfinite(start) and np.isfinite(end) and 0 <= start <= end):
        return "START and END must be finite, >= 0 and in order"
    if end > MAX_SECONDS:
        return f"END is past {MAX_SECONDS:g} s (10 hours)"
    if parts[2] not in NO_CHORD and not chord_pitch_classes(parts[2]):
        return f"unknown chord {parts[2]!r} (roots A-G with # or b; qualities {', '.join(QUALITIES)})"
    return None
