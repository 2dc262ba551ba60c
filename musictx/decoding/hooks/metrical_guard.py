"""The metrical tokenizer's own grammar as a sampling guard: the sampler only draws what makes a valid bar.

REMI's grammar is MidiTok's ``tokens_types_graph`` (after a Pitch comes a Velocity, then a Duration, then
a Position, Program or Bar ...). On top of it, three rules no token type can say:

- positions only move forward within a bar, and stay inside the bar (a 4/4 bar of 16th notes has 16);
- a continuation plays the seed's tracks: Program ids outside the seed's programs are never drawn, so no
  instrument appears that the user did not give (an unconditional sample may use any);
- the seed's meter and tempo go on: after a Bar only the seed's last TimeSig id may come, and no Tempo id
  (the output is written on the seed's own tempo map);
- one onset of one track holds each pitch once and at most `MAX_NOTES_AT_ONSET` notes: a model can otherwise
  stack the same few pitches at one position until the token cap ends the sample (the H100's `pop` did, in
  an accompaniment: 139 notes at 5 positions of one bar), and a MIDI file keeps only one of each.

Repetition control, the other rule on bars, is its own hook (`musictx.decoding.hooks.bar_repeats`). A sampling
hook (`musictx.decoding.hook`) that reads the run's shared cursor (`musictx.decoding.cursor`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.filters import fits_logits, like_logits
from musictx.decoding.hook import Grammar, HookInputs, HookSpec, ids_on_host
from musictx.decoding.option_fields import option
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

MAX_NOTES_AT_ONSET = 10  # one track's notes at one position: 23 of POP909's 682,571 train onsets have more


class RemiGuard(ReadsCursor, Grammar):
    """The grammar of a `MetricalTokenizer`'s ids; ``programs``: the seed's tracks (None: any may come, and
    tempo changes too: an unconditional sample). Where each sample stands (its last id, position, bar length
    and meter) is a `musictx.decoding.cursor.RemiCursor`: the run's shared one."""

    def __init__(self, tokenizer, programs: list[int] | None = None, cursor: RemiCursor | None = None):
        tok = tokenizer
        self.tok = tok
        self._read(tok, cursor)
        types = sorted(set(tok.type_of))
        self._type_index = {t: i for i, t in enumerate(types)}
        self.type_of = np.array([self._type_index[t] for t in tok.type_of])  # (V,) type index of each id
        self._types = self.type_of.tolist()  # the same, read per draw: a list's item costs less than an array's
        graph = tok.miditok.tokens_types_graph
        self.allowed = np.zeros((len(types), tok.vocab_size), dtype=bool)  # (n_types, V) next ids by last type
        for t, i in self._type_index.items():
            nxt = {n.split("_")[0] for n in graph.get(t, types)}
            self.allowed[i] = np.isin(tok.type_of, list(nxt))
        if "Chord" in self._type_index:  # chord events (musictx.io.chord_tokens): right after a Position
            self.allowed[self._type_index["Position"]] |= tok.type_of == "Chord"
            self.allowed[self._type_index["Chord"]] = np.isin(tok.type_of, ["Program", "Tempo", "Position", "Bar"])
        self.allowed[:, tok.pad_id] = False
        self.always_forbids = frozenset({tok.pad_id})  # nothing allows it again (`_something_left` only a Bar)
        self.allowed[:, tok.eos_id] = False  # a continuation runs the length asked for; the bars stop it
        self.position_of = tok.numbers_of("Position")  # (V,) position of a Position id, else -1
        if programs is not None:
            keep = {f"Program_{p}" for p in programs}
            self.forbidden_programs = np.array([t == "Program" and tok.id_to_token(i) not in keep
                                                for i, t in enumerate(tok.type_of)])
        else:
            self.forbidden_programs = np.zeros(tok.vocab_size, dtype=bool)
        self.position_ids = tok.ids_of_type("Position")
        self.timesig_ids = tok.ids_of_type("TimeSig")
        self.allowed[:, tok.ids_of_type("Tempo")] = programs is None  # a continuation keeps the seed's tempo
        program_of = self.cursor.program_of
        self.program_id = {int(program_of[i]): int(i) for i in np.flatnonzero(program_of >= 0)}  # track -> its id

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        # per row: {track: Pitch ids} struck at the current position (from the first new id on)
        self.struck: list[dict[int, list[int]]] = [{} for _ in range(prompt.shape[0])]
        self._by_place: dict[tuple[int, int, int, int], _Place] = {}  # the grammar's masks (`_place`)
        self._placed: list[_Place | None] = [None] * prompt.shape[0]  # each row's place until its next id
        self._barred: list[np.ndarray | None] = [None] * prompt.shape[0]  # each row's `_forbidden` until its next id

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        super().update(next_ids, done)
        self._placed = [None] * len(self._placed)  # `only_choice` and the draw's call then look each up once
        self._barred = [None] * len(self._barred)
        c = self.cursor
        positions, pitches = c.lists.position_of, c.lists.pitch_of
        for b, i in enumerate(ids_on_host(next_ids)):
            if i == c.bar_id or positions[i] >= 0:
                self.struck[b] = {}
            elif pitches[i] >= 0:
                self.struck[b].setdefault(int(c.program[b]), []).append(i)

    def only_choice(self) -> list[int] | None:
        """Each row's one id its grammar allows next (after a Bar, the seed's meter; after a Position in a
        one-track continuation, its Program), or None where some row has more."""
        out = []
        for b in range(len(self.struck)):
            kept = self._place(b)
            if kept.only < 0:
                return None
            bad = self._forbidden(b)
            if bad is not kept.mask and bad[kept.only]:  # this onset's notes forbid it: the guard's fallback
                return None
            out.append(kept.only)
        return out

    # ----- masks ------------------------------------------------------------------------------
    def _forbidden(self, b: int) -> np.ndarray:
        """(V,) bool, what row b may not draw next (the place's own mask where its onset adds nothing): made once
        between two ids, which `only_choice` and the draw both read."""
        if self._barred[b] is None:
            self._barred[b] = self._with_struck(b, self._place(b).mask)
        return self._barred[b]

    def _place(self, b: int) -> _Place:
        """The grammar's mask where row b stands: made once per place and kept (a run visits a few hundred)."""
        if self._placed[b] is not None:
            return self._placed[b]
        c = self.cursor
        last = int(c.last[b])
        place = (self._types[last] if last >= 0 else 0, int(c.pos[b]), int(c.bar_len[b]), int(c.meter[b]))
        kept = self._by_place.get(place)
        if kept is None:
            kept = self._by_place[place] = _Place(self._grammar(*place))
        self._placed[b] = kept
        return kept

    def _grammar(self, last_type: int, pos: int, bar_len: int, meter: int) -> np.ndarray:
        """(V,) bool, what the grammar forbids after an id of type ``last_type`` at position ``pos`` of a bar
        of ``bar_len`` positions in the meter ``meter`` (a TimeSig id, -1: none seen)."""
        bad = ~self.allowed[last_type] | self.forbidden_programs  # (V,)
        at = self.position_of[self.position_ids]
        bad[self.position_ids] |= (at <= pos) | (at >= bar_len)
        if meter >= 0 and self.forbidden_programs.any():  # a continuation: the seed's meter
            bad[self.timesig_ids] |= self.timesig_ids != meter
        return self._something_left(bad)

    def _with_struck(self, b: int, kept: np.ndarray) -> np.ndarray:
        """``kept`` and what this onset's notes so far forbid: a full track, a pitch its next note already
        struck (a copy where they add anything; ``kept`` itself where not)."""
        bad, last = kept, int(self.cursor.last[b])
        for track, pitch_ids in self.struck[b].items():  # track by track
            program_id = self.program_id.get(track)  # None: a track without a Program id of its own
            if program_id is None:
                continue
            full, next_note = len(pitch_ids) >= MAX_NOTES_AT_ONSET, last == program_id
            if (full or next_note) and bad is kept:
                bad = kept.copy()
            if full:  # the track is full here
                bad[program_id] = True
            if next_note:  # its next note: no pitch it already struck here
                bad[pitch_ids] = True
        return bad if bad is kept else self._something_left(bad)

    def _something_left(self, bad: np.ndarray) -> np.ndarray:
        if b"\x00" not in bad.tobytes():  # all forbidden (read as bytes: numpy's reduction is slow in the loop)
            # never leave nothing to draw: a new bar is always valid
            bad = np.ones_like(bad)
            bad[self.tok.bar_id] = False
        return bad

    def __call__(self, logits: Tensor) -> Tensor:
        """Logits (B, V) with the ids the grammar forbids at -inf (a new tensor)."""
        if logits.shape[0] == 1:  # batch 1: one add of the place's -inf row (an op costs more than its work here)
            kept, bad = self._place(0), self._forbidden(0)
            key = None if bad is kept.mask else bad.tobytes()  # None: the place's own row; else what the onset adds
            bias = kept.biases.get(key)
            if bias is None or not fits_logits(bias, logits):
                bias = kept.biases[key] = like_logits(_minus_inf_where(bad), logits)
            return logits + bias
        bad = torch.from_numpy(np.stack([self._forbidden(b) for b in range(logits.shape[0])]))  # (B, V)
        return logits.masked_fill(bad.to(logits.device), float("-inf"))


