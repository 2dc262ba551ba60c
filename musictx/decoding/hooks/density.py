"""Density asked for, per track: how many notes a bar of the new music holds on the MELODY, BRIDGE and PIANO
tracks, as MIDI-GPT's density control and a musician's "busier" / "sparser" ask.

The sampler keeps, per sample and per asked track, the notes written since the new music began and the bars
it has covered (the bar being written counts by the share of its positions passed); a track's lean is
``strength`` logits per asked bar's worth of notes it is behind (negative when ahead). The control is
integral, so what a piece holds over its bars comes out near what was asked whatever the model's own habit:

- after a note's Duration (another note at this onset, or move on), the asked tracks' chances scale by e^lean,
  the other tracks keep theirs, and moving on takes up the difference, tilted toward later onsets (or the next
  bar) while a track is ahead and toward sooner ones while it is behind;
- after a Position (a note must come), the asked tracks share their own chance of playing it as they lean;
- before a Duration of an asked track, a track ahead holds its note longer, so a sparse part still sounds.

Which notes, and where in the bar, stay the model's choice; null leaves a track to the model. Measured asked
against got: docs/generation.md ("Controls a musician expects"). In an accompaniment the PIANO, where not asked,
is asked for as many notes as POP909's piano plays under a melody this busy (``typical``;
`musictx.tasks.accompany.Accompaniment.typical_density`). A hook of `musictx.decoding.sampling.generate` for REMI
ids with programs (the pop models), after the grammar guard: an id it forbade stays forbidden (its chance is 0,
whatever it is scaled by)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.cursor import ReadsCursor, RemiCursor, shared_cursor
from musictx.decoding.hook import HookInputs, HookSpec
from musictx.decoding.option_fields import option
from musictx.io.score_prep import ROLE_PROGRAMS
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

MOST = 6.0  # the largest lean either way, in logits: an asked density never forces a note the model rules out
LENGTH_TILT = 0.5  # logits per doubling of a note's length, per logit of its track's lean
TILT = 2.0  # logits per bar of distance, per logit of lean: how hard moving on leans to later (or sooner) onsets


class Density(ReadsCursor):
    """The lean of each asked track's Program toward its asked notes per bar (``targets``: program -> notes)."""

    def __init__(self, tokenizer, targets: dict[int, float], strength: float, cursor: RemiCursor | None = None):
        tok = tokenizer
        self._read(tok, cursor)
        self.programs = list(targets)
        self.targets = np.array([targets[p] for p in self.programs], dtype=float)  # (K,) notes per bar
        self.program_ids = [tok.miditok.vocab[f"Program_{p}"] for p in self.programs]  # (K,)
        self.strength = float(strength)
        self.beats_of = tok.duration_beats()  # (V,) a Duration id's length in beats, else nan
        self.note_may_start = (tok.numbers_of("Position") >= 0) | np.isfinite(self.beats_of)  # (V,)
        programs = tok.numbers_of("Program")  # (V,) the track a Program id opens, else -1
        self.other_programs = [int(i) for i in np.flatnonzero(programs >= 0) if int(i) not in self.program_ids]
        self.move_ids = [int(i) for i in np.flatnonzero(programs < 0)]  # moving on: any id that opens no note
        self.move_position = tok.numbers_of("Position")[self.move_ids]  # (M,) the place a Position id moves to
        self.move_is_bar = np.array(self.move_ids) == tok.bar_id  # (M,)
        self.is_velocity = np.zeros(tok.vocab_size, dtype=bool)  # (V,) a Duration comes next
        self.is_velocity[tok.ids_of_type("Velocity")] = True
        self.duration_ids = np.flatnonzero(np.isfinite(self.beats_of))  # (D,)
        self.log_beats = np.log2(self.beats_of[self.duration_ids])  # (D,) 0 for a beat, 1 for two

    def start(self, prompt: Tensor) -> None:
        super().start(prompt)
        self.written = np.zeros((len(self.cursor.last), len(self.programs)))  # (B, K) new notes per track

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        super().update(next_ids, done)
        c = self.cursor
        for b in np.flatnonzero(c.ended >= 0):  # a Duration just ended a note of row b
            if c.new_bar(b) >= 0 and c.program[b] in self.programs:
                self.written[b, self.programs.index(c.program[b])] += 1

    def bars_covered(self) -> np.ndarray:
        """(B,) the new bars each row has covered: whole bars since the prompt, and the share of this one."""
        c = self.cursor
        new = np.array([c.new_bar(b) for b in range(len(c.last))], dtype=float)
        return new + np.maximum(c.pos, 0) / np.maximum(c.bar_len, 1)

    def leans(self, rows: np.ndarray) -> np.ndarray:
        """(R, K) each asked track's lean in logits: ``strength`` per asked bar's worth of notes it is behind."""
        behind = self.bars_covered()[rows, None] - self.written[rows] / self.targets  # (R, K) in asked bars
        return np.clip(self.strength * behind, -MOST, MOST)

    def __call__(self, logits: Tensor) -> Tensor:
        logits = self._lengths(logits)
        c = self.cursor
        rows = np.flatnonzero((c.pos >= 0) & self.note_may_start[np.maximum(c.last, 0)])
        if not len(rows):
            return logits
        lean = torch.as_tensor(self.leans(rows), device=logits.device).float()
        sub = logits[rows.tolist()].float()  # (R, V)
        after_note = torch.as_tensor(np.isfinite(self.beats_of[c.last[rows]]), device=logits.device)  # (R,)
        ahead = (c.bar_len[rows] - c.pos[rows]) / np.maximum(c.bar_len[rows], 1)  # (R,) share of the bar left
        probs = torch.softmax(sub, dim=-1)  # (R, V) once, for both kinds of place
        made = torch.where(after_note.unsqueeze(-1), self._after_note(sub, probs, lean, rows, ahead),
                           self._after_position(sub, probs, lean))
        out = logits.clone()
        out[rows.tolist()] = made.to(logits.dtype)
        return out

    def _after_note(self, sub: Tensor, probs: Tensor, lean: Tensor, rows: np.ndarray, left: np.ndarray) -> Tensor:
        """After a note's Duration: another note at this onset, or move on. The asked tracks' chances scale by
        e^lean and the other tracks keep theirs, so a sparser PIANO is not a busier BRIDGE; moving on takes up
        the difference, and leans toward later onsets (or the next bar) where the asked tracks are ahead, toward
        sooner ones where they are behind: fewer or more onsets, not only thinner or fuller chords."""
        asked = probs[:, self.program_ids]  # (R, K)
        others = probs[:, self.other_programs].sum(-1)  # (R,)
        room = (1 - others - 1e-4).clamp_min(1e-6)  # (R,) what the asked tracks and moving on may share
        scaled = asked * lean.exp()
        scaled = scaled * (room / scaled.sum(-1).clamp_min(room)).unsqueeze(-1).clamp(max=1)  # fits in room
        move = probs[:, self.move_ids]  # (R, M)
        tilt = -TILT * lean.min(-1, keepdim=True).values * self._distance(rows, left)  # (R, M): ahead -> later
        tilted = move * tilt.exp()
        tilted = tilted * ((room - scaled.sum(-1)).clamp_min(1e-9) / tilted.sum(-1).clamp_min(1e-12)).unsqueeze(-1)
        out = sub.clone()
        out[:, self.program_ids] += scaled.clamp_min(1e-12).log() - asked.clamp_min(1e-12).log()
        out[:, self.move_ids] += tilted.clamp_min(1e-30).log() - move.clamp_min(1e-30).log()
        return out

    def _distance(self, rows: np.ndarray, left: np.ndarray) -> Tensor:
        """(R, M) how far each moving-on id goes, in bars: a Position to its place, the Bar id to the bar's end
        (the share ``left``), any other id nowhere."""
        c = self.cursor
        pos = self.move_position[None, :] - c.pos[rows, None]  # (R, M)
        dist = np.where(self.move_position[None, :] >= 0, np.maximum(pos, 0) / np.maximum(c.bar_len[rows, None], 1), 0)
        dist = np.where(self.move_is_bar[None, :], left[:, None], dist)
        return torch.as_tensor(dist, dtype=torch.float32)

    def _lengths(self, logits: Tensor) -> Tensor:
        """Before a Duration of an asked track: a track ahead of its ask holds its notes longer (and one behind,
        shorter), so that a sparser part still sounds through its bars instead of leaving silences."""
        c = self.cursor
        rows = np.flatnonzero(self.is_velocity[np.maximum(c.last, 0)] & np.isin(c.program, self.programs))
        if not len(rows):
            return logits
        k = np.array([self.programs.index(int(p)) for p in c.program[rows]])
        lean = self.leans(rows)[np.arange(len(rows)), k]  # (R,) the lean of each row's own track
        out = logits.clone()
        change = -LENGTH_TILT * lean[:, None] * self.log_beats[None, :]  # (R, D)
        out[np.ix_(rows, self.duration_ids)] += torch.as_tensor(change, dtype=logits.dtype, device=logits.device)
        return out

    def _after_position(self, sub: Tensor, probs: Tensor, lean: Tensor) -> Tensor:
        """After a Position a note must come: the asked tracks share their own chance of playing it as asked,
        and the other tracks keep theirs."""
        asked = probs[:, self.program_ids]  # (R, K)
        shared = asked * lean.exp()
        shared = shared * (asked.sum(-1, keepdim=True) / shared.sum(-1, keepdim=True).clamp_min(1e-12))
        out = sub.clone()
        out[:, self.program_ids] += shared.clamp_min(1e-12).log() - asked.clamp_min(1e-12).log()
        return out


