"""Chord lean: a lead sheet leads a continuation (``musictx-generate seed_midi=song.mid chords=song.lab``).

A continuation cannot know where the song's harmony goes next: the seed's progression carried on fits the
real next 30 s poorly (docs/two-sample-2026-11.md measures how poorly, ``scripts/chord_foresight.py``). Given
the chords, it can follow them, as the accompaniment does from a lead sheet
(`musictx.decoding.hooks.given_notes.HarmonyLean`).

Each new bar's two halves take the chord the lab file has at their start, on the seed file's own clock (the
file's bar lines, carried on at the last bar's length past its end); where a note's Pitch comes next (right
after its Program), the pitches of that chord's pitch classes get a logit bonus of ``harmony``. Whether a
note plays, and where, stays the model's. A half bar the file gives no chord gets none.

A hook of `musictx.decoding.sampling.generate` for REMI ids with programs; after the grammar guard, so a
bonus never revives a forbidden id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.filters import like_logits
from musictx.decoding.hook import HookInputs, HookSpec
from musictx.decoding.option_fields import strength_option
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

LOOKUP_AFTER_S = 0.03  # a chord file's times and the bar lines differ by milliseconds: look just after the line


def half_bar_chords(chords, lines_s: np.ndarray) -> np.ndarray:
    """(bars, 2, 12) bool: the pitch classes of the chord at the start of each half of each bar between
    ``lines_s`` (bar lines in seconds, one more than the bars)."""
    out = np.zeros((len(lines_s) - 1, 2, 12), dtype=bool)
    for k, (a, z) in enumerate(zip(lines_s[:-1], lines_s[1:], strict=True)):
        for half, t in enumerate((a, (a + z) / 2)):
            out[k, half, sorted(chords.at(t + LOOKUP_AFTER_S))] = True
    return out


class ChordLean(ReadsCursor):
    """Where a note's Pitch comes next (right after its Program), a bonus of ``strength`` on the Pitch ids of the
    chord the new bar's half has (`half_bar_chords`)."""

    def __init__(self, tokenizer, halves: np.ndarray, strength: float, cursor: RemiCursor | None = None):
        tok = tokenizer
        self.strength, self.halves = float(strength), halves
        self._read(tok, cursor)
        self.pitch_ids = tok.ids_of_type("Pitch")  # (P,)
        self.pitch_class = tok.numbers_of("Pitch")[self.pitch_ids] % 12  # (P,)
        self.is_program = tok.numbers_of("Program") >= 0  # (V,)

    def weights(self, b: int) -> np.ndarray | None:
        """(12,) bool: the chord under row b's place, or None before a Position or past the chords given."""
        c = self.cursor
        k, pos = c.new_bar(b), int(c.pos[b])
        if pos < 0 or not 0 <= k < len(self.halves):
            return None
        return self.halves[k, int(2 * pos >= c.bar_len[b])]

    def __call__(self, logits: Tensor) -> Tensor:
        last = self.cursor.last
        at_pitch = np.flatnonzero((last >= 0) & self.is_program[np.maximum(last, 0)])
        leans = [(b, w) for b in at_pitch.tolist() if (w := self.weights(b)) is not None and w.any()]
        if not leans:
            return logits
        # one dense (B, V) bonus built on the host and one add: cheaper at batch 1 than indexing the logits
        bonus = np.zeros(tuple(logits.shape), dtype=np.float32)
        for b, w in leans:
            bonus[b, self.pitch_ids] = self.strength * w[self.pitch_class]
        return logits + like_logits(torch.from_numpy(bonus), logits)


@dataclass
class ChordLeanOptions:
    strength: float = strength_option(3.0, (
        "with chords=: the logit bonus of a new pitch the chord at that time holds; 0: off"))


def _make(inputs: HookInputs, o: ChordLeanOptions) -> ChordLean | None:
    strength = o.strength
    if inputs.chords is None or inputs.new_bar_lines_s is None or not strength:
        return None
    halves = half_bar_chords(inputs.chords, inputs.new_bar_lines_s)
    return ChordLean(inputs.tokenizer, halves, strength, cursor=shared_cursor(inputs))


SPEC = HookSpec("chord_lean", ChordLeanOptions, ("remi",), ("continue",), _make,
                "with chords= (a lead sheet): each new pitch leans toward the chord under it")
