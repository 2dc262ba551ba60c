"""Chord tones on strong beats: does an accompaniment play the song's harmony where it is heard most?
Reads POP909's annotations (``chord_midi.txt``: start s, end s, Harte-style label such as ``G:min7``,
``Eb:sus2``, ``C:maj/3`` or ``N``; ``beat_midi.txt``: time s, half-bar flag, downbeat flag). numpy only."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from musictx.io.chord_labels import Chords

ON_BEAT_S = 0.06  # an onset this close to a strong beat is on it (POP909's notes sit on a 16th grid)


@dataclass(frozen=True)
class Harmony:
    """A song's chords and its strong beats (downbeats and half bars), seconds."""

    chords: Chords
    strong_beats: np.ndarray  # (S,)

    @classmethod
    def read(cls, chords_path: str | os.PathLike, beats_path: str | os.PathLike) -> Harmony:
        beats = np.loadtxt(beats_path, ndmin=2)
        strong = beats[(beats[:, 1] == 1) | (beats[:, 2] == 1), 0]
        return cls(Chords.read(chords_path, strict=False), np.sort(strong))

    def chord_at(self, t: float) -> frozenset[int]:
        return self.chords.at(t)

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

    def pitch_classes_per_span(self, onsets: np.ndarray, pitches: np.ndarray) -> float:
        """The mean number of distinct pitch classes struck between two strong beats (half bars in 4/4), over the
        spans with a note: how full the harmony is (a triad: 3; octaves of one note: 1); nan for none."""
        onsets, pitches = np.asarray(onsets), np.asarray(pitches)
        span = np.searchsorted(self.strong_beats, onsets + ON_BEAT_S, side="right")  # (N,) span of each onset
        counts = [len(set((pitches[span == k] % 12).tolist())) for k in np.unique(span)]
        return float(np.mean(counts)) if counts else float("nan")
