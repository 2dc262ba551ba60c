"""One shared, incremental view of each sample's REMI stream: where it stands (bar, position, track, the note
being written) and what its bars hold so far. The metrical hooks read it; none replays the prompt itself.

`build_hooks` makes the cursor when a hook asks for it (`shared_cursor`) and runs it first, so that each
step it has followed the id just drawn before any other hook looks. It is a hook that never touches the
logits: it follows the prompt once in `start` and each drawn id in `update`, in numpy and plain lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from musictx.decoding.hook import HookInputs, LogitsHook, ids_on_host

if TYPE_CHECKING:
    from torch import Tensor


@dataclass
class Bar:
    """One bar of a sample: its ids after the Bar id, and its notes as they were struck."""

    ids: list[int] = field(default_factory=list)
    # [position (-1: before the bar's first Position), program, pitch, length in beats (nan until its Duration)]
    notes: list[list] = field(default_factory=list)

    def at(self, pos: int) -> list[tuple[int, int]]:
        """(program, pitch) of the notes struck at position ``pos``; none before the bar's first Position."""
        return [(n[1], n[2]) for n in self.notes if n[0] == pos] if pos >= 0 else []

    def by_position(self) -> dict[int, list[tuple[int, int]]]:
        """position -> [(program, pitch)] of the notes struck at a Position (those before one are left out)."""
        out: dict[int, list[tuple[int, int]]] = {}
        for pos, program, pitch, _ in self.notes:
            if pos >= 0:
                out.setdefault(int(pos), []).append((int(program), int(pitch)))
        return out

    def ended_notes(self) -> list[tuple[int, int, int, float]]:
        """(position, program, pitch, beats) of the notes whose Duration came; a note before the bar's first
        Position counts at its start (position 0)."""
        return [(max(int(n[0]), 0), int(n[1]), int(n[2]), float(n[3])) for n in self.notes if np.isfinite(n[3])]


class IdTables(NamedTuple):
    """Per id (lists of V): the position a Position id sets, the track a Program id opens, a Pitch id's pitch (else
    -1 each); a Duration id's beats (else nan), whether it has them; whether the id is a TimeSig."""

    position_of: list[int]
    program_of: list[int]
    pitch_of: list[int]
    beats_of: list[float]
    has_beats: list[bool]
    is_timesig: list[bool]


