"""Repeat echo: in an accompaniment, a bar whose melody was heard before leans toward what was written for it
then, all tracks at once.

A pop song plays its passages more than once: where the melody repeats an earlier bar (its onsets), the
accompaniment under it usually does too. `repeat_plan` maps each such bar to the latest earlier bar with the
same melody; while a planned bar is written, this hook gives a logit bonus of ``strength`` to the ids that
would play the earlier bar's accompaniment again, as it was sampled:

- the Program ids of the tracks that the reference strikes more often at the current position than the
  sample has so far, and the Position of the reference's next onset (the Bar id when it has none);
- after a track's Program id, the pitches the reference gives that track at this position and that are not
  drawn yet, at the same pitch.

Velocity and Duration are left to the model, and so is everything the bonus does not win: it is a lean, not
a copy. The given notes' hook runs first, so a bonus never revives a forbidden id. (A continuation's echo of
its seed's phrase, off by default since November 2026, was removed; docs/two-sample-2026-11.md keeps its
numbers.)

A hook of `musictx.decoding.sampling.generate`, for REMI ids (Bar, Position, Program, Pitch per note).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.filters import KeptLeans
from musictx.decoding.hook import HookInputs, HookSpec
from musictx.decoding.option_fields import strength_option

if TYPE_CHECKING:
    from torch import Tensor


class RepeatEcho(ReadsCursor):
    """The lean of each planned new bar toward an earlier new bar, as sampled."""

    def __init__(self, tokenizer, strength: float, plan: dict[int, int], cursor: RemiCursor | None = None):
        """``plan`` (new bar -> an earlier new bar, 0 the first, `repeat_plan`): each new bar it names echoes
        that bar as sampled, and the others echo nothing."""
        tok = tokenizer
        self.strength, self.bar_id, self.plan = float(strength), tok.bar_id, plan
        self.leans = KeptLeans()  # the bonus rows, kept once made
        self.position_of = tok.numbers_of("Position")  # (V,) the position a Position id sets, else -1
        self.program_of = tok.numbers_of("Program")  # (V,) the track a Program id opens, else -1 (drums too)
        self.pitch_of = tok.numbers_of("Pitch")  # (V,) the pitch of a Pitch id, else -1
        self.position_id = _ids_by_number(self.position_of)  # number -> id
        self.program_id = _ids_by_number(self.program_of)
        self.pitch_id = _ids_by_number(self.pitch_of)
        # each id's family as far as the echo cares (`_last_kind`), a list read per draw
        self._kinds = ["bar" if i == self.bar_id else "position" if self.position_of[i] >= 0 else "program"
                       if self.program_of[i] >= 0 else "pitch" if self.pitch_of[i] >= 0 else "other"
                       for i in range(tok.vocab_size)]
        self._read(tok, cursor)

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        # the prompt ends on the Bar id that opens the first new bar: the bars before it are the seed's
        self.seed_bars = [[bar.by_position() for bar in bars[:-1]] for bars in self.cursor.bars]
        self._references: dict[tuple[int, int], dict] = {}  # (row, bar) -> a finished bar's notes by position
        self.acts_after = self._echoes_after()
        self._last_planned: list[int] | None = None  # row -> its plan's last new bar (`_plans_behind`)
        self.done = False  # every row's plan is behind it

    def _echoes_after(self) -> np.ndarray:
        """(V,) bool: no echo right after a Pitch id (`wanted`), nor ever without a plan."""
        return (self.pitch_of < 0) & bool(self.plan)

    def _last_kind(self, b: int) -> str:
        """The family of row b's last id, as far as the echo cares ("": none yet)."""
        i = int(self.cursor.last[b])
        return self._kinds[i] if i >= 0 else ""  # "other": Velocity, Duration, TimeSig, Tempo

    def plan_of(self, b: int) -> dict[int, int]:
        """Row b's plan: new bar -> the bar it echoes, counted from the first new bar (a seed bar below 0)."""
        return self.plan

    def _new_bar(self, b: int) -> int:
        """The new bar row b is writing, 0 the first."""
        return len(self.cursor.bars[b]) - 1 - len(self.seed_bars[b])

    def _plans_behind(self, rows: int) -> bool:
        """Whether every row writes a bar after its plan's last: bars only come, so the hook has nothing more to
        echo in this run (a phrase return's plan covers its first few new bars), and says so without a look up."""
        if self._last_planned is None:  # the plans are read once they are all made (a subclass makes its own)
            self._last_planned = [max(self.plan_of(b), default=-1) for b in range(rows)]
        return all(self._new_bar(b) > last for b, last in enumerate(self._last_planned))

    def reference(self, b: int) -> dict[int, list[tuple[int, int]]] | None:
        """The earlier bar that row b's bar being written echoes (position -> [(program, pitch)]), or None."""
        seed, bars, plan = self.seed_bars[b], self.cursor.bars[b], self.plan_of(b)
        k = self._new_bar(b)
        if k not in plan or plan[k] >= k:
            return None
        at = len(seed) + plan[k]  # a bar before the one being written: finished, so read once
        if (b, at) not in self._references:
            self._references[b, at] = bars[at].by_position()
        return self._references[b, at]

    def wanted(self, b: int) -> list[int]:
        """The ids that would go on playing row b's reference bar from where the row stands."""
        ref, last_kind = self.reference(b), self._last_kind(b)
        if not ref or last_kind in ("pitch", ""):
            return []
        pos = int(self.cursor.pos[b])
        return self._wanted_at(b, ref, pos, self.cursor.bars[b][-1].at(pos), last_kind)

    def _wanted_at(self, b: int, ref: dict[int, list[tuple[int, int]]], pos: int, drawn: list[tuple[int, int]],
                   last_kind: str) -> list[int]:
        """`wanted` of row b at position ``pos`` of its bar, its reference bar ``ref`` and the (program, pitch)
        notes ``drawn`` here so far given, after an id of family ``last_kind`` (not a Pitch)."""
        wanted = ref.get(pos, [])
        if last_kind == "program":  # the reference's pitches of this track here, not drawn yet
            return [self.pitch_id[p] for (t, p) in _more_often(wanted, drawn)
                    if t == self.cursor.program[b] and p in self.pitch_id]
        # the tracks with fewer notes here than the reference (counted, so that a chord drawn at other pitches
        # is not pushed on and on), and equally the reference's next onset: finishing the chord first
        # copied longer stretches for the same reuse on validation songs
        short = _more_often([t for t, _ in wanted], [t for t, _ in drawn])
        ids = [self.program_id[t] for t in short if t in self.program_id]
        later = [p for p in ref if p > pos]
        if later:
            return ids + ([self.position_id[min(later)]] if min(later) in self.position_id else [])
        return ids + ([self.bar_id] if last_kind != "bar" else [])

    def __call__(self, logits: Tensor) -> Tensor:
        if self.strength == 0 or self.done:
            return logits
        if self._plans_behind(logits.shape[0]):
            self.done = True  # from here on each call returns at once: most of a continuation's draws
            return logits
        rows, cols = [], []
        for b in range(logits.shape[0]):
            for i in self.wanted(b):
                rows.append(b)
                cols.append(i)
        return self.leans(logits, rows, cols, self.strength) if rows else logits