@dataclass
class _Place:
    """One place's grammar: ``mask`` (V,) bool, the ids forbidden there; ``biases``, -inf rows to add to a batch-1
    row of logits, each made when first asked: the mask's (key None), and the mask with what an onset's notes add
    (key: its bytes; an onset's few notes make few); ``only``, the one id allowed there (-1: several)."""

    mask: np.ndarray
    biases: dict[bytes | None, Tensor] = field(default_factory=dict)
    only: int = field(init=False)  # the one id allowed there; -1: more than one

    def __post_init__(self):
        allowed = np.flatnonzero(~self.mask)
        self.only = int(allowed[0]) if len(allowed) == 1 else -1


def _minus_inf_where(bad: np.ndarray) -> Tensor:
    """(V,) float: -inf where ``bad`` (V,) bool, else 0."""
    return torch.zeros(bad.shape).masked_fill_(torch.from_numpy(bad), float("-inf"))


@dataclass
class MetricalGuardOptions:
    enabled: bool = option(True, "keep the tokenizer's grammar (off only to study the raw network)")


def _make(inputs: HookInputs, o: MetricalGuardOptions) -> RemiGuard | None:
    if not o.enabled:
        return None
    return RemiGuard(inputs.tokenizer, programs=inputs.programs, cursor=shared_cursor(inputs))


SPEC = HookSpec("metrical_guard", MetricalGuardOptions, ("remi",), ("continue", "infill", "accompany"), _make,
                "the tokenizer's grammar: bars and positions in order, only the run's tracks")
