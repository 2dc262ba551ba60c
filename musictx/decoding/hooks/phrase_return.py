"""Phrase return: a seed that states its phrase twice hears it once more, and where a sample is chosen among
candidates (`best_of`), some candidates replay the seed's last bars whatever it states.

A song that has just played a phrase of a few bars twice (a verse's two halves, a riff, the bundled motif) most
often plays it a third time, varied or not; the small `pop` leaves it instead (docs/pop.md, "Phrase return").
Where the seed's last ``P`` bars restate the ``P`` before them (2 <= P <= 4; each bar pair sharing at least
``MATCH`` of its notes by position, track and pitch), the first ``P`` new bars lean toward the seed's last ``P``,
bar by bar, all tracks at once: the repeat echo's lean (`musictx.decoding.hooks.repeat_echo`), its reference a
seed bar. After them the hook does nothing. Velocity and Duration stay the model's, and so does every id the
lean does not win.

A seed that restates nothing is the common case, yet a song's next bars often restate its last ones: a
verse's second half, a chorus sung again. So of each sample's ``best_of`` candidates the last ``replays`` (at
most all but one) lean toward the seed's last ``REPLAY_BARS`` bars, and the model's critic keeps the candidate
that sounds most like a song, a replay or a fresh draw (docs/generation.md, "Replays among the candidates").
A replay plays the seed's top line again (``voices="top"``: the highest note at each onset, note for note, and
the other tracks' onsets) under pitches of the model's own, where a replay of every voice copied whole
stretches of the seed (``voices="all"``; docs/generation.md, "The top line replayed"). One draw
(``best_of=1``) never replays an unrestated seed, and nor does a continuation that follows a lead sheet
(``chords=``): the sheet says where its harmony goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import shared_cursor
from musictx.decoding.hook import HookInputs, HookSpec
from musictx.decoding.hooks.repeat_echo import RepeatEcho
from musictx.decoding.option_fields import MAX_BEST_OF, option, strength_option

if TYPE_CHECKING:
    from torch import Tensor

PERIODS = (4, 3, 2)  # phrase lengths in bars, the longest first; one bar restated is a loop (`bar_repeats`)
REPLAY_BARS = 4  # the seed's last bars a replaying candidate leans toward (fewer in a shorter seed)
MATCH = 0.6  # the least share of two bars' notes (position, track, pitch) they have in common: a new bass or a
# varied melody note leaves a restated bar of 6-8 notes at 0.6-0.8


def shared_notes(a: dict, b: dict) -> float:
    """The Jaccard share of the (position, track, pitch) notes of two bars (`Bar.by_position`); 0 when empty."""
    na = {(pos, *note) for pos, notes in a.items() for note in notes}
    nb = {(pos, *note) for pos, notes in b.items() for note in notes}
    return len(na & nb) / len(na | nb) if na and nb else 0.0


def restated_period(bars: list[dict]) -> int | None:
    """The length P of the phrase the last 2P ``bars`` state twice (the longest of `PERIODS`), else None."""
    for period in PERIODS:
        if len(bars) >= 2 * period and all(shared_notes(bars[-k], bars[-k - period]) >= MATCH
                                           for k in range(1, period + 1)):
            return period
    return None


def replaying_rows(rows: int, candidates: int, asked: int) -> list[bool]:
    """Which of ``rows`` rows replay: the last ``asked`` of each sample's ``candidates`` (rows in turn), at most
    all but one, so that the critic always weighs a fresh draw too; none for one candidate."""
    n = min(asked, candidates - 1)
    return [b % candidates >= candidates - n for b in range(rows)]


class PhraseReturn(RepeatEcho):
    """The repeat echo with, per row, a plan read from its seed: new bar k -> seed bar ``k - P`` (counted from
    the first new bar) for the first P new bars, where the seed restates a P-bar phrase, or on a replaying row
    where it does not, P its last bars (`REPLAY_BARS`, at least 2). A chord of the phrase is finished before it
    moves on: its downbeat keeps the melody's note over the bass. A replaying row leans toward the pitches of
    its seed bars' top line only (``voices="top"``)."""

    def __init__(self, tokenizer, strength: float, cursor=None, candidates: int = 1, replays: int = 0,
                 voices: str = "all"):
        """``candidates`` rows a sample (`best_of`), of which the last ``replays`` replay (`replaying_rows`)
        the seed's ``voices``: "all" its notes, "top" its top line (the highest note at each onset)."""
        super().__init__(tokenizer, strength, {}, cursor)
        self.plans: list[dict[int, int]] = []
        self.top_only: list[bool] = []  # row -> it replays only the seed's top line
        self.candidates, self.replays, self.voices = candidates, replays, voices

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        replaying = replaying_rows(len(self.seed_bars), self.candidates, self.replays)  # (B,)
        restated = [restated_period(bars) for bars in self.seed_bars]  # row -> P or None
        periods = [p or (_replay_period(bars) if replay else None)
                   for p, bars, replay in zip(restated, self.seed_bars, replaying, strict=True)]
        self.plans = [{k: k - p for k in range(p)} if p else {} for p in periods]
        self.top_only = [replay and not p and self.voices == "top" for p, replay in zip(restated, replaying,
                                                                                           strict=True)]
        self.acts_after = self._echoes_after()

    def _echoes_after(self) -> np.ndarray:
        return (self.pitch_of < 0) & any(self.plans)  # the seed restates nothing, the common case: no call at all

    def _wanted_at(self, b: int, ref: dict[int, list[tuple[int, int]]], pos: int, drawn: list[tuple[int, int]],
                   last_kind: str) -> list[int]:
        """The repeat echo's ids, but where a track is short of the phrase's notes here only its Program: the
        chord is finished before the next onset leans up (the echo leans to both alike)."""
        ids = super()._wanted_at(b, ref, pos, drawn, last_kind)
        top_line = self._top_line_wanted(b, ref.get(pos, []), drawn, last_kind) if ids and self.top_only[b] else None
        if top_line is not None:
            return top_line
        tracks = [i for i in ids if self.program_of[i] >= 0]
        return tracks or ids

    def _top_line_wanted(self, b: int, notes: list[tuple[int, int]], drawn: list[tuple[int, int]],
                         last_kind: str) -> list[int] | None:
        """On a row that replays the reference's top line, whose (program, pitch) ``notes`` sound here and the
        row's ``drawn`` so far: its track's Program until that track plays here, then its pitch (once: not where
        the track has struck it here already); None once the track has played here, where the row goes on as a
        replay of all voices (the Programs of the tracks short of notes here, then the next onset) but no pitch
        under the top line is leant toward: those are the model's."""
        top = max(notes, key=lambda note: note[1]) if notes else None
        if last_kind == "program":
            wanted = top and top[0] == self.cursor.program[b] and top not in drawn and top[1] in self.pitch_id
            return [self.pitch_id[top[1]]] if wanted else []
        if top and top[0] not in {track for track, _ in drawn}:
            return [self.program_id[top[0]]] if top[0] in self.program_id else []
        return None

    def plan_of(self, b: int) -> dict[int, int]:
        return self.plans[b]


