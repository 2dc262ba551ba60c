"""Chord tones on strong beats: does an accompaniment play the song's harmony where it is heard most?
Reads POP909's annotations (``chord_midi.txt``: start s, end s, Harte-style label such as ``G:min7``,
``Eb:sus2``, ``C:maj/3`` or ``N``; ``beat_midi.txt``: time s, half-bar flag, downbeat flag). numpy only."""

from __future__ import annotations

import os
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
ON_BEAT_S = 0.06  # an onset this close to a strong beat is on it (POP909's notes sit on a 16th grid)


def chord_pitch_classes(label: str) -> frozenset[int]:
    """The pitch classes of a chord label; empty for ``N`` (no chord) or a label this does not know."""
    if label in ("N", "X", ""):
        return frozenset()
    root_text, _, rest = label.partition(":")
    quality = rest.split("/")[0] or "maj"
    if not root_text or root_text[0] not in _ROOTS or quality not in QUALITIES:
        return frozenset()
    root = _ROOTS[root_text[0]] + root_text[1:].count("#") - root_text[1:].count("b")
    return frozenset((root + i) % 12 for i in QUALITIES[quality])


@dataclass(frozen=True)
class Harmony:
    """A song's chords (start, end, pitch classes) and its strong beats (downbeats and half bars), seconds."""

    starts: np.ndarray  # (C,)
    ends: np.ndarray  # (C,)
    tones: list[frozenset[int]]
    strong_beats: np.ndarray  # (S,)

    @classmethod
    def read(cls, chords_path: str | os.PathLike, beats_path: str | os.PathLike) -> Harmony:
        starts, ends, tones = [], [], []
        with open(chords_path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    starts.append(float(parts[0]))
                    ends.append(float(parts[1]))
                    tones.append(chord_pitch_classes(parts[2]))
        beats = np.loadtxt(beats_path, ndmin=2)
        strong = beats[(beats[:, 1] == 1) | (beats[:, 2] == 1), 0]
        return cls(np.array(starts), np.array(ends), tones, np.sort(strong))

    def chord_at(self, t: float) -> frozenset[int]:
        k = int(np.searchsorted(self.starts, t, side="right")) - 1
        return self.tones[k] if 0 <= k < len(self.tones) and t < self.ends[k] else frozenset()

    def strong_onsets(self, onsets: np.ndarray) -> np.ndarray:
        """(N,) whether each onset falls on a strong beat."""
        if len(self.strong_beats) == 0 or len(onsets) == 0:
            return np.zeros(len(onsets), dtype=bool)
        k = np.clip(np.searchsorted(self.strong_beats, onsets), 1, len(self.strong_beats) - 1)
        near = np.minimum(np.abs(onsets - self.strong_beats[k - 1]), np.abs(onsets - self.strong_beats[k]))
        return near <= ON_BEAT_S

    def chord_tone_share(self, onsets: np.ndarray, pitches: np.ndarray) -> tuple[float, float]:
        """(share of the notes struck on strong beats under a chord whose pitch class is a chord tone,
        chance: the share a uniformly random pitch class would get on the same onsets); nan for none."""
        hits, chance, count = 0, 0.0, 0
        for t, p in zip(np.asarray(onsets)[self.strong_onsets(np.asarray(onsets))],
                        np.asarray(pitches)[self.strong_onsets(np.asarray(onsets))], strict=True):
            tones = self.chord_at(float(t))
            if tones:
                hits += int(p) % 12 in tones
                chance += len(tones) / 12
                count += 1
        return (hits / count, chance / count) if count else (float("nan"), float("nan"))
