"""Cadence (``ending=true``): a continuation that closes as a piece does, on its key's tonic chord.

A continuation stops at the bar line where its length runs out: mid-phrase, on whatever chord, and a listener
hears it cut off. Asked to end, its last two bars make a cadence in the key the seed states (the Krumhansl-Kessler
key-finder, `musictx.io.keys`, on the seed's bars; on every bar before the cadence where the seed reads none). Not
the new bars': a continuation drifts, and the bundled motif's last 8 bars read G major in one of 4 continuations,
a band's C-Am-F-G seed with its continuation A minor, where the user's music is in C:

- the bar before the last leans on the subdominant, then the dominant seventh, half a bar each (IV - V7; in minor
  iv - V7): a new pitch of the chord's pitch classes gets a logit bonus of ``strength``, as a lead sheet's chords
  do (`musictx.decoding.hooks.chord_lean`);
- the last bar is the tonic triad struck together on its downbeat and held, in root position: its only Position
  is 0, its pitches are the triad's, the bass falls to the root (the track that played the bar before's lowest
  note starts on a root at most an octave under that note and not above it, G to C, but not under `LOWEST_ROOT`,
  where it rises to the nearest root instead; its other notes sound above), its Durations hold at least `HOLD`
  of the bar (or the longest there is), and it does not close before it holds the root and the third and each
  track that played in the bar before has struck.

What plays, where in its register and how loud stays the model's. A row these rules would leave no id is left
alone. A hook of `musictx.decoding.sampling.generate` for REMI ids with programs, after the grammar guard; on
Performance events the spec makes the piano's close instead (`musictx.decoding.hooks.final_chord`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.hook import KINDS, HookInputs, HookSpec
from musictx.decoding.hooks.final_chord import LOWEST_ROOT, FinalChord, final_chord
from musictx.decoding.option_fields import strength_option
from musictx.io.keys import NO_KEY, cadence_chords, key_of_histogram
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

HOLD = 1.0  # the share of the last bar its notes hold at least


def _histogram(bars) -> np.ndarray:
    """(12,) the pitched notes' beats by pitch class over ``bars`` (`musictx.decoding.cursor.Bar`)."""
    hist = np.zeros(12)
    for bar in bars:
        for _, program, pitch, beats in bar.notes:
            if program >= 0:
                hist[pitch % 12] += beats if np.isfinite(beats) else 1.0
    return hist


