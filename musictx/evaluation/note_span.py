"""Notes with their tracks, on a file's own clock: what the continuation scorecard measures. No torch."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pretty_midi


@dataclass
class Span:
    start: np.ndarray  # (N,) onsets, seconds
    end: np.ndarray  # (N,) seconds
    pitch: np.ndarray  # (N,) int
    velocity: np.ndarray  # (N,) int
    track: np.ndarray  # (N,) index into track_names
    track_names: list[str]

    def __len__(self) -> int:
        return len(self.pitch)

    def select(self, mask: np.ndarray) -> Span:
        return Span(self.start[mask], self.end[mask], self.pitch[mask], self.velocity[mask], self.track[mask],
                    self.track_names)

    def window(self, t0: float, t1: float) -> Span:
        """The notes struck in [t0, t1), times unchanged."""
        return self.select((self.start >= t0) & (self.start < t1))

    def shifted(self, seconds: float) -> Span:
        return Span(self.start + seconds, self.end + seconds, self.pitch, self.velocity, self.track, self.track_names)

    @staticmethod
    def from_pretty_midi(pm: pretty_midi.PrettyMIDI, drop_drums: bool = True) -> Span:
        """One track per instrument, named as in the file (``program N`` when unnamed)."""
        rows, names = [], []
        for inst in pm.instruments:
            if drop_drums and inst.is_drum:
                continue
            k = len(names)
            names.append(inst.name or f"program {inst.program}")
            rows += [(n.start, n.end, n.pitch, n.velocity, k) for n in inst.notes]
        a = np.array(rows, dtype=np.float64).reshape(-1, 5)
        order = np.lexsort((a[:, 2], a[:, 0]))
        a = a[order]
        return Span(a[:, 0], a[:, 1], a[:, 2].astype(np.int64), a[:, 3].astype(np.int64), a[:, 4].astype(np.int64),
                    names)
