"""The metrical tokenizer's own grammar as a sampling guard: the sampler only draws what makes a valid bar.

REMI's grammar is MidiTok's ``tokens_types_graph`` (after a Pitch comes a Velocity, then a Duration, then
a Position, Program or Bar ...). On top of it, three rules no token type can say:

- positions only move forward within a bar, and stay inside the bar (a 4/4 bar of 16th notes has 16);
- a continuation plays the seed's tracks: Program ids outside the seed's programs are never drawn, so no
  instrument appears that the user did not give (an unconditional sample may use any);
- the seed's meter and tempo go on: after a Bar only the seed's last TimeSig id may come, and no Tempo id
  (the output is written on the seed's own tempo map).

Repetition control, the other rule on bars, is its own hook (`musictx.generation.bar_repeats`). A sampling
hook (`musictx.generation.hooks`); the state is numpy, one row per sample.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from musictx.generation.hooks import HookInputs, HookSpec, LogitsHook


class RemiGuard(LogitsHook):
    """The grammar of a `MetricalTokenizer`'s ids; ``programs``: the seed's tracks (None: any may come, and
    tempo changes too: an unconditional sample)."""

    def __init__(self, tokenizer, programs: list[int] | None = None):
        tok = tokenizer
        self.tok = tok
        types = sorted(set(tok.type_of))
        self._type_index = {t: i for i, t in enumerate(types)}
        self.type_of = np.array([self._type_index[t] for t in tok.type_of])  # (V,) type index of each id
        graph = tok.miditok.tokens_types_graph
        self.allowed = np.zeros((len(types), tok.vocab_size), dtype=bool)  # (n_types, V) next ids by last type
        for t, i in self._type_index.items():
            nxt = {n.split("_")[0] for n in graph.get(t, types)}
            self.allowed[i] = np.isin(tok.type_of, list(nxt))
        self.allowed[:, tok.pad_id] = False
        self.allowed[:, tok.eos_id] = False  # a continuation runs the length asked for; the bars stop it
        self.position_of = tok.numbers_of("Position")  # (V,) position of a Position id, else -1
        self.bar_positions = np.zeros(tok.vocab_size, dtype=np.int64)  # (V,) positions per bar of a TimeSig id
        per_beat = tok.miditok.config.max_num_pos_per_beat
        for i in tok.ids_of_type("TimeSig"):
            num = int(tok.id_to_token(int(i)).split("_")[1].split("/")[0])
            self.bar_positions[i] = num * per_beat  # MidiTok counts positions per beat of the denominator
        if programs is not None:
            keep = {f"Program_{p}" for p in programs}
            self.forbidden_programs = np.array([t == "Program" and tok.id_to_token(i) not in keep
                                                for i, t in enumerate(tok.type_of)])
        else:
            self.forbidden_programs = np.zeros(tok.vocab_size, dtype=bool)
        self.position_ids = tok.ids_of_type("Position")
        self.timesig_ids = tok.ids_of_type("TimeSig")
        self.allowed[:, tok.ids_of_type("Tempo")] = programs is None  # a continuation keeps the seed's tempo

    # ----- state ------------------------------------------------------------------------------
    def start(self, prompt: Tensor) -> None:
        rows = prompt.cpu().numpy()
        B = len(rows)
        self.last_type = np.zeros(B, dtype=np.int64)
        self.pos = np.full(B, -1)
        self.bar_len = np.full(B, 16)
        self.meter = np.full(B, -1)  # (B,) the seed's last TimeSig id, -1: none seen (any may come)
        for b, row in enumerate(rows):
            for i in row:
                self._follow(b, int(i))

    def _follow(self, b: int, i: int) -> None:
        t = self.tok.type_of[i]
        self.last_type[b] = self.type_of[i]
        if t == "Bar":
            self.pos[b] = -1
        elif t == "Position":
            self.pos[b] = self.position_of[i]
        elif t == "TimeSig":
            self.bar_len[b] = max(int(self.bar_positions[i]), 1)
            self.meter[b] = i

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        for b, i in enumerate(next_ids.tolist()):
            self._follow(b, int(i))

    # ----- masks ------------------------------------------------------------------------------
    def _forbidden(self, b: int) -> np.ndarray:
        bad = ~self.allowed[self.last_type[b]] | self.forbidden_programs  # (V,)
        pos = self.position_of[self.position_ids]
        bad[self.position_ids] |= (pos <= self.pos[b]) | (pos >= self.bar_len[b])
        if self.meter[b] >= 0 and self.forbidden_programs.any():  # a continuation: the seed's meter
            bad[self.timesig_ids] |= self.timesig_ids != self.meter[b]
        if bad.all():  # never leave nothing to draw: a new bar is always valid
            bad[:] = True
            bad[self.tok.bar_id] = False
        return bad

    def __call__(self, logits: Tensor) -> Tensor:
        """Logits (B, V) with the ids the grammar forbids at -inf (a new tensor)."""
        bad = np.stack([self._forbidden(b) for b in range(logits.shape[0])])  # (B, V)
        return logits.masked_fill(torch.from_numpy(bad).to(logits.device), float("-inf"))


def _make(inputs: HookInputs) -> RemiGuard | None:
    return RemiGuard(inputs.tokenizer, programs=inputs.programs) if inputs.sampling.guard else None


SPEC = HookSpec("metrical_guard", ("guard",), ("remi",), ("continue", "infill", "accompany"), 20, _make,
                "the tokenizer's grammar: bars and positions in order, only the run's tracks")