class RemiCursor(LogitsHook):
    """Per sample (row): the last id, the current Position, track (Program number), the pitch of the note being
    written (until its Duration), the pitch a Duration just ended, the bar's length in positions and the
    meter (the last TimeSig id); the ids before the first Bar, and every bar since (`Bar`)."""

    def __init__(self, tokenizer):
        tok = tokenizer
        self.bar_id = tok.bar_id
        self.position_of = tok.numbers_of("Position")  # (V,) the position a Position id sets, else -1
        self.program_of = tok.numbers_of("Program")  # (V,) the track a Program id opens, else -1 (drums too)
        self.pitch_of = tok.numbers_of("Pitch")  # (V,) the pitch of a Pitch id, else -1
        self.beats_of = tok.duration_beats()  # (V,) a Duration id's length in beats, else nan
        self.bar_positions = np.zeros(tok.vocab_size, dtype=np.int64)  # (V,) positions per bar of a TimeSig id
        self.is_timesig = np.zeros(tok.vocab_size, dtype=bool)  # (V,)
        self.is_timesig[tok.ids_of_type("TimeSig")] = True
        per_beat = tok.miditok.config.max_num_pos_per_beat
        for i in tok.ids_of_type("TimeSig"):
            num = int(tok.id_to_token(int(i)).split("_")[1].split("/")[0])
            self.bar_positions[i] = num * per_beat  # MidiTok counts positions per beat of the denominator
        # the same tables as lists, for what reads them at every id (`_follow`, the hooks' updates): in the decoding
        # loop a list's item costs a fraction of a numpy scalar's read and compare
        self.lists = IdTables(self.position_of.tolist(), self.program_of.tolist(), self.pitch_of.tolist(),
                              self.beats_of.tolist(), np.isfinite(self.beats_of).tolist(), self.is_timesig.tolist())

    def start(self, prompt: Tensor) -> None:
        rows = prompt.cpu().numpy()
        B = len(rows)
        self.last = np.full(B, -1)  # the last id, -1 before any
        self.pos = np.full(B, -1)  # the current Position, -1 before the bar's first
        self.program = np.full(B, -1)  # the track of the note being written
        self.pitch = np.full(B, -1)  # the pitch of the note being written, until its Duration
        self.ended = np.full(B, -1)  # the pitch the last id (a Duration) ended, else -1
        self.bar_len = np.full(B, 16)  # positions in the bar (from the last TimeSig)
        self.meter = np.full(B, -1)  # the last TimeSig id, -1: none seen
        self.preamble: list[list[int]] = [[] for _ in range(B)]  # ids before the first Bar
        self.bars: list[list[Bar]] = [[] for _ in range(B)]
        for b, row in enumerate(rows):
            for i in row.tolist():
                self._follow(b, i)
        # the prompt of a continuation ends on the Bar id that opens the first new bar
        self.prompt_bars = np.array([len(bars) for bars in self.bars])  # (B,)

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        for b, i in enumerate(ids_on_host(next_ids)):  # Python ints
            self._follow(b, i)

    def _follow(self, b: int, i: int) -> None:
        self.last[b], self.ended[b] = i, -1
        if i == self.bar_id:
            self.bars[b].append(Bar())
            self.pos[b] = -1
            return
        bars = self.bars[b]
        (bars[-1].ids if bars else self.preamble[b]).append(i)
        position_of, program_of, pitch_of, beats_of, has_beats, is_timesig = self.lists
        if position_of[i] >= 0:
            self.pos[b] = position_of[i]
        elif program_of[i] >= 0:
            self.program[b] = program_of[i]
        elif pitch_of[i] >= 0:
            self.pitch[b] = pitch_of[i]
            if bars:
                bars[-1].notes.append([int(self.pos[b]), int(self.program[b]), int(self.pitch[b]), np.nan])
        elif has_beats[i] and self.pitch[b] >= 0:
            if bars and bars[-1].notes:
                bars[-1].notes[-1][3] = beats_of[i]
            self.ended[b], self.pitch[b] = self.pitch[b], -1
        elif is_timesig[i]:
            self.bar_len[b], self.meter[b] = max(int(self.bar_positions[i]), 1), i

    # ----- views ------------------------------------------------------------------------------
    def new_bar(self, b: int) -> int:
        """The index of the new bar row b is in (0: the bar the prompt opened)."""
        return len(self.bars[b]) - int(self.prompt_bars[b])

    def recent_bar_ids(self, b: int, n: int) -> list[list[int]]:
        """The ids of row b's last ``n`` bars, the one being written last; the ids before the first Bar count
        as a bar."""
        bars = self.bars[b][-n:]
        head = [self.preamble[b]] if len(bars) < n else []
        return (head + [bar.ids for bar in bars])[-n:]


def shared_cursor(inputs: HookInputs) -> RemiCursor:
    """The run's one cursor: made by the first hook that asks; `build_hooks` then runs it before them all."""
    if inputs.cursor is None:
        inputs.cursor = RemiCursor(inputs.tokenizer)
    return inputs.cursor


class ReadsCursor(LogitsHook):
    """A hook that reads a `RemiCursor`: the run's shared one, or, made alone (a test, a notebook), its own,
    which it then starts and updates itself. Subclasses call ``super().start`` / ``super().update`` first."""

    def _read(self, tokenizer, cursor: RemiCursor | None) -> None:
        self.cursor = cursor if cursor is not None else RemiCursor(tokenizer)
        self._own_cursor = cursor is None

    def start(self, prompt: Tensor) -> None:
        if self._own_cursor:
            self.cursor.start(prompt)

    def update(self, next_ids: Tensor, done: Tensor | None = None) -> None:
        if self._own_cursor:
            self.cursor.update(next_ids, done)
