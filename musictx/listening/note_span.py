"""Notes with their tracks, on a file's own clock: what the continuation scorecard measures. No torch."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pretty_midi

from musictx.io.midi_io import Notes, apply_sustain, sustain_events


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
    def from_pretty_midi(pm: pretty_midi.PrettyMIDI, drop_drums: bool = True, sustain: bool = False) -> Span:
        """One track per instrument, named as in the file (``program N`` when unnamed). ``sustain``: notes as
        they sound, held on by the sustain pedal as a Performance tokenizer folds it (`sounding_ends`), so
        that a model's notes, which carry the pedal in their lengths, are compared like with like."""
        rows, names = [], []
        for inst in pm.instruments:
            if drop_drums and inst.is_drum:
                continue
            k = len(names)
            names.append(inst.name or f"program {inst.program}")
            part = np.array([(n.start, n.end, n.pitch, n.velocity, k) for n in inst.notes], dtype=np.float64)
            if sustain and len(part):
                part[:, 1] = sounding_ends(inst, part[:, 0], part[:, 1], part[:, 2])
            rows += part.tolist()
        a = np.array(rows, dtype=np.float64).reshape(-1, 5)
        order = np.lexsort((a[:, 2], a[:, 0]))
        a = a[order]
        return Span(a[:, 0], a[:, 1], a[:, 2].astype(np.int64), a[:, 3].astype(np.int64), a[:, 4].astype(np.int64),
                    names)


def sounding_ends(inst: pretty_midi.Instrument, start: np.ndarray, end: np.ndarray, pitch: np.ndarray) -> np.ndarray:
    """(N,) the ends of one instrument's notes as they sound: the tokenizer's sustain rule
    (`musictx.io.midi_io.apply_sustain`), then a pitch struck again ends the note still sounding on it."""
    held = apply_sustain(Notes(start, end, pitch.astype(np.int64), np.ones(len(start), dtype=np.int64)),
                         *sustain_events(inst)).end
    order = np.lexsort((start, pitch))  # by pitch, then onset
    p, s, e = pitch[order], start[order], held[order]
    restruck = np.zeros(len(p), dtype=bool)
    restruck[:-1] = (p[1:] == p[:-1]) & (s[1:] > s[:-1])
    e[:-1] = np.where(restruck[:-1], np.minimum(e[:-1], s[1:]), e[:-1])
    out = np.empty_like(held)
    out[order] = e
    return out
