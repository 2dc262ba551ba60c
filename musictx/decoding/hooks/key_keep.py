"""Key keep: a piano continuation's pitch classes stay in the balance its seed struck them in.

A feedback rule, as `pace` is for notes a second: the continuation's NOTE_ONs so far are counted by pitch class
and their shares set against the seed's. Real music moves away from its seed's balance too (on the piano's
validation split the real next 30 s differ from the 10 s seed by about 0.1 of the notes in their furthest pitch
class), so a class may stray up to ``tolerance`` of the notes either way freely; past that, a class owed notes
gets a bonus on its NOTE_ONs and one played too often a penalty, growing to ``strength`` at twice the tolerance.
The seed's own shares count as ``PRIOR_NOTES`` notes already made, so the first few notes move nothing. What is
pulled back is a drift that keeps on (a model that wanders off its key in a chromatic run), not a modulation's
few bars.

The rule chooses *which* note, never *whether* one starts: after the bonus the NOTE_ON logits are shifted
together so that a note starting keeps the probability the model gave it, as the note echo does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.hook import HookInputs, HookSpec, LogitsHook
from musictx.decoding.option_fields import option, strength_option
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

PRIOR_NOTES = 24.0  # the seed's shares count as this many notes already made: early notes move the balance little
SEED_SMOOTHING = 1.0  # notes added to each pitch class of the seed: a class it never sounds is rare, not forbidden


class KeyKeep(LogitsHook):
    """Leans an `EventTokenizer`'s NOTE_ON logits toward the pitch classes the continuation owes its seed."""

    def __init__(self, tokenizer, strength: float, tolerance: float = 0.05):
        lay = tokenizer.layout
        self.on, self.n_pitches = lay.note_on, lay.note_off - lay.note_on
        self.class_of = (np.arange(self.n_pitches) + tokenizer.config.pitch_min) % 12  # (n_pitches,)
        self.strength, self.tolerance = float(strength), float(tolerance)

    def _counts(self, rows: np.ndarray) -> np.ndarray:
        """(B, 12) NOTE_ONs per pitch class in ids (B, T)."""
        pitch = rows - self.on
        is_on = (pitch >= 0) & (pitch < self.n_pitches)
        b, t = np.nonzero(is_on)
        counts = np.zeros((len(rows), 12))
        np.add.at(counts, (b, self.class_of[pitch[b, t]]), 1.0)
        return counts

    def start(self, prompt: Tensor) -> None:
        seed = self._counts(prompt.cpu().numpy()) + SEED_SMOOTHING  # (B, 12)
        self.target = seed / seed.sum(axis=1, keepdims=True)  # (B, 12) the seed's shares
        self.made = np.zeros_like(self.target)  # (B, 12) the continuation's NOTE_ONs so far
        self.bonus: Tensor | None = None  # (B, n_pitches), None: the balance moved since it was made

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        new = self._counts(next_ids.cpu().numpy()[:, None])  # (B, 12)
        if new.any():
            self.made += new
            self.bonus = None

    def pitch_bonus(self) -> np.ndarray:
        """(B, n_pitches) each NOTE_ON's bonus: its class's share owed to the seed's past the tolerance."""
        n = self.made.sum(axis=1, keepdims=True)  # (B, 1)
        owed = self.target - (self.made + PRIOR_NOTES * self.target) / (n + PRIOR_NOTES)  # (B, 12) + owed
        past = np.sign(owed) * np.clip(np.abs(owed) / self.tolerance - 1.0, 0.0, 1.0)  # (B, 12) in [-1, 1]
        return (self.strength * past)[:, self.class_of]

    def __call__(self, logits: Tensor) -> Tensor:
        """Logits (B, V) with the NOTE_ON block leaning toward the seed's balance, its total kept."""
        if self.bonus is None:
            self.bonus = torch.from_numpy(self.pitch_bonus()).to(logits.device, logits.dtype)
        ons = slice(self.on, self.on + self.n_pitches)
        old = logits[:, ons]  # (B, n_pitches)
        new = old + self.bonus
        keep = torch.logsumexp(old, dim=1, keepdim=True) - torch.logsumexp(new, dim=1, keepdim=True)  # (B, 1)
        out = logits.clone()
        out[:, ons] = torch.where(torch.isfinite(keep), new + keep, old)  # a row with no NOTE_ON allowed: as it was
        return out


@dataclass
class KeyKeepOptions:
    strength: float = strength_option(1.0, (
        "how hard a piano continuation's pitch classes are kept in its seed's balance (the largest logit "
        "bonus or penalty of a NOTE_ON whose class is owed or overplayed); 0: off"))
    tolerance: float = option(0.05, "the share of the notes a pitch class may stray from the seed's before it is "
                                    "pulled back", low=0.001)


def _make(inputs: HookInputs, o: KeyKeepOptions) -> KeyKeep | None:
    return KeyKeep(inputs.tokenizer, o.strength, o.tolerance) if o.strength else None


SPEC = HookSpec("key_keep", KeyKeepOptions, ("performance",), ("continue",), _make,
                "a piano continuation's pitch classes stay in its seed's balance (owed classes lean up)")
