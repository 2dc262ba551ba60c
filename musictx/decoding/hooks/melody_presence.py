"""Melody presence: in a song's continuation the melody comes back after a rest, as a singer does.

On the 94 POP909 validation songs (10 s seed from 25 s, 30 s new, docs/two-sample-2026-11.md) the `pop`
model's MELODY rests 0.56 of the time in its continuations, against 0.20 in the real next 30 s; where the
seed is an intro without a melody, the continuation almost never lets it in (0.98 of the time silent,
real 0.31). The network alone rests it 0.35 of the time; the echoes, which play the seed's bars again, hold
on to an intro's silence too.

So where the melody has rested `REST_BEATS` beats or more (or has not sounded since the seed began), each
place a note may start (after a Position, or after a note at that position) gets a logit bonus of
``strength`` on the MELODY track's Program. Which note, and whether a note starts at all, stays the model's
choice: the bonus lifts the melody against the other tracks' Programs and the next Position or Bar.

A hook of `musictx.decoding.sampling.generate` for REMI ids with programs, for a continuation whose tracks
include POP909's MELODY (`musictx.io.score_prep.ROLE_PROGRAMS`) beside another track; after the grammar
guard, so a bonus never revives a forbidden id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.filters import add_at
from musictx.decoding.hook import HookInputs, HookSpec
from musictx.decoding.option_fields import strength_option
from musictx.io.score_prep import ROLE_PROGRAMS

if TYPE_CHECKING:
    from torch import Tensor

REST_BEATS = 2.0  # a rest this long (half a 4/4 bar) and the melody is asked back
NEVER = -1e9  # the end of the last note of a row whose track has not sounded


class MelodyPresence(ReadsCursor):
    """The lean toward one track's Program (the MELODY's unless ``program`` says otherwise) once that track
    has rested ``rest_beats`` beats."""

    def __init__(self, tokenizer, strength: float, cursor: RemiCursor | None = None,
                 program: int = ROLE_PROGRAMS["MELODY"], rest_beats: float = REST_BEATS):
        tok = tokenizer
        self.strength, self.program, self.rest_beats = float(strength), program, float(rest_beats)
        self._read(tok, cursor)
        self.per_beat = tok.miditok.config.max_num_pos_per_beat  # positions per beat
        self.program_id = tok.miditok.vocab[f"Program_{program}"]
        self.note_may_start = (tok.numbers_of("Position") >= 0) | np.isfinite(tok.duration_beats())  # (V,)

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        c = self.cursor
        B = len(c.last)
        # positions counted from the first bar: where the current bar starts, and where the melody last ended
        # (the prompt's bars taken at the current bar length; its last Bar opened the bar now written)
        self.bar_start = np.array([(len(c.bars[b]) - 1) * c.bar_len[b] for b in range(B)], dtype=float)
        self.track_end = np.full(B, NEVER)
        for b in range(B):
            for k, bar in enumerate(c.bars[b]):
                for pos, program, _, beats in bar.ended_notes():
                    if program == self.program:
                        end = k * c.bar_len[b] + pos + beats * self.per_beat
                        self.track_end[b] = max(self.track_end[b], end)

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        c = self.cursor
        bar_len = c.bar_len.copy()  # the length of the bar a Bar id closes, before the cursor moves on
        super().update(next_ids, done)
        for b, i in enumerate(next_ids.tolist()):
            if i == c.bar_id:
                self.bar_start[b] += bar_len[b]
            elif c.ended[b] >= 0 and c.program[b] == self.program:
                end = self.bar_start[b] + max(int(c.pos[b]), 0) + c.beats_of[i] * self.per_beat
                self.track_end[b] = max(self.track_end[b], end)

    def resting(self) -> np.ndarray:
        """(B,) bool: rows at a place a note may start whose track has rested ``rest_beats`` beats or more."""
        c = self.cursor
        now = self.bar_start + np.maximum(c.pos, 0)
        can_start = (c.pos >= 0) & self.note_may_start[np.maximum(c.last, 0)]
        return can_start & (now - self.track_end >= self.rest_beats * self.per_beat)

    def __call__(self, logits: Tensor) -> Tensor:
        rows = np.flatnonzero(self.resting())
        if not len(rows):
            return logits
        return add_at(logits, rows, self.program_id, self.strength)


@dataclass
class MelodyPresenceOptions:
    strength: float = strength_option(3.0, (
        "the logit bonus of the MELODY track where the melody has rested 2 beats; 0: off"))


def _make(inputs: HookInputs, o: MelodyPresenceOptions) -> MelodyPresence | None:
    strength = o.strength
    if not strength or ROLE_PROGRAMS["MELODY"] not in inputs.programs or len(inputs.programs) < 2:
        return None
    return MelodyPresence(inputs.tokenizer, strength, cursor=shared_cursor(inputs))


SPEC = HookSpec("melody_presence", MelodyPresenceOptions, ("remi",), ("continue",), _make,
                "the MELODY comes back after 2 beats of rest (a song's tracks, POP909's MELODY among them)")