def _more_often(items: list, than: list) -> list:
    """The distinct ``items`` that come more often there than in ``than``, in their first order: the keys of
    ``Counter(items) - Counter(than)``, counted on the few notes of an onset without two Counters' cost."""
    return [x for x in dict.fromkeys(items) if items.count(x) > than.count(x)]


def _ids_by_number(numbers: np.ndarray) -> dict[int, int]:
    return {int(n): int(i) for i, n in enumerate(numbers.tolist()) if n >= 0}


def repeat_plan(bar_keys: list) -> dict[int, int]:
    """{bar: the latest earlier bar with the same key} for each bar whose key (e.g. its melody's onsets, None:
    nothing to match) came before: the plan of a `RepeatEcho` that plays a repeated passage's bars again."""
    seen, plan = {}, {}
    for k, key in enumerate(bar_keys):
        if key is None:
            continue
        if key in seen:
            plan[k] = seen[key]
        seen[key] = k
    return plan


@dataclass
class RepeatEchoOptions:
    strength: float = strength_option(3.0, (
        "the logit bonus of an id that plays the accompaniment written for a melody bar heard before again; 0: off"))


def _repeat(inputs: HookInputs, o: RepeatEchoOptions) -> RepeatEcho | None:
    if not o.strength:
        return None
    plan = inputs.accompaniment.repeat_plan
    return RepeatEcho(inputs.tokenizer, o.strength, plan, cursor=shared_cursor(inputs))


# after the given notes' hook: the ids it forbids stay forbidden
SPEC = HookSpec("repeat_echo", RepeatEchoOptions, ("remi",), ("accompany",), _repeat,
                       "a bar whose melody was heard before leans toward its accompaniment then")
