"""The infill format: bars taken out of a REMI stream and asked for at its end, behind sentinels. No torch.

One format serves both new tasks (fill-in-the-middle, as in MMM and code models' FIM):

- **bar infill**: every note of bars ``s .. e-1`` is taken out;
- **track-conditioned generation** (accompaniment, or one track redone): only the notes of some programs
  are taken out of those bars, the others stay where they are and condition what is written.

A stream ``left | span | right`` becomes::

    left  | span bars without the taken notes, each closed by Fill | right | Infill_Start
          | the taken notes of the span, bar by bar (Bar TimeSig Position Program Pitch ...) | Infill_End

so the model has read both edges (and the given tracks of the span, where they stay) before it writes the
middle, and it writes the middle as ordinary REMI bars: one Bar per Fill. ``right`` may be empty (fill the
end of a song, or write an accompaniment bar range by bar range with only the past in view).

Why the taken part goes to the end rather than the given tracks first in each bar: the same format then
does bar infill, track infill and accompaniment, the middle is written left to right with a KV cache in one
pass, and the right edge is in view, which a bar-interleaved order cannot give.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from musictx.io.metrical_tokenizer import INFILL_TOKENS

INFILL_START, INFILL_END, FILL = INFILL_TOKENS
_NOTE_END = ("Program", "Position", "Bar", "Tempo", "TimeSig", "Fill", "Infill")  # types that close a note


@dataclass(frozen=True)
class InfillIds:
    start: int
    end: int
    fill: int

    @classmethod
    def of(cls, tok) -> InfillIds:
        if INFILL_START not in getattr(tok, "vocab", {}):
            raise ValueError("this model's tokenizer has no infill tokens (Infill_Start, Infill_End, Fill): "
                             "infill needs the shipped pop_infill or a model fine-tuned with experiment=pop_infill")
        return cls(tok.vocab[INFILL_START], tok.vocab[INFILL_END], tok.vocab[FILL])


def bar_starts(ids: np.ndarray, bar_id: int) -> np.ndarray:
    """(n_bars,) index of every Bar id of ``ids``."""
    return np.flatnonzero(np.asarray(ids) == bar_id)


class BarSplitter:
    """Splits a whole bar of REMI ids into the given part and the taken part (notes of chosen programs)."""

    def __init__(self, tok):
        self.tok = tok
        self.type_of = tok.type_of  # (V,) token family of each id
        self.program_of = tok.numbers_of("Program", missing=-2)  # (V,) program of a Program id (drums: -1)

    def programs_in(self, ids: np.ndarray) -> set[int]:
        ids = np.asarray(ids)
        return {int(p) for p in self.program_of[ids[self.type_of[ids] == "Program"]]}

    def split(self, bar: np.ndarray, taken: set[int] | None) -> tuple[list[int], list[int]]:
        """(given, taken) ids of one bar (from its Bar id). ``taken``: the programs whose notes are taken
        out, None: all notes. Both parts keep the Bar and TimeSig; the given part keeps the Tempo ids;
        each part writes a Position only where it has something at that position."""
        given, took = [], []
        position, in_given, in_took = None, False, False
        bar = [int(i) for i in bar]
        k = 0
        while k < len(bar):
            i, kind = bar[k], self.type_of[bar[k]]
            if kind in ("Bar", "TimeSig"):
                given.append(i)
                took.append(i)
            elif kind == "Position":
                position, in_given, in_took = i, False, False
            elif kind == "Program":
                end = k + 1
                while end < len(bar) and self.type_of[bar[end]] not in _NOTE_END:
                    end += 1
                is_taken = taken is None or int(self.program_of[i]) in taken
                part = took if is_taken else given
                if position is not None and not (in_took if is_taken else in_given):
                    part.append(position)
                in_took, in_given = in_took or is_taken, in_given or not is_taken
                part.extend(bar[k:end])
                k = end
                continue
            else:  # Tempo (and anything else that is not a note) belongs to the given timeline
                if position is not None and not in_given and kind == "Tempo":
                    given.append(position)
                    in_given = True
                given.append(i)
            k += 1
        return given, took


def build_infill(left: np.ndarray, span_bars: list[np.ndarray], right: np.ndarray, splitter: BarSplitter,
                 taken: set[int] | None, ids: InfillIds) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, middle): the prompt ends with Infill_Start; the middle is the taken notes bar by bar and
    Infill_End (the training target; at generation the model writes it)."""
    context, middle = [np.asarray(left, dtype=np.int64)], []
    for bar in span_bars:
        given, took = splitter.split(bar, taken)
        context.append(np.asarray([*given, ids.fill], dtype=np.int64))
        middle.extend(took)
    context.append(np.asarray(right, dtype=np.int64))
    context.append(np.asarray([ids.start], dtype=np.int64))
    return np.concatenate(context), np.asarray([*middle, ids.end], dtype=np.int64)
