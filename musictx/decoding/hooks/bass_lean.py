"""Bass lean: a continuation keeps the seed's bass line, the low note struck on each bar's downbeat.

A listener hears the bottom drop out of a continuation before anything else. The network, left to itself,
thins the low register after the first new bar: on 20 POP909 validation songs a note at or below E3 sounds at
0.58 of the eighth-note points of its 30 s against 0.75 in the real continuation, and 0.70 of its downbeats
strike a low note against 0.90; the bundled motif's whole-note bass is gone after one bar. The motif and
phrase echoes cannot bring it back without copying the seed's notes (docs/pop.md).

So this hook reads the seed's bass line, not its notes: in how many bars a low note is struck on the downbeat,
by which track, in what range and for how long. Where most seed bars have one, each new bar that has not
struck its bass yet gets a logit bonus of ``strength`` on:

- the downbeat's Position after the Bar (the bar opens on its first beat);
- at the downbeat, the bass track's Program, then the Pitch ids in the seed's bass range (which of them is
  the model's choice: it knows the harmony, the lean only keeps the register);
- after that note's Velocity, the Duration ids within a factor of `LENGTH_FACTOR` of the seed's typical bass
  length (a held bass stays held; a walking one keeps walking).

A hook of `musictx.decoding.sampling.generate` for REMI ids (Bar, Position, Program, Pitch, Velocity,
Duration), after the grammar guard, so a bonus never revives a forbidden id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.filters import KeptLeans
from musictx.decoding.hook import HookInputs, HookSpec, ids_on_host
from musictx.decoding.option_fields import strength_option
from musictx.io.score_prep import BASS_CEILING

if TYPE_CHECKING:
    from torch import Tensor

MIN_BASS_BARS = 0.5  # share of the seed's bars with a low downbeat note that makes a bass line worth keeping
RANGE_MARGIN = 2  # semitones the new bass may go past the seed's lowest and highest bass notes
LENGTH_FACTOR = 1.5  # a new bass note's length within this factor of the seed's median bass length
NONE = np.zeros(0, dtype=np.int64)  # no id wanted


class BassLine:
    """What the lean keeps of a seed: the bass track, its pitch range and its typical length (beats)."""

    def __init__(self, program: int, low: int, high: int, beats: float):
        self.program, self.low, self.high, self.beats = program, low, high, beats

    @classmethod
    def of_bars(cls, bars: list[list[tuple[int, int, int, float]]]) -> BassLine | None:
        """From the seed's bars, each a list of (position, program, pitch, length in beats) notes: the bass of
        the bars whose lowest downbeat note is at or below `BASS_CEILING`; None where too few bars have one."""
        bass = []
        for notes in bars:
            downbeat = [n for n in notes if n[0] == 0]
            if downbeat:
                low = min(downbeat, key=lambda n: n[2])
                if low[2] <= BASS_CEILING:
                    bass.append(low)
        if not bars or len(bass) < MIN_BASS_BARS * len(bars):
            return None
        programs = [n[1] for n in bass]
        program = max(set(programs), key=programs.count)
        pitches = [n[2] for n in bass if n[1] == program]
        beats = float(np.median([n[3] for n in bass if n[1] == program]))
        return cls(program, min(pitches) - RANGE_MARGIN, max(pitches) + RANGE_MARGIN, beats)


class BassLean(ReadsCursor):
    """The lean of each new bar toward a bass note on its downbeat, as the seed's bass line plays them."""

    def __init__(self, tokenizer, strength: float, cursor: RemiCursor | None = None):
        tok = tokenizer
        self.strength = float(strength)
        self.leans = KeptLeans()  # the bonus rows, kept once made
        self._read(tok, cursor)
        self.position_of = tok.numbers_of("Position")  # (V,) the position a Position id sets, else -1
        self.program_of = tok.numbers_of("Program")  # (V,) the track a Program id opens, else -1
        self.pitch_of = tok.numbers_of("Pitch")  # (V,) the pitch of a Pitch id, else -1
        self.beats_of = tok.duration_beats()  # (V,) a Duration id's length in beats, else nan
        self.is_velocity = tok.type_of == "Velocity"  # (V,)
        self.downbeat = np.flatnonzero(self.position_of == 0)[:1]  # (1,) the Position id of a bar's first beat

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        c = self.cursor
        self.has_bass = np.zeros(len(c.last), dtype=bool)  # the bar being written has struck its downbeat bass
        # the prompt ends on the Bar id that opens the first new bar: the bars before it are the seed's
        self.bass = [BassLine.of_bars([bar.ended_notes() for bar in bars[:-1]]) for bars in c.bars]
        self.targets = [self._targets(bass) for bass in self.bass]  # each row's ids, found once, not per step
        # a row without a bass line never leans, and no lean comes right after a Pitch id (`wanted`)
        self.acts_after = (self.pitch_of < 0) & any(bass is not None for bass in self.bass)  # (V,)

    def _targets(self, bass: BassLine | None) -> dict[str, np.ndarray] | None:
        """The ids that strike ``bass``'s notes: its track's Program, the Pitches of its range, the Durations
        within `LENGTH_FACTOR` of its length."""
        if bass is None:
            return None
        lo, hi = bass.beats / LENGTH_FACTOR, bass.beats * LENGTH_FACTOR
        return {"program": np.flatnonzero(self.program_of == bass.program),
                "pitch": np.flatnonzero((self.pitch_of >= bass.low) & (self.pitch_of <= bass.high)),
                "duration": np.flatnonzero((self.beats_of >= lo) & (self.beats_of <= hi))}

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        super().update(next_ids, done)
        c = self.cursor
        for b, i in enumerate(ids_on_host(next_ids)):
            if i == c.bar_id:
                self.has_bass[b] = False
            elif c.ended[b] >= 0 and c.pos[b] == 0 and self._in_range(b, int(c.ended[b])):
                self.has_bass[b] = True  # a note ends with its Duration

    def _in_range(self, b: int, pitch: int) -> bool:
        bass = self.bass[b]
        return bass is not None and int(self.cursor.program[b]) == bass.program and bass.low <= pitch <= bass.high

    def wanted(self, b: int) -> np.ndarray:
        """The ids that would strike (or hold) row b's downbeat bass from where the row stands."""
        c = self.cursor
        bass, ids, last, pos = self.bass[b], self.targets[b], int(c.last[b]), c.pos[b]
        if bass is None or self.has_bass[b]:
            return NONE
        if self.is_velocity[last] and pos == 0 and self._in_range(b, int(c.pitch[b])):
            return ids["duration"]
        if pos != 0:  # before the bar's first Position: open it on the downbeat
            opening = pos < 0 and self.pitch_of[last] < 0
            return self.downbeat if opening else NONE
        if self.program_of[last] >= 0:
            return ids["pitch"] if int(c.program[b]) == bass.program else NONE
        if self.position_of[last] >= 0 or np.isfinite(self.beats_of[last]) or self.pitch_of[last] < 0:
            return ids["program"]
        return NONE

    def __call__(self, logits: Tensor) -> Tensor:
        if self.strength == 0:
            return logits
        rows, cols = [], []
        for b in range(logits.shape[0]):
            ids = self.wanted(b)
            rows += [b] * len(ids)
            cols += ids.tolist()
        return self.leans(logits, rows, cols, self.strength) if rows else logits


@dataclass
class BassLeanOptions:
    strength: float = strength_option(2.0, (
        "the logit bonus of the ids that strike the seed's bass note on a new bar's downbeat; 0: off"))


def _make(inputs: HookInputs, o: BassLeanOptions) -> BassLean | None:
    return BassLean(inputs.tokenizer, o.strength, cursor=shared_cursor(inputs)) if o.strength else None


SPEC = HookSpec("bass_lean", BassLeanOptions, ("remi",), ("continue",), _make,
                "each new bar's downbeat leans toward the seed's bass line")
