"""Lead-sheet chords written as chord events: with a model that writes each bar's chord before its notes
(``tokenizer.chords=true``: `musictx.io.chord_tokens`), a lead sheet (``chords=song.lab``) leads a
continuation by the model's own means: the chord it writes is the sheet's, and its notes follow the chord it
has written, as they learned to.

Each new bar opens ``Position_0`` and the sheet's chord at the bar line, as every bar of the training songs
does (an empty one too); at a later Position the chord under it must
come next where the sheet changes chord since the last one written in the bar, and no chord may come where it
does not. The sheet is read on the seed file's clock at each position's time (the new bars' lines, carried
on at the last bar's length past the file's end). Past the chords the sheet gives, the model writes its own.

A hook of `musictx.decoding.sampling.generate` for REMI ids with chord events; right after the grammar
guard, whose masks it only narrows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.hook import HookInputs, HookSpec
from musictx.decoding.hooks.chord_lean import LOOKUP_AFTER_S
from musictx.decoding.option_fields import option
from musictx.io.chord_tokens import chord_token
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor


class LeadSheetChords(ReadsCursor):
    """The lead sheet's chord events in the new bars (module docstring); ``lines_s``: their bar lines (s)."""

    def __init__(self, tokenizer, chords, lines_s: np.ndarray, cursor: RemiCursor | None = None):
        tok = tokenizer
        self._read(tok, cursor)
        self.tok, self.chords, self.lines_s = tok, chords, np.asarray(lines_s, dtype=np.float64)
        self.is_chord = tok.type_of == "Chord"  # (V,)
        self.chord_ids = np.flatnonzero(self.is_chord)
        self.is_timesig = tok.type_of == "TimeSig"  # (V,)
        self.bar_opening = tok.vocab["Position_0"]

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        self.written = np.full(prompt.shape[0], -1)  # the last chord id written in the current bar, -1: none

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        super().update(next_ids, done)
        for b, i in enumerate(next_ids.tolist()):
            if i == self.tok.bar_id:
                self.written[b] = -1
            elif self.is_chord[i]:
                self.written[b] = i

    def wanted(self, b: int) -> int | None:
        """The id row b must write next (a chord, or the bar's first Position; -1: no chord may come), or None
        where the sheet says nothing."""
        c = self.cursor
        k, pos, last = c.new_bar(b), int(c.pos[b]), int(c.last[b])
        if last < 0 or not 0 <= k < len(self.lines_s) - 1 or self.lines_s[k] + LOOKUP_AFTER_S >= self.chords.ends[-1]:
            return None  # past the bars the lines cover, or the sheet's chords: the model's own
        if self.is_timesig[last]:
            return self.bar_opening  # the bar's first Position, where its chord goes
        if c.position_of[last] < 0:
            return None  # only a Position may be followed by a chord
        a, z = self.lines_s[k], self.lines_s[k + 1]
        t = a + (z - a) * pos / max(int(c.bar_len[b]), 1)
        if t + LOOKUP_AFTER_S >= self.chords.ends[-1]:
            return None  # past the sheet's last chord: the model's own
        token = self.tok.vocab[chord_token(self.chords.label_at(t + LOOKUP_AFTER_S))]
        first = self.written[b] < 0
        return token if first or token != self.written[b] else -1

    def __call__(self, logits: Tensor) -> Tensor:
        rows = [(b, w) for b in range(logits.shape[0]) if (w := self.wanted(b)) is not None]
        if not rows:
            return logits
        mask = np.zeros(tuple(logits.shape), dtype=bool)  # (B, V) True: forbidden here
        for b, w in rows:
            if w < 0:
                mask[b, self.chord_ids] = True  # the same chord goes on: no event
            else:
                mask[b] = True
                mask[b, w] = False
        return logits.masked_fill(torch.from_numpy(mask).to(logits.device), float("-inf"))


@dataclass
class ChordEventsOptions:
    enabled: bool = option(True, "with chords= and a model with chord events: the new bars' chord events are "
                                 "the lead sheet's")


def _make(inputs: HookInputs, o: ChordEventsOptions) -> LeadSheetChords | None:
    if not o.enabled or inputs.chords is None or inputs.new_bar_lines_s is None:
        return None
    if not getattr(inputs.tokenizer, "chords", False):
        return None  # a model without chord events: the chord lean follows the sheet
    return LeadSheetChords(inputs.tokenizer, inputs.chords, inputs.new_bar_lines_s, cursor=shared_cursor(inputs))


SPEC = HookSpec("chord_events", ChordEventsOptions, ("remi",), ("continue",), _make,
                "with chords= and a model with chord events: it writes the lead sheet's chords")
