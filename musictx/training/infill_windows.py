"""The infill curriculum (train split only): a share of the train windows is rewritten in the infill format
(`musictx.io.infill_format`), so that one model learns continuation, bar infill and track-conditioned
generation (accompaniment) from one stream of windows. numpy only; the rng is the window's own.

A window picked for infill takes ``min_bars .. max_bars`` whole bars out and asks for them at the end:

- all their notes (bar infill), or, for ``track_share`` of the windows whose span holds two or more tracks,
  the notes of some tracks only: for ``accompany_share`` of those every track but the melody (what
  ``task=accompany`` asks), else a random proper subset (``tracks=`` of ``task=infill``);
- with the bars after the span in view (``right_prob``), else with the span at the end of what is kept (the
  left edge only: the end of a song, the accompaniment written range by range, and the NLL comparison of
  the scorecard);
- for ``cold_share`` of the accompaniment windows, with nothing before the span: the melody is then the
  only place the harmony can come from. With the song's own accompaniment in view to the left, a model
  learns to repeat that accompaniment's chords and never to read the melody (measured: the real
  accompaniment's NLL was no better with its melody than with the melody silent).

The rest stay plain continuation windows, so continuation is still most of what the model sees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from musictx.io.infill_format import BarSplitter, InfillIds, bar_starts, build_infill
from musictx.io.score_prep import ROLE_PROGRAMS

MELODY_PROGRAM = ROLE_PROGRAMS["MELODY"]


@dataclass(frozen=True)
class InfillCurriculum:
    prob: float = 0.0  # share of train windows in the infill format; 0: off
    track_share: float = 0.5
    accompany_share: float = 0.5
    min_bars: int = 1
    max_bars: int = 8
    right_prob: float = 0.75
    cold_share: float = 0.0  # of the accompaniment windows, those with no bars before the span

    def __post_init__(self):
        for name in ("prob", "track_share", "accompany_share", "right_prob", "cold_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"data.infill.{name} must be in [0, 1], got {getattr(self, name)!r}")
        if not 1 <= self.min_bars <= self.max_bars:
            raise ValueError(f"data.infill needs 1 <= min_bars <= max_bars, got {self.min_bars}, {self.max_bars}")

    def apply(self, ids: np.ndarray, n: int, tok, rng: np.random.Generator) -> np.ndarray:
        """``ids`` (its first ``n``) in the infill format, for a ``prob`` share of draws; else unchanged."""
        if self.prob == 0.0 or rng.random() >= self.prob:
            return ids
        ids = ids[:n]
        starts = bar_starts(ids, tok.bar_id)
        whole = len(starts) - 1  # bars that end inside the window (the last one may be cut)
        if whole - 1 < self.min_bars:  # too few whole bars for a span with a bar before or after it
            return ids
        length = int(rng.integers(self.min_bars, min(self.max_bars, whole - 1) + 1))
        if rng.random() < self.right_prob:
            first = int(rng.integers(1, whole - length + 1))
        else:
            first = whole - length
        splitter = BarSplitter(tok)
        span_programs = splitter.programs_in(np.concatenate([ids[starts[b]:starts[b + 1]]
                                                             for b in range(first, first + length)]))
        taken = self.taken_programs(span_programs, rng)
        cold = taken is not None and MELODY_PROGRAM not in taken and rng.random() < self.cold_share
        if cold:  # the span moves to the window's first whole bar, alone: no edge holds its chords
            first = 0
        keep_edges = not cold
        right = ids[starts[first + length]:starts[whole]] if keep_edges else ids[:0]
        left = ids[:starts[first]] if keep_edges else ids[:0]
        span = [ids[starts[b]:starts[b + 1]] for b in range(first, first + length)]
        prompt, middle = build_infill(left, span, right, splitter, taken, InfillIds.of(tok))
        return np.concatenate([prompt, middle])[-n:]  # a longer result loses its oldest left context

    def taken_programs(self, present: set[int], rng: np.random.Generator) -> set[int] | None:
        """The programs whose notes are taken out: None (all notes), or a proper subset of ``present``."""
        if len(present) < 2 or rng.random() >= self.track_share:
            return None
        if MELODY_PROGRAM in present and rng.random() < self.accompany_share:
            return present - {MELODY_PROGRAM}
        order = sorted(present)
        while True:  # a non-empty proper subset, each one as likely
            chosen = {p for p in order if rng.random() < 0.5}
            if 0 < len(chosen) < len(order):
                return chosen
