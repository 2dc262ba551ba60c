"""Final chord (``ending=true`` on Performance events): a piano continuation that closes on its key's tonic chord.

The `piano` model's continuation stopped where its seconds ran out, mid-run. Asked to end, it closes as the metrical
cadence does (`musictx.decoding.hooks.cadence`), in seconds where that one counts bars:

- **the key** is the seed's (the Krumhansl-Kessler key-finder, `musictx.io.keys`, on the seed's NOTE_ONs);
- **the approach**: in the `APPROACH_SECONDS` before the chord, a NOTE_ON of the dominant seventh's pitch classes
  gets a logit bonus of ``strength``, and time moves on to the chord's step, never past it;
- **the chord**, `HOLD_SECONDS` before the end: time stands until the tonic triad is struck, its lowest note a root
  at most an octave under the lowest note struck in the approach and not above it (not under E1: it rises to the
  nearest root instead), the others the triad's pitch classes above it, all three of them; notes of
  other pitch classes still sounding are let go before time moves on; then no note starts and none of the chord's
  ends: it rings to the end.

What notes and how loud stays the model's. A row these rules would leave no id is left alone. A hook of
`musictx.decoding.sampling.generate`, after the grammar guard; made by the cadence's spec, whose options it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.hook import LogitsHook
from musictx.decoding.hooks.length import ShiftClock, steps_in
from musictx.io.keys import NO_KEY, cadence_chords, key_of_histogram
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

LOWEST_ROOT = 28  # E1, a bass guitar's lowest string: a final root under it rumbles (a G1 bass rises to C2)
HOLD_SECONDS = 2.0  # the final chord rings at least this long
APPROACH_SECONDS = 2.0  # the dominant lean before it


def chord_step(seconds: float | None, time_step: float) -> int | None:
    """The step of new music at which a close of ``seconds`` strikes its chord (`HOLD_SECONDS` before the end), read
    by this hook and by the grammar guard, which lets the chord ring from there; None where the seconds are too few
    to hold one."""
    if not seconds or seconds <= HOLD_SECONDS:
        return None
    return steps_in(seconds, time_step) - steps_in(HOLD_SECONDS, time_step)


class FinalChord(LogitsHook):
    """The close of a Performance continuation (module docstring)."""

    def __init__(self, tokenizer, chord_at: int, strength: float):
        """``chord_at``: the step of new music the chord is struck at (`chord_step`)."""
        lay, c = tokenizer.layout, tokenizer.config
        self.on, self.off, self.shift, self.n_pitches = lay.note_on, lay.note_off, lay.time_shift, lay.note_off
        self.pitch = np.arange(self.n_pitches) + c.pitch_min  # (P,) the pitch of each NOTE_ON
        self.eos, self.velocities = lay.eos, np.arange(lay.velocity, lay.pad)
        self.clock = ShiftClock.of(tokenizer)
        self.shifts = np.arange(lay.time_shift, lay.velocity)  # the TIME_SHIFT ids
        self.chord_at = chord_at
        self.approach_at = self.chord_at - steps_in(APPROACH_SECONDS, c.time_step)
        self.strength = float(strength)
        self.key: tuple | None = None

    def start(self, prompt: Tensor) -> None:
        rows = prompt.cpu().numpy()
        B = len(rows)
        ons = rows[0][(rows[0] >= self.on) & (rows[0] < self.off)] - self.on  # the seed's NOTE_ONs (every row's)
        key = key_of_histogram(np.bincount(self.pitch[ons] % 12, minlength=12).astype(float))
        self.key = None if key == NO_KEY else (key, cadence_chords(key))
        self.sounding = np.zeros((B, self.n_pitches), dtype=bool)
        for b, row in enumerate(rows):  # a pitch sounds at the end where its last note event is a NOTE_ON
            at = np.arange(len(row))
            last_on, last_off = np.full(self.n_pitches, -1), np.full(self.n_pitches, -1)
            ons, offs = (row >= self.on) & (row < self.off), (row >= self.off) & (row < self.shift)
            np.maximum.at(last_on, row[ons] - self.on, at[ons])
            np.maximum.at(last_off, row[offs] - self.off, at[offs])
            self.sounding[b] = last_on > last_off
        self.clock.steps = np.zeros(B, dtype=np.int64)
        self.approach_low = np.full(B, 1000)  # the lowest pitch struck in the approach
        self.last = rows[:, -1].copy()  # (B,) the last id
        self.chord: list[list[int]] = [[] for _ in range(B)]  # the chord's pitches struck so far

    def _follow(self, b: int, i: int) -> None:
        if self.on <= i < self.off:
            self.sounding[b, i - self.on] = True
        elif self.off <= i < self.shift:
            self.sounding[b, i - self.off] = False

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        ids = next_ids.cpu().numpy()
        steps = self.clock.steps.copy()  # the step each id was drawn at
        self.clock.add(next_ids)
        self.last = ids.copy()
        for b, i in enumerate(ids.tolist()):
            self._follow(b, i)
            if self.on <= i < self.off:
                pitch = int(self.pitch[i - self.on])
                if steps[b] >= self.chord_at:
                    self.chord[b].append(pitch)
                elif steps[b] >= self.approach_at:
                    self.approach_low[b] = min(self.approach_low[b], pitch)

    def __call__(self, logits: Tensor) -> Tensor:
        if self.key is None:
            return logits
        out = logits
        for b, step in enumerate(self.clock.steps.tolist()):
            if step < self.approach_at:
                continue
            row = self._approach(logits[b], step) if step < self.chord_at else self._chord(b, logits[b])
            if torch.isfinite(row).any():
                out = out.clone() if out is logits else out
                out[b] = row
        return out

    def _approach(self, row: Tensor, step: int) -> Tensor:
        """The dominant seventh's NOTE_ONs get the bonus; no TIME_SHIFT goes past the chord's step (it is struck
        on it, and holds its whole time): the shift that lands on it takes the probability of every longer one,
        so that time moves on as often as the model would move it (forbidding them alone let a Chopin etude's
        run strike and release one pitch at one instant until the token cap)."""
        bonus = np.zeros(row.shape[0], dtype=np.float32)
        bonus[self.on:self.off] = self.strength * self.key[1][1][self.pitch % 12]
        row = row + torch.from_numpy(bonus).to(row.device, row.dtype)
        left = self.chord_at - step  # TIME_SHIFT k (id shifts[k - 1]) moves k steps: at most ``left``
        if left < len(self.shifts):
            longer = torch.from_numpy(self.shifts[left - 1:]).to(row.device)
            row[int(self.shifts[left - 1])] = torch.logsumexp(row[longer], dim=0)
            row[longer[1:]] = float("-inf")
        return row

    def _chord(self, b: int, row: Tensor) -> Tensor:
        """The chord struck while time stands, then held (module docstring)."""
        (root, _), (_, _, tonic) = self.key
        struck = self.chord[b]
        forbid = np.zeros(row.shape[0], dtype=bool)
        forbid[self.eos] = True
        done = bool(struck) and set(np.flatnonzero(tonic)) <= {p % 12 for p in struck}  # root, third and fifth
        forbid[self.off:self.shift] = np.isin(self.pitch, struck)  # the chord's notes are held
        if done:  # no note starts (nor a velocity for one); the chord's strangers go before time moves on
            forbid[self.on:self.off] = forbid[self.velocities] = True
            forbid[self.shifts] = (self.sounding[b] & ~tonic[self.pitch % 12]).any()
        else:
            forbid[self.shifts] = True  # time stands until the chord is struck
            forbid[self.on:self.off] = ~self._fits(b, tonic, root)
            forbid[self.velocities] = self.velocities[0] <= self.last[b] <= self.velocities[-1]  # one, then a note
        row = row.clone()
        row[torch.from_numpy(forbid).to(row.device)] = float("-inf")
        return row

    def _fits(self, b: int, tonic: np.ndarray, root: int) -> np.ndarray:
        """(P,) bool: the NOTE_ONs the chord may take next: its bass a root (module docstring), then the triad above."""
        struck = self.chord[b]
        if struck:  # a new pitch of the triad above the bass; from the third note on, only a pitch class it lacks
            fits = tonic[self.pitch % 12] & (self.pitch >= min(struck)) & ~np.isin(self.pitch, struck)
            lacking = fits & ~np.isin(self.pitch % 12, [p % 12 for p in struck])
            return lacking if len(struck) >= 2 and lacking.any() else fits
        roots = self.pitch % 12 == root
        low = int(self.approach_low[b])
        if low < 1000:
            under = roots & (self.pitch <= low) & (self.pitch > low - 12) & (self.pitch >= LOWEST_ROOT)
            return under if under.any() else roots & (self.pitch > low) & (self.pitch < low + 12)
        return roots & (self.pitch >= LOWEST_ROOT)


def final_chord(tokenizer, seconds: float, strength: float) -> FinalChord | None:
    """The close of ``seconds`` new music (the cadence spec's make, for Performance events); None where they are too
    short to hold a chord."""
    at = chord_step(seconds, tokenizer.config.time_step)
    return None if at is None else FinalChord(tokenizer, at, strength)