_ASK = "notes per bar asked on the {} track of the new music; null: as the model writes it"


@dataclass
class DensityOptions:
    melody: float | None = option(None, _ASK.format("MELODY"), above=0)
    bridge: float | None = option(None, _ASK.format("BRIDGE"), above=0)
    piano: float | None = option(None, _ASK.format("PIANO"), above=0)
    strength: float = option(3.0, "logits per bar's worth of notes a track is behind (or ahead of) what was asked",
                             low=0, off="0")
    typical: bool = option(True, "an accompaniment's PIANO, where not asked, plays as many notes as POP909's piano "
                                 "under a melody this busy (docs/infill.md); false: as the model writes it")


def asked(o: DensityOptions) -> dict[int, float]:
    """{internal program: notes per bar} of the tracks asked."""
    return {ROLE_PROGRAMS[f.name.upper()]: float(getattr(o, f.name)) for f in fields(o)
            if f.name.upper() in ROLE_PROGRAMS and getattr(o, f.name) is not None}


def _make(inputs: HookInputs, o: DensityOptions) -> Density | None:
    targets, acc = asked(o), inputs.accompaniment
    if acc is not None:  # an accompaniment: the given tracks are not the sampler's; the typical PIANO unless asked
        targets = {**(acc.typical_density() if o.typical else {}), **targets}
        targets = {p: n for p, n in targets.items() if p not in acc.given}
    targets = {p: n for p, n in targets.items() if p in inputs.programs}
    if not o.strength or not targets:
        return None
    return Density(inputs.tokenizer, targets, o.strength, cursor=shared_cursor(inputs))


SPEC = HookSpec("density", DensityOptions, ("remi",), ("continue", "accompany"), _make,
                "notes per bar asked per track (MELODY, BRIDGE, PIANO); an accompaniment's PIANO as busy as POP909's")


def parse_density(text: str | None) -> dict[str, float]:
    """``hooks.density``'s fields from a line a musician types (``"PIANO=8, MELODY=4"``: notes per bar by track);
    GenerateError naming what is wrong."""
    from musictx.decoding.errors import GenerateError

    asked: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, sep, value = part.partition("=")
        track = name.strip().lower()
        if not sep or track not in ("melody", "bridge", "piano"):
            raise GenerateError(f"density {part!r}: give TRACK=NOTES per bar for MELODY, BRIDGE or PIANO, "
                                "e.g. PIANO=8, MELODY=4")
        try:
            asked[track] = float(value)
        except ValueError:
            raise GenerateError(f"density {part!r}: {value.strip()!r} is not a number of notes per bar") from None
        if not 0 < asked[track] <= 128:
            raise GenerateError(f"density {part!r}: notes per bar must be above 0 and at most 128")
    return asked
