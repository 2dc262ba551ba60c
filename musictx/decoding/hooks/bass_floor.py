"""Bass floor (``task=accompany``): a given bass line stays the lowest voice.

A band's melody and bass given, `pop` writes the PIANO as POP909's piano plays, left hand and all, so its notes
go under the band's bass: 7.1% of the written PIANO's notes that sound with a given bass note were below it
(30 validation songs made bands, bars 9-16; docs/pop.md), where an arranger keeps the bass at the bottom. Where a
given track is a bass line (one note at a time on at least `LINE_SHARE` of its onsets, its median pitch at or
below `musictx.io.score_prep.BASS_CEILING`), a new track's Pitch drawn at a position where one of its notes sounds
may not go below that note: the model keeps its choice of everything from the bass up.

A hook of `musictx.decoding.sampling.generate` for REMI ids, after `given_notes` (whose cursor and queue it reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.hook import HookInputs, HookSpec, LogitsHook
from musictx.decoding.hooks.given_notes import GivenNotes
from musictx.decoding.option_fields import option
from musictx.io.score_prep import BASS_CEILING
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

LINE_SHARE = 0.8  # the least share of a track's onsets that strike one note for it to be read as a line


@dataclass
class BassFloorOptions:
    enabled: bool = option(True, "a given bass line (a band's bass) stays the lowest voice: the new tracks' notes "
                                 "go no lower than the bass note sounding with them; false: off")


def bass_floors(tracks, lines: np.ndarray, lengths: list[int]) -> list[np.ndarray]:
    """For each bar between ``lines`` (ticks; ``lengths``: its positions), (positions,) the lowest pitch a bass
    line among ``tracks`` (symusic tracks, the given ones) sounds at each position, 0 where none does."""
    floors = [np.zeros(n, dtype=np.int64) for n in lengths]
    for track in tracks:
        a = {k: v.astype(np.int64) for k, v in track.notes.numpy().items()}  # symusic's pitches are int8
        if not len(a["pitch"]) or np.median(a["pitch"]) > BASS_CEILING:
            continue
        if np.mean(np.unique(a["time"], return_counts=True)[1] == 1) < LINE_SHARE:
            continue  # chords in the low register: a left hand, not a line
        for floor, lo, hi in zip(floors, lines[:-1], lines[1:], strict=True):
            half = (hi - lo) / len(floor) / 2  # a note struck within half a position of it sounds there
            at = lo + (hi - lo) * np.arange(len(floor)) / len(floor)  # (n,) each position's tick
            sounding = (a["time"][None, :] <= at[:, None] + half) & (a["time"] + a["duration"] > at[:, None] + half)
            low = np.where(sounding, a["pitch"][None, :], 10_000).min(axis=1)  # (n,)
            here = low < 10_000
            floor[here] = np.where(floor[here] > 0, np.minimum(floor[here], low[here]), low[here])
    return floors


class BassFloor(LogitsHook):
    """The Pitch ids below ``floors[bar][position]`` at -inf, for a new track's note at the position `GivenNotes`
    ``given`` is at (where the floor is 0 nothing is masked; a row that would be left no id is left alone)."""

    def __init__(self, tok, given: GivenNotes, floors: list[np.ndarray]):
        self.given, self.floors = given, floors
        self.pitch_ids = tok.ids_of_type("Pitch")
        self.pitch_of = np.array([int(tok.id_to_token(int(i)).split("_")[1]) for i in self.pitch_ids])

    def __call__(self, logits: Tensor) -> Tensor:
        g, c = self.given, self.given.cursor
        out = logits
        for b in range(logits.shape[0]):
            bar = g.bar(b)
            if bar >= len(self.floors) or not g.new_pitch_next(b):
                continue
            floor = self.floors[bar][min(max(int(c.pos[b]), 0), len(self.floors[bar]) - 1)]
            below = self.pitch_ids[self.pitch_of < floor]
            if not len(below):
                continue
            row = logits[b].clone()
            row[torch.as_tensor(below, device=row.device)] = float("-inf")
            if torch.isfinite(row).any():
                out = out.clone() if out is logits else out
                out[b] = row
        return out


def _make(inputs: HookInputs, o: BassFloorOptions, given: GivenNotes) -> BassFloor | None:
    acc = inputs.accompaniment
    if not o.enabled:
        return None
    tracks = [t for t in acc.song.read.score.tracks if t.program in acc.given and not t.is_drum]
    floors = bass_floors(tracks, acc.song.lines[acc.s:acc.e + 1].astype(np.int64), acc.lengths)
    return BassFloor(inputs.tokenizer, given, floors) if any(f.any() for f in floors) else None


SPEC = HookSpec("bass_floor", BassFloorOptions, ("remi",), ("accompany",), _make,
                "a given bass line stays the lowest voice under the new tracks", needs=("given_notes",))
