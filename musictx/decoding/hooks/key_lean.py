"""Key lean: a continuation's pitches stay in the seed's key, without changing how many notes it plays.

Left to itself, the `pop` network drifts out of the seed's key within a few bars: on 30 POP909 validation
songs (10 s seed from 25 s, 30 s new) with the echoes and recall guidance off, the pitch-class correlation
with the real continuation is 0.70 (shipped 0.83) and 0.23 of the continuations end in the real
continuation's key (shipped 0.48). The echoes and recall guidance keep the key by playing the seed's bars
again, which also thins the texture and silences the melody (docs/two-sample-2026-11.md).

This hook keeps the key only: where the next id is a note's Pitch (right after its Program), each pitch gets
a logit bonus of ``strength`` times its pitch class's weight in the seed (`seed_pitch_class_weights`): every
pitch class the seed's notes sound at least a twelfth of the time, over all tracks, gets all of it (the key's
tones, not only its tonic: a lean toward the seed's most played note would freeze the harmony), a chromatic
passing tone a part, a pitch class the seed never plays none. Whether a note starts, and where, stays the
model's: only Pitch ids are touched, where nothing else may be drawn.

A hook of `musictx.decoding.sampling.generate` for REMI ids with programs; after the grammar guard, so a
bonus never revives a forbidden id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.hook import HookInputs, HookSpec
from musictx.decoding.option_fields import strength_option
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

SCALE_SHARE = 1 / 12  # a pitch class sounding this share of the seed's time, as if all twelve were even, is in key


def seed_pitch_class_weights(bars) -> np.ndarray:
    """(12,) each pitch class's weight in ``bars`` (`cursor.Bar`): the share of the time (beats) its notes
    sound, over `SCALE_SHARE`, at most 1: the key's tones weigh 1, a passing tone less, an absent one 0.
    All zeros for bars without an ended note."""
    time = np.zeros(12)
    for bar in bars:
        for _, _, pitch, beats in bar.ended_notes():
            time[pitch % 12] += beats
    return np.minimum(time / (SCALE_SHARE * time.sum()), 1.0) if time.any() else time


class PitchClassLean(ReadsCursor):
    """Where a note's Pitch comes next (right after its Program), a bonus of ``strength`` times its pitch
    class's weight on each Pitch id; a subclass says each row's (12,) weights where it stands (`weights`)."""

    def __init__(self, tokenizer, strength: float, cursor: RemiCursor | None = None):
        tok = tokenizer
        self.strength = float(strength)
        self._read(tok, cursor)
        self.pitch_ids = tok.ids_of_type("Pitch")  # (P,)
        self.pitch_class = tok.numbers_of("Pitch")[self.pitch_ids] % 12  # (P,)
        self.is_program = tok.numbers_of("Program") >= 0  # (V,)

    def weights(self, b: int) -> np.ndarray | None:
        """(12,) row b's weights of each pitch class where it stands; None: no lean there."""
        raise NotImplementedError

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
        return logits + torch.from_numpy(bonus).to(logits.device, logits.dtype)


class KeyLean(PitchClassLean):
    """The lean toward the seed's pitch classes (`seed_pitch_class_weights`), the same at every place."""

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        # the prompt ends on the Bar id that opens the first new bar: the bars before it are the seed's
        self.seed_weights = [seed_pitch_class_weights(bars[:-1]) for bars in self.cursor.bars]  # (12,) a row

    def weights(self, b: int) -> np.ndarray:
        return self.seed_weights[b]


@dataclass
class KeyLeanOptions:
    strength: float = strength_option(0.75, (
        "the logit bonus of each new pitch, times its pitch class's weight in the seed (1 for the key's tones); 0: "
        "off"))


def _make(inputs: HookInputs, o: KeyLeanOptions) -> KeyLean | None:
    strength = o.strength
    return KeyLean(inputs.tokenizer, strength, cursor=shared_cursor(inputs)) if strength else None


SPEC = HookSpec("key_lean", KeyLeanOptions, ("remi",), ("continue",), _make,
                "each new note's pitch leans toward the seed's pitch classes (its key), never whether it plays")
