"""Motif echo: each track leans toward the seed's own figures, as a songwriter restates a hook.

A pop song is built from a few figures that come back, often at another pitch: on validation POP909 songs
a sixth of the melody's interval 4-grams in the next 30 s are already in a 10 s seed, and the comping
repeats its pattern under the changing chords. A small model left to itself restates almost none of them
(under 1%). Recall guidance (what the whole context adds to the recent music) moves key and pulse but not the
figures: a figure lives in one track's intervals, which REMI spreads over many ids among the other tracks.

So this works on each track's own line. Whenever the next id is a track's pitch (REMI writes every note's
Program id just before its Pitch), the line that track has drawn so far is matched against the same
track's line in the seed by its last intervals, longest match first (3, then 2, then 1 interval), and each
pitch that would go on the way the seed went on from a match, at the current pitch (so also a transposed
restatement), gets ``strength`` times its share of the matches added to its logit. Rhythm and every
other id are left to the model; the grammar guard keeps the last word (its masks are -inf).

A hook of `musictx.decoding.sampling.generate`, after the grammar guard.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.filters import KeptLeans, bonus_row
from musictx.decoding.hook import HookInputs, HookSpec, ids_on_host
from musictx.decoding.option_fields import strength_option

if TYPE_CHECKING:
    from torch import Tensor

MAX_ORDER = 3  # intervals matched at most: longer matches are rarer and add little over 3


class MotifEcho(ReadsCursor):
    """The echo of the seed's figures in the tracks ``programs`` (REMI Program numbers), at ``strength``."""

    def __init__(self, tokenizer, programs: Iterable[int], strength: float, max_order: int = MAX_ORDER,
                 cursor: RemiCursor | None = None):
        tok = tokenizer
        self._read(tok, cursor)
        self.tok, self.strength, self.max_order = tok, float(strength), max_order
        self.leans = KeptLeans()  # the bonus rows, kept once made
        self.pitch_of = tok.numbers_of("Pitch")  # (V,) pitch of a Pitch id, else -1
        self.pitch_id = np.full(128, -1, dtype=np.int64)  # (128,) id of Pitch_n, -1 where none
        pitch_ids = tok.ids_of_type("Pitch")
        self.pitch_id[self.pitch_of[pitch_ids]] = pitch_ids
        self.program_of = tok.numbers_of("Program")  # (V,) program of a Program id, else -1
        # drums (REMI's Program_-1) are not echoed: -1 is also "not a Program id" in program_of
        self.programs = set(int(p) for p in programs if int(p) >= 0)
        self.acts_after = np.isin(self.program_of, list(self.programs))  # (V,) a pitch of an echoed track comes next
        # read at every id, as a list (the cursor's id tables are lists too, `RemiCursor.lists`): in the decoding
        # loop a numpy call costs tens of microseconds (its code is cold after each net pass), a list's item a fraction
        self._pitch_id_list = self.pitch_id.tolist()

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        c = self.cursor
        # per row: a pitch of an echoed track comes next
        self.pitch_next = [c.lists.program_of[i] in self.programs for i in c.last.tolist()]
        self.lines = [{p: [n[2] for bar in bars for n in bar.notes if n[1] == p] for p in self.programs}
                      for bars in c.bars]  # row: track: pitches
        # row -> program -> {the seed's intervals before a point (1 to max_order of them): how often each
        # interval came next there}: a table read at each pitch, where matching the line afresh cost ~1 ms
        self.seed_next = [{p: _next_interval_table(np.diff(np.asarray(line, dtype=np.int64)), self.max_order)
                           for p, line in lines.items()} for lines in self.lines]

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        super().update(next_ids, done)
        c = self.cursor
        program_of, pitch_of = c.lists.program_of, c.lists.pitch_of
        for b, i in enumerate(ids_on_host(next_ids)):
            self.pitch_next[b] = program_of[i] in self.programs  # REMI: a note's Program id precedes its Pitch
            pitch = pitch_of[i]
            if pitch >= 0 and (program := int(c.program[b])) in self.programs:
                self.lines[b][program].append(pitch)

    def next_intervals(self, b: int) -> Counter:
        """How often each interval followed the seed's line of the track being written where it matches the
        end of that track's line in row b, at the longest order that matches; empty when nothing matches."""
        p = int(self.cursor.program[b])
        table, line = self.seed_next[b][p], self.lines[b][p]
        if not table or len(line) < 2:
            return Counter()
        tail = line[-self.max_order - 1:]  # Python ints: numpy's diff costs more than its arithmetic on 4 of them
        recent = tuple(b - a for a, b in zip(tail[:-1], tail[1:], strict=True))  # (<= max_order,)
        for order in range(min(self.max_order, len(recent)), 0, -1):
            counts = table.get(recent[-order:])
            if counts:
                return counts
        return Counter()

    def __call__(self, logits: Tensor) -> Tensor:
        if self.strength == 0 or not any(self.pitch_next):  # most steps draw no pitch: nothing to add
            return logits
        leans = []  # (row, Pitch id, times the interval came, times any came), in the order they are added
        for b in range(logits.shape[0]):
            if not self.pitch_next[b]:
                continue
            line = self.lines[b][int(self.cursor.program[b])]
            if not line:
                continue
            counts = self.next_intervals(b)
            total = sum(counts.values())
            for step, n in counts.items():
                pitch = line[-1] + step
                if 0 <= pitch < 128 and self._pitch_id_list[pitch] >= 0:
                    leans.append((b, self._pitch_id_list[pitch], n, total))
        if not leans:
            return logits
        rows, cols, values = zip(*((b, i, self.strength * n / total) for b, i, n, total in leans), strict=True)
        # each (row, id) once: a row's intervals are distinct, and so are the pitches they lead to
        return self.leans.add(logits, (self.strength, tuple(leans)),  # a line's next pitches: a few sets
                              lambda: bonus_row(logits, list(rows), list(cols), list(values)))


def _next_interval_table(seed: np.ndarray, max_order: int) -> dict[tuple[int, ...], Counter]:
    """{k intervals of ``seed`` (S,) in a row, k = 1 .. max_order: Counter of the interval after them}, the
    last interval never a context (nothing follows it); empty for a seed of fewer than 2 intervals."""
    if len(seed) < 2:
        return {}
    values = seed.tolist()
    table: dict[tuple[int, ...], Counter] = {}
    for order in range(1, min(max_order, len(values) - 1) + 1):
        for i in range(len(values) - order):
            table.setdefault(tuple(values[i:i + order]), Counter())[values[i + order]] += 1
    return table


@dataclass
class MotifEchoOptions:
    strength: float = strength_option(1.0, (
        "the logit bonus of a pitch that goes on as the seed went on from the same last intervals, track by track; 0:"
        " off"))


def _make(inputs: HookInputs, o: MotifEchoOptions) -> MotifEcho | None:
    if not o.strength:
        return None
    return MotifEcho(inputs.tokenizer, inputs.programs, o.strength, cursor=shared_cursor(inputs))


SPEC = HookSpec("motif_echo", MotifEchoOptions, ("remi",), ("continue",), _make,
                "each track leans toward its own seed intervals")
