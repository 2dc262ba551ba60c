"""Phrase return: a seed that states its phrase twice hears it once more.

A song that has just played a phrase of a few bars twice (a verse's two halves, a riff, the bundled motif) most
often plays it a third time, varied or not; the small `pop` leaves it instead (docs/pop.md, "Phrase return").
Where the seed's last ``P`` bars restate the ``P`` before them (2 <= P <= 4; each bar pair sharing at least
``MATCH`` of its notes by position, track and pitch), the first ``P`` new bars lean toward the seed's last ``P``,
bar by bar, all tracks at once: the repeat echo's lean (`musictx.decoding.hooks.repeat_echo`), its reference a
seed bar. After them, and for a seed that restates nothing, the hook does nothing. Velocity and Duration stay
the model's, and so does every id the lean does not win.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from musictx.decoding.cursor import shared_cursor
from musictx.decoding.hook import HookInputs, HookSpec
from musictx.decoding.hooks.repeat_echo import RepeatEcho
from musictx.decoding.option_fields import strength_option

if TYPE_CHECKING:
    from torch import Tensor

PERIODS = (4, 3, 2)  # phrase lengths in bars, the longest first; one bar restated is a loop (`bar_repeats`)
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


class PhraseReturn(RepeatEcho):
    """The repeat echo with, per row, a plan read from its seed: new bar k -> seed bar ``k - P`` (counted from
    the first new bar) for the first P new bars, where the seed restates a P-bar phrase. A chord of the phrase
    is finished before it moves on: its downbeat keeps the melody's note over the bass."""

    def __init__(self, tokenizer, strength: float, cursor=None):
        super().__init__(tokenizer, strength, {}, cursor)
        self.plans: list[dict[int, int]] = []

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        periods = [restated_period(bars) for bars in self.seed_bars]  # row -> P or None
        self.plans = [{k: k - p for k in range(p)} if p else {} for p in periods]

    def __call__(self, logits: Tensor) -> Tensor:
        if not any(self.plans):  # the seed restates nothing, the common case: not a look per draw
            return logits
        return super().__call__(logits)

    def wanted(self, b: int) -> list[int]:
        """The repeat echo's ids, but where a track is short of the phrase's notes here only its Program: the
        chord is finished before the next onset leans up (the echo leans to both alike)."""
        ids = super().wanted(b)
        tracks = [i for i in ids if self.program_of[i] >= 0]
        return tracks or ids

    def plan_of(self, b: int) -> dict[int, int]:
        return self.plans[b]


@dataclass
class PhraseReturnOptions:
    strength: float = strength_option(4.0, (
        "where the seed plays its last phrase (2-4 bars) twice, the logit bonus of an id that plays it a third "
        "time in the first new bars; 0: off"))


def _make(inputs: HookInputs, o: PhraseReturnOptions) -> PhraseReturn | None:
    return PhraseReturn(inputs.tokenizer, o.strength, cursor=shared_cursor(inputs)) if o.strength else None


SPEC = HookSpec("phrase_return", PhraseReturnOptions, ("remi",), ("continue",), _make,
                "a seed that plays its last phrase twice hears it once more in the first new bars")