class Cadence(ReadsCursor):
    """The cadence of a continuation of ``bars`` new bars (module docstring), read off the run's `RemiCursor`."""

    def __init__(self, tokenizer, bars: int, strength: float, cursor: RemiCursor | None = None):
        tok = tokenizer
        self.bars, self.strength = bars, float(strength)
        self._read(tok, cursor)
        self.bar_id = tok.bar_id
        self.pitch_ids = tok.ids_of_type("Pitch")  # (P,)
        self.pitch_number = tok.numbers_of("Pitch")[self.pitch_ids]  # (P,)
        self.pitch_class = self.pitch_number % 12  # (P,)
        self.program_of = tok.numbers_of("Program")  # (V,) the track a Program id opens; -1 else (drums too)
        self.later_positions = np.flatnonzero(tok.numbers_of("Position") > 0)  # the last bar strikes on 0 only
        self.beats = tok.duration_beats()  # (V,) a Duration id's beats, nan else
        self.per_beat = tok.miditok.config.max_num_pos_per_beat
        self.keys: dict[int, tuple] = {}  # row -> (key, its three chords), read as the row enters the cadence
        self.keys_read: list[tuple[int, str]] = []  # every key read, in order (what the tests check)

    def _key(self, b: int) -> tuple | None:
        """Row b's key and cadence chords, read once from the seed's bars (else every bar before the one being
        written); None where none reads."""
        if b not in self.keys:
            bars = self.cursor.bars[b]
            seed_bars = int(self.cursor.prompt_bars[b]) - 1  # the prompt ends on the Bar id of the first new bar
            key = key_of_histogram(_histogram(bars[:seed_bars]))
            if key == NO_KEY:
                key = key_of_histogram(_histogram(bars[:-1]))
            self.keys[b] = None if key == NO_KEY else (key, cadence_chords(key))
            self.keys_read.append(key)
        return self.keys[b]

    def __call__(self, logits: Tensor) -> Tensor:
        c = self.cursor
        out = logits
        for b in range(logits.shape[0]):
            k = c.new_bar(b)
            if k < max(self.bars - 2, 0) or k >= self.bars or (found := self._key(b)) is None:
                continue
            (root, mode), (sub, dom, tonic) = found
            row = self._cadence(b, logits[b], sub if 2 * c.pos[b] < c.bar_len[b] else dom) if k < self.bars - 1 \
                else self._last_bar(b, logits[b], tonic, root, (root + (4 if mode == "major" else 3)) % 12)
            if row is not None and torch.isfinite(row).any():
                out = out.clone() if out is logits else out
                out[b] = row
        return out

    def _pitch_next(self, b: int) -> bool:
        """Whether row b draws a pitched note's Pitch next (its last id opened a track that is not drums)."""
        last = int(self.cursor.last[b])
        return last >= 0 and self.program_of[last] >= 0

    def _cadence(self, b: int, row: Tensor, chord: np.ndarray) -> Tensor | None:
        """The bar before the last: a pitch of ``chord`` gets the bonus; None where no Pitch comes next."""
        if self.cursor.pos[b] < 0 or not self._pitch_next(b):
            return None
        bonus = np.zeros(row.shape[0], dtype=np.float32)
        bonus[self.pitch_ids] = self.strength * chord[self.pitch_class]
        return row + torch.from_numpy(bonus).to(row.device, row.dtype)

    def _last_bar(self, b: int, row: Tensor, tonic: np.ndarray, root: int, third: int) -> Tensor:
        """The last bar (module docstring): ``tonic`` (12,) bool the triad's pitch classes, ``root`` and ``third``
        its two that must sound."""
        c = self.cursor
        before, now = c.bars[b][-2:] if len(c.bars[b]) > 1 else (None, c.bars[b][-1])
        played = [(int(n[1]), int(n[2])) for n in before.notes if n[1] >= 0] if before else []  # (program, pitch)
        forbid = [self.later_positions]
        if self._pitch_next(b):
            forbid.append(self.pitch_ids[~self._fits(b, tonic, root, played, now)])
        hold = min(HOLD * c.bar_len[b] / self.per_beat, np.nanmax(self.beats))
        forbid.append(np.flatnonzero(self.beats < hold - 1e-9))  # nan compares False: other ids are kept
        struck = {(int(n[1]), int(n[2]) % 12) for n in now.notes if n[1] >= 0}
        if {p for p, _ in played} - {p for p, _ in struck} or not {root, third} <= {pc for _, pc in struck}:
            forbid.append(np.array([self.bar_id]))
        row = row.clone()
        row[torch.from_numpy(np.concatenate(forbid)).to(row.device)] = float("-inf")
        return row

    def _fits(self, b: int, tonic: np.ndarray, root: int, played: list[tuple[int, int]], now) -> np.ndarray:
        """(P,) bool: the pitches the last bar's next note may take. The track that played the bar before's lowest
        note is the bass: its first note a root at most an octave under that note and not above, its others above
        it; every other track's, the triad's."""
        fits = tonic[self.pitch_class]
        if not played:
            return fits
        low_program, low = min(played, key=lambda pp: pp[1])
        program = int(self.cursor.program[b])
        if program != low_program:
            return fits
        mine = [int(n[2]) for n in now.notes if n[1] == program]
        if mine:
            return fits & (self.pitch_number >= min(mine))
        roots = self.pitch_class == root
        under = roots & (self.pitch_number <= low) & (self.pitch_number > low - 12) & (self.pitch_number >= LOWEST_ROOT)
        return under if under.any() else roots & (self.pitch_number > low) & (self.pitch_number < low + 12)


@dataclass
class CadenceOptions:
    strength: float = strength_option(3.0, (
        "with ending=true: the logit bonus of a pitch of the cadence's subdominant, then dominant, in the bar before "
        "the last (a piano's dominant, in the seconds before its final chord); 0: the final chord only"))


def _make(inputs: HookInputs, o: CadenceOptions) -> Cadence | FinalChord | None:
    if not inputs.ending:
        return None
    if inputs.stop_after_bars is not None:  # a metrical model's bars
        return Cadence(inputs.tokenizer, inputs.stop_after_bars + 1, o.strength, cursor=shared_cursor(inputs))
    if inputs.length_seconds:  # a Performance model's seconds (`musictx.decoding.hooks.final_chord`)
        return final_chord(inputs.tokenizer, inputs.length_seconds, o.strength)
    return None


SPEC = HookSpec("cadence", CadenceOptions, KINDS, ("continue",), _make,
                "with ending=true: the piece closes, a cadence to the key's tonic chord (the last two bars; a piano's "
                "last seconds)")
