"""The given tracks played into a plain continuation (``task=accompany``): the model writes the new tracks bar
by bar as it learnt to continue songs, while the given tracks' notes (the melody, and any other track the
user gave) are put into the stream at their own positions. At every onset the model has the melody note
just struck in view when it picks the accompaniment's notes.

REMI with programs writes a position's notes melody first (POP909's MELODY, then BRIDGE, then PIANO), so a
stream with the melody put in reads like the songs the model was trained on. Two hooks
(`musictx.decoding.hook`), after the grammar guard and the repeat limit:

- `GivenNotes` forbids the given tracks' Programs (the model writes no notes of its own there) and moving
  past the next given onset (a later Position, or a Bar while the bar has given notes to come, or a note
  before the bar's first Position, which REMI puts at the bar line); when the
  model's Position is that onset, it plays the onset's notes (Program, Pitch, Velocity, Duration each) one
  id per step, as the only id left to draw.
- `HarmonyLean` adds a bonus to the new tracks' pitches whose pitch class the given tracks sound in the same
  half bar: the accompaniment leans toward the melody's harmony, as a player reading the tune would.
- `CounterRest` takes points off the counter-melody's (POP909's BRIDGE) notes where a given note sounds: a
  second melody answers the first in its rests rather than doubling it (POP909's bridges strike most of
  their notes while the melody rests), and a model that hears only a melody otherwise writes one through
  every bar.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.filters import add_at
from musictx.decoding.hook import Grammar, HookInputs, HookSpec, LogitsHook
from musictx.decoding.option_fields import option, strength_option
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

# (position in the bar, the ids of the notes struck there: Program Pitch Velocity Duration for each)
Onset = tuple[int, list[int]]
NOTE_PARTS = ("Pitch", "Velocity", "Duration")


def given_onsets(tok, bar_ids: np.ndarray, programs: set[int]) -> list[Onset]:
    """The onsets of ``programs``' notes in one bar of ids, in order, each with its notes' ids."""
    out: list[Onset] = []
    pos, note, keep = -1, [], False
    for i in (int(x) for x in bar_ids):
        kind = tok.type_of[i]
        if kind not in NOTE_PARTS:
            if keep and note:
                _add(out, pos, note)
            note, keep = [], False
        if kind == "Position":
            pos = int(tok.id_to_token(i).split("_")[1])
        elif kind == "Program":
            keep, note = int(tok.id_to_token(i).split("_")[1]) in programs, [i]
        elif keep and kind in NOTE_PARTS:
            note.append(i)
    if keep and note:
        _add(out, pos, note)
    return out


def _add(onsets: list[Onset], pos: int, note: list[int]) -> None:
    if onsets and onsets[-1][0] == pos:
        onsets[-1][1].extend(note)
    else:
        onsets.append((pos, list(note)))


class GivenNotes(ReadsCursor, Grammar):
    """Plays ``bars`` (a list of `Onset` per new bar; the prompt's last id is the Bar of the first) of the
    given ``programs`` into every sample of the batch. The bar and position each sample is at are the cursor's."""

    def __init__(self, tok, bars: list[list[Onset]], programs: set[int], cursor: RemiCursor | None = None):
        self.tok, self.bars = tok, bars
        self._read(tok, cursor)
        self.given_programs = [tok.miditok.vocab[f"Program_{p}"] for p in sorted(programs)]
        # the other Program ids: the new tracks', whose Pitch the leans and the bass floor shape
        self.new_programs = np.array([i for i in tok.ids_of_type("Program") if int(i) not in self.given_programs])
        self.program_ids = torch.as_tensor(tok.ids_of_type("Program"))
        position_ids = tok.ids_of_type("Position")
        self.position_of = {int(i): int(tok.id_to_token(int(i)).split("_")[1]) for i in position_ids}
        self.id_of_position = {p: i for i, p in self.position_of.items()}
        by_position = np.array([self.position_of[int(i)] for i in position_ids])
        # (ids of the positions after p, with the Bar id) for each p: what moving past an onset at p draws
        self.past = {p: torch.as_tensor(np.append(position_ids[by_position > p], tok.bar_id))
                     for p in self.id_of_position}

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        B = prompt.shape[0]
        self.next = np.zeros(B, dtype=np.int64)  # index of the bar's next given onset
        self.queue: list[list[int]] = [[] for _ in range(B)]  # given ids still to play

    def bar(self, b: int) -> int:
        """The new bar row b is in (the prompt's last id, a Bar, opened bar 0)."""
        return self.cursor.new_bar(b)

    def new_pitch_next(self, b: int) -> bool:
        """Whether row b draws a new track's Pitch next: no given note is being played, and its last id is a new
        track's Program."""
        return not self.queue[b] and bool(np.isin(self.cursor.last[b], self.new_programs))

    def upcoming(self, b: int) -> Onset | None:
        k = self.bar(b)
        bar = self.bars[k] if k < len(self.bars) else []
        return bar[self.next[b]] if self.next[b] < len(bar) else None

    def __call__(self, logits: Tensor) -> Tensor:
        """Logits (B, V): a given id alone, else the given programs and the ids past the next onset at -inf."""
        out = logits.clone()
        out[:, self.given_programs] = float("-inf")
        for b in range(out.shape[0]):
            if self.queue[b]:
                out[b] = float("-inf")
                out[b, self.queue[b][0]] = 0.0
                continue
            onset = self.upcoming(b)
            if onset is None:
                continue
            out[b, self.past[onset[0]].to(out.device)] = float("-inf")
            if self.cursor.pos[b] < 0:  # a note before the bar's first Position sits at its start, where the model
                out[b, self.program_ids.to(out.device)] = float("-inf")  # would never name Position_0 again
            if torch.isinf(out[b]).all():  # nothing the other hooks allow is left: go to the onset
                out[b, self.id_of_position[onset[0]]] = 0.0
        return out

    def only_choice(self) -> list[int] | None:
        """Each row's next given id, where every row is playing a given note (its Program, Pitch, Velocity and
        Duration come one id a step, each the only one `__call__` leaves)."""
        return [queue[0] for queue in self.queue] if all(self.queue) else None

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        super().update(next_ids, done)
        for b, i in enumerate(next_ids.tolist()):
            if self.queue[b]:  # a given note's Program, Pitch, Velocity or Duration: no bar or position moves
                self.queue[b].pop(0)
            elif i == self.tok.bar_id:
                self.next[b] = 0
            elif i in self.position_of:
                onset = self.upcoming(b)
                if onset is not None and onset[0] == self.cursor.pos[b]:
                    self.queue[b] = list(onset[1])
                    self.next[b] += 1


def half_bar_pitch_classes(onsets: np.ndarray, ends: np.ndarray, pitches: np.ndarray,
                           lines: np.ndarray) -> list[tuple[set[int], set[int]]]:
    """The pitch classes sounding in each half of each bar (``lines``: the bar lines, in the notes' ticks)."""
    out = []
    for a, z in zip(lines[:-1], lines[1:], strict=True):
        mid = (a + z) / 2
        halves = ((a, mid), (mid, z))
        out.append(tuple({int(p) % 12 for p in pitches[(onsets < hi) & (ends > lo)]} for lo, hi in halves))
    return out


def pc_weights(target) -> np.ndarray:
    """(12,) a half bar's lean: 1 on each pitch class of a set, or the (12,) weights as given."""
    if isinstance(target, np.ndarray):
        return target
    out = np.zeros(12)
    out[list(target)] = 1.0
    return out


class HarmonyLean(LogitsHook):
    """A bonus of ``strength`` (nats) on a new track's Pitch ids whose pitch class is in ``halves[bar][half]``
    (from `half_bar_pitch_classes`; or a (12,) array of weights in [0, 1], the bonus scaled by its pitch
    class's), at the place `GivenNotes` ``given`` follows; ``bar_positions``: each new bar's length in
    positions. Only a Pitch right after a new track's Program gets it. ``strong``: the bonus instead at the
    strong beats (a bar's first beat and its middle, where a chord is heard most); None: ``strength``."""

    def __init__(self, tok, given: GivenNotes, halves: list[tuple], bar_positions: list[int], strength: float,
                 strong: float | None = None):
        self.given, self.bar_positions, self.strength = given, bar_positions, strength
        self.strong = strength if strong is None else strong
        self.halves = [tuple(pc_weights(h) for h in pair) for pair in halves]  # (12,) weights, made once
        self.pitch_ids = torch.as_tensor(tok.ids_of_type("Pitch"))
        self.pitch_class = np.array([int(tok.id_to_token(int(i)).split("_")[1]) % 12 for i in self.pitch_ids])

    def __call__(self, logits: Tensor) -> Tensor:
        g, c = self.given, self.given.cursor
        rows = [b for b in range(logits.shape[0]) if g.bar(b) < len(self.halves) and g.new_pitch_next(b)]
        if not rows:
            return logits
        out = logits.clone()
        for b in rows:
            bar = g.bar(b)
            pos = max(int(c.pos[b]), 0)
            weights = self.halves[bar][int(pos * 2 >= self.bar_positions[bar])]
            if weights.any():
                strong = pos * 2 % self.bar_positions[bar] == 0  # the bar's first position or its middle
                bonus = weights[self.pitch_class] * (self.strong if strong else self.strength)  # (n_pitches,)
                out[b, self.pitch_ids.to(out.device)] += torch.as_tensor(bonus, dtype=out.dtype, device=out.device)
        return out


def sounding_positions(onsets: np.ndarray, ends: np.ndarray, lines: np.ndarray, bar_positions: list[int]
                       ) -> list[np.ndarray]:
    """For each bar between ``lines`` (ticks), (positions,) bool: a given note sounds at that position."""
    out = []
    for (a, z), n in zip(zip(lines[:-1], lines[1:], strict=True), bar_positions, strict=True):
        at = a + (z - a) * np.arange(n) / n  # (n,) each position's tick
        out.append(((onsets[None, :] <= at[:, None]) & (ends[None, :] > at[:, None])).any(axis=1)
                   if len(onsets) else np.zeros(n, dtype=bool))
    return out


class CounterRest(LogitsHook):
    """A counter-melody (POP909's BRIDGE) answers the melody: ``penalty`` (nats) off its Program id wherever a
    given note sounds at the position `GivenNotes` ``given`` is at, so it plays mostly where the melody rests."""

    def __init__(self, tok, given: GivenNotes, sounding: list[np.ndarray], program: int, penalty: float):
        self.given, self.sounding, self.penalty = given, sounding, penalty
        self.program_id = tok.miditok.vocab[f"Program_{program}"]

    def __call__(self, logits: Tensor) -> Tensor:
        g, pos = self.given, self.given.cursor.pos
        rows = [b for b in range(logits.shape[0]) if not g.queue[b] and g.bar(b) < len(self.sounding)
                and pos[b] >= 0 and self.sounding[g.bar(b)][min(int(pos[b]), len(self.sounding[g.bar(b)]) - 1)]]
        return add_at(logits, rows, self.program_id, -self.penalty) if rows else logits


@dataclass
class HarmonyLeanOptions:
    strength: float = strength_option(3.0, (
        "the logit bonus of a new track's pitch the chords= file's chord holds (without chords= and with guess=0: one"
        " the melody sounds in the same half bar); 0: off"))
    guess: float = strength_option(5.0, (
        "without chords=: the bonus, times its probability, of a pitch class the harmonizer guesses the chord holds "
        "from the melody; 0: the melody's own pitch classes instead"))
    # a chord is heard most on a bar's first beat and its middle: the chord tones land there
    guess_strong: float = option(10.0, "the guess's bonus at the strong beats (a bar's first beat and its middle)",
                                 low=0)


@dataclass
class CounterRestOptions:
    # 2 since a tune alone starts cold (docs/infill.md, "A tune alone"): its BRIDGE then strikes 0.39 of its notes
    # under a sounding melody note (POP909: 0.41); 4 left it nearly silent (35 notes of the songs' 187, none under)
    strength: float = strength_option(2.0, (
        "the logit penalty on the counter-melody's (BRIDGE's) track where a given note sounds: it answers the melody "
        "in its rests; 0: off"))


def _given(inputs: HookInputs, _options) -> GivenNotes:
    acc = inputs.accompaniment
    return GivenNotes(inputs.tokenizer, acc.given_bars, acc.given, cursor=shared_cursor(inputs))


def _harmony(inputs: HookInputs, o: HarmonyLeanOptions, given: GivenNotes) -> HarmonyLean | None:
    acc = inputs.accompaniment
    halves, strength, strong = acc.harmony_target(o)
    if not strength:
        return None
    return HarmonyLean(inputs.tokenizer, given, halves, acc.lengths, strength, strong)


def _counter(inputs: HookInputs, o: CounterRestOptions, given: GivenNotes) -> CounterRest | None:
    acc, penalty = inputs.accompaniment, o.strength
    if not penalty or acc.counter_program is None:
        return None
    return CounterRest(inputs.tokenizer, given, acc.given_sounding, acc.counter_program, penalty)


GIVEN_NOTES = HookSpec("given_notes", None, ("remi",), ("accompany",), _given,
                       "plays the given tracks' notes (the melody) at their own onsets")
HARMONY_LEAN = HookSpec("harmony_lean", HarmonyLeanOptions, ("remi",),
                        ("accompany",), _harmony,
                        "new tracks' pitches lean toward the chords (chords=, else the harmonizer's guess)",
                        needs=("given_notes",))
COUNTER_REST = HookSpec("counter_rest", CounterRestOptions, ("remi",), ("accompany",), _counter,
                        "the counter-melody (BRIDGE) keeps mostly to the melody's rests", needs=("given_notes",))
