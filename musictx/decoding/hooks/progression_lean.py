"""Progression lean: each new bar's pitches lean toward the harmony of the seed's bar at the same place in its
last phrase, so that a continuation moves through its seed's chords instead of standing on one.

A pop continuation's harmony stands still where the song moves: on held-out songs its bar-to-bar pitch-class
similarity is higher than the real continuation's (issue 65; ``str_bar_pc_similarity`` of
`musictx.evaluation.listen_features`). The key lean (`musictx.decoding.hooks.key_lean`) pulls every bar toward
the seed's pitch classes as a whole, the same in every bar. This hook gives new bar k the pitch-class weights
of the seed's bar ``B - P + k mod P`` (B the seed's bars, P ``min(PERIOD_BARS, B)``): the seed's last phrase
of chords, cycled. Where a note's Pitch comes next, each Pitch id gets ``strength`` times its pitch class's
weight in that bar (`musictx.decoding.hooks.key_lean.seed_pitch_class_weights`: a chord tone 1, a passing
tone less). Whether a note plays, and where, stays the model's; the melody, bass and texture are other
hooks'.

A hook of `musictx.decoding.sampling.generate` for REMI ids with programs; after the grammar guard, so a
bonus never revives a forbidden id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import shared_cursor
from musictx.decoding.hook import HookInputs, HookSpec
from musictx.decoding.hooks.key_lean import PitchClassLean, seed_pitch_class_weights
from musictx.decoding.option_fields import strength_option

if TYPE_CHECKING:
    from torch import Tensor

PERIOD_BARS = 4  # pop's harmony turns in 4-bar phrases (or 8, which a 10 s seed does not hold)


class ProgressionLean(PitchClassLean):
    """The lean of new bar k's pitches toward the harmony of the seed's bar at k's place in its last phrase."""

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        # the prompt ends on the Bar id that opens the first new bar: the bars before it are the seed's
        self.seed_bars = [[seed_pitch_class_weights([bar]) for bar in bars[:-1]] for bars in self.cursor.bars]

    def weights(self, b: int) -> np.ndarray | None:
        """(12,) the pitch-class weights of the seed bar that row b's new bar echoes; None in the seed."""
        seed, k = self.seed_bars[b], self.cursor.new_bar(b)
        if not seed or k < 0:
            return None
        period = min(PERIOD_BARS, len(seed))
        return seed[len(seed) - period + k % period]


@dataclass
class ProgressionLeanOptions:
    strength: float = strength_option(1.0, (
        "the logit bonus of each new pitch, times its pitch class's weight in the seed bar at its place in the "
        "seed's last 4-bar phrase (the seed's chords, cycled); 0: off"))


def _make(inputs: HookInputs, o: ProgressionLeanOptions) -> ProgressionLean | None:
    return ProgressionLean(inputs.tokenizer, o.strength, cursor=shared_cursor(inputs)) if o.strength else None


SPEC = HookSpec("progression_lean", ProgressionLeanOptions, ("remi",), ("continue",), _make,
                "each new bar's pitches lean toward the seed's chords, cycled through its last 4-bar phrase")
