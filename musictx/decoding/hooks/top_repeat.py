"""Top repeat: a piano continuation's top line strikes its last pitch again about as seldom as real music does.

The line a listener follows is the highest note of each onset (`musictx.listening.scorecard_metrics.top_line`:
notes within 20 ms are one onset). The shipped `piano`'s top line struck the same pitch twice in a row several
times as often as the real continuations, the single feature that told its music from the real best: a figure
that sticks on one pitch, often re-striking a note that still sounds (measured in docs/generation.md, "Top
repeat").

A performance writes an onset's notes low to high, so while an onset is being written its top so far is known.
A NOTE_ON of the last onset's top pitch, drawn where nothing higher has sounded yet in this onset, would make it
the new top: its logit is lowered by ``strength``. The probability goes to everything else (another pitch,
time moving on) in the model's own proportions; a repeat the model is sure of still comes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.filters import add_at
from musictx.decoding.hook import HookInputs, HookSpec, LogitsHook
from musictx.decoding.option_fields import strength_option

if TYPE_CHECKING:
    from torch import Tensor

ONSET_S = 0.02  # notes struck within this of an onset's first are the same onset (as `top_line` groups them)
NONE = -1  # no pitch (no onset yet)
TAIL_IDS = 256  # the seed's last ids read at the start: its last two onsets are in them (~2 s of piano)


class TopRepeat(LogitsHook):
    """Lowers the NOTE_ON of the last onset's top pitch while it would become the current onset's top."""

    def __init__(self, tokenizer, strength: float):
        self.tok = tokenizer
        self.on = tokenizer.layout.note_on  # NOTE_ON ids are note_on + pitch
        self.n_pitches = tokenizer.layout.note_off - tokenizer.layout.note_on
        self.step_s = tokenizer.config.time_step
        self.strength = float(strength)

    def start(self, prompt: Tensor) -> None:
        rows = prompt.cpu().numpy()  # (B, T0)
        B = len(rows)
        self.last_top = np.full(B, NONE)  # (B,) the top pitch of the onset before the current one
        self.top = np.full(B, NONE)  # (B,) the current onset's highest pitch so far
        self.since = np.full(B, np.inf)  # (B,) seconds since the current onset's first note
        for t in range(max(0, rows.shape[1] - TAIL_IDS), rows.shape[1]):  # the seed's last onsets: the first
            self._advance(rows[:, t])                                      # new note knows what it follows

    def _advance(self, ids: np.ndarray) -> None:
        pitch = ids - self.on  # (B,) a pitch where the id is a NOTE_ON
        is_on = (pitch >= 0) & (pitch < self.n_pitches)
        self.since = self.since + self.tok.shift_steps(ids) * self.step_s
        new_onset = is_on & self._opens_onset()
        self.last_top = np.where(new_onset, self.top, self.last_top)
        self.top = np.where(new_onset, pitch, np.where(is_on, np.maximum(self.top, pitch), self.top))
        self.since = np.where(new_onset, 0.0, self.since)

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        self._advance(next_ids.cpu().numpy())

    def _opens_onset(self) -> np.ndarray:
        """(B,) bool: whether a note struck now opens a new onset (as `top_line` groups them)."""
        return self.since > ONSET_S + 1e-9

    def repeat_pitch(self) -> np.ndarray:
        """(B,) the pitch whose NOTE_ON now would repeat the top line; NONE where none would."""
        starts_onset = self._opens_onset()  # a note now opens an onset: the current one's top is the last
        before = np.where(starts_onset, self.top, self.last_top)  # (B,)
        still_under = starts_onset | (self.top < self.last_top)  # nothing in this onset is higher yet
        return np.where(still_under, before, NONE)

    def __call__(self, logits: Tensor) -> Tensor:
        pitch = self.repeat_pitch()
        rows = np.flatnonzero(pitch != NONE)
        if not len(rows):
            return logits
        return add_at(logits, rows, self.on + pitch[rows], -self.strength)  # -inf stays -inf


@dataclass
class TopRepeatOptions:
    strength: float = strength_option(2.0, (
        "how far a piano continuation's NOTE_ON of the last onset's top pitch is lowered while it would strike "
        "that top again (logit minus this); 0: off"))


def _make(inputs: HookInputs, o: TopRepeatOptions) -> TopRepeat | None:
    return TopRepeat(inputs.tokenizer, o.strength) if o.strength else None


SPEC = HookSpec("top_repeat", TopRepeatOptions, ("performance",), ("continue",), _make,
                "a piano continuation's top line strikes its last pitch again less often (that NOTE_ON lowered)")