def _replay_period(bars: list[dict]) -> int | None:
    """The bars a replaying row plays again: the seed's last `REPLAY_BARS`, fewer in a shorter seed; None
    under 2 (one bar played again is a loop, `bar_repeats`)."""
    period = min(REPLAY_BARS, len(bars))
    return period if period >= 2 else None


@dataclass
class PhraseReturnOptions:
    strength: float = strength_option(4.0, (
        "where the seed plays its last phrase (2-4 bars) twice, the logit bonus of an id that plays it a third "
        "time in the first new bars (and in the replaying candidates, its last 4 bars); 0: off"))
    replays: int = option(1, (
        "of each sample's best_of candidates, how many (at most all but one) replay the seed's last 4 bars even "
        "where it states nothing twice (not with chords=); the critic keeps a replay only where it sounds most like"
        " the song; 0: none"),
        low=0, high=MAX_BEST_OF, off="0")
    voices: str = option("top", (
        "what a replaying candidate plays again: all the seed's notes, or its top line (the highest note at each "
        "onset) over an accompaniment of the model's own"), choices=("all", "top"))


def replays_asked(o: PhraseReturnOptions, chords) -> int:
    """How many of a sample's candidates replay under the options ``o`` (before `replaying_rows` keeps a fresh
    one): none with the hook off, or with a lead sheet (``chords``), which says where the new bars' harmony goes
    where replaying the seed's bars would go back instead."""
    return o.replays if o.strength and chords is None else 0


def _make(inputs: HookInputs, o: PhraseReturnOptions) -> PhraseReturn | None:
    if not o.strength:
        return None
    return PhraseReturn(inputs.tokenizer, o.strength, cursor=shared_cursor(inputs), candidates=inputs.candidates,
                        replays=replays_asked(o, inputs.chords), voices=o.voices)


SPEC = HookSpec("phrase_return", PhraseReturnOptions, ("remi",), ("continue",), _make,
                "a seed that plays its phrase twice hears it once more; some best_of candidates replay its last bars")
