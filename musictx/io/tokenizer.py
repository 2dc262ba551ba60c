"""The Performance event encoding of Oore et al. / Huang et al. (2018). Imports no torch.

Words, as in MidiTok: an *event* is (type, value); a *token* its string (``NOTE_ON_60``); an *id* an int.

Id layout with the default config (388 events + 2 specials = 390 ids)::

    0   .. 127   NOTE_ON   pitch 0..127           (pitch_min..pitch_max in general)
    128 .. 255   NOTE_OFF  pitch 0..127
    256 .. 355   TIME_SHIFT 1..100 steps of 10 ms  (10 ms .. 1 s)
    356 .. 387   VELOCITY  bin 1..32, bin = (v - 1) // 4 + 1
    388          PAD
    389          EOS

A VELOCITY event precedes a NOTE_ON only when the bin changes. Silences longer than the largest shift
are written as several TIME_SHIFT events. Encoding normalises notes first (see `quantize_notes`), so
``decode(encode(m))`` equals ``quantize_notes(m)`` exactly and ``encode(decode(ids)) == ids``.

With ``pedal_events`` (and ``sustain: false``) the notes keep their key lengths and the sustain pedal's
changes are two more ids after EOS, PEDAL_DOWN and PEDAL_UP (`musictx.io.pedal_ids`); at one instant a
NOTE_OFF comes first, then the pedal, then a NOTE_ON. `decode_notes` (and `decode`) give the notes as they
sound, the pedal applied, so there ``encode(decode(ids))`` folds the pedal into the note lengths.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, fields

import numpy as np

from musictx.io.id_checks import id_row
from musictx.io.jsonio import read_json_object
from musictx.io.midi_io import PEDAL_EVENTS, MidiReadError, Notes, notes_from_pretty_midi, read_notes
from musictx.io.midi_write import notes_to_midi
from musictx.io.pedal_ids import grid_changes, pedal_steps, sounding

FORMAT_VERSION = 1


class TokenizerMismatchError(ValueError):
    """Data or a checkpoint was made with another tokenizer config."""


def check_types(options, prefix: str = "") -> None:
    """ValueError naming the first field of the dataclass ``options`` whose value is not of its declared kind: a
    bool field takes true or false only (YAML's ``no`` reaches here as the string "no", which Python counts as true),
    an int field a whole number, a float field a number."""
    wanted = {"bool": (lambda v: isinstance(v, bool), "true or false"),
              "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
              "float": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number")}
    for f in fields(options):
        test, words = wanted.get(str(f.type), (None, ""))
        if test is not None and not test(value := getattr(options, f.name)):
            raise ValueError(f"{prefix}{f.name} must be {words}, got {value!r}")


@dataclass(frozen=True)
class TokenizerConfig:
    """Everything that defines the vocabulary and the quantisation."""

    time_step: float = 0.01  # seconds per TIME_SHIFT step
    max_shift_steps: int = 100  # largest single TIME_SHIFT, in steps
    velocity_bins: int = 32
    pitch_min: int = 0
    pitch_max: int = 127
    sustain: bool = True  # apply CC64 to note ends before encoding
    drop_drums: bool = True
    pedal_events: bool = False  # CC64 as PEDAL_DOWN / PEDAL_UP ids over key lengths (with sustain: false)

    def __post_init__(self):
        check_types(self, "tokenizer.")
        if not (0 <= self.pitch_min <= self.pitch_max <= 127):
            raise ValueError(f"pitch range must satisfy 0 <= pitch_min <= pitch_max <= 127, got "
                             f"{self.pitch_min}..{self.pitch_max}")
        if not (1 <= self.velocity_bins <= 127):
            raise ValueError(f"velocity_bins must be in 1..127, got {self.velocity_bins}")
        if self.max_shift_steps < 1 or self.time_step <= 0:
            raise ValueError("max_shift_steps must be >= 1 and time_step > 0")
        if self.pedal_events and self.sustain:
            raise ValueError("pedal_events writes the pedal as ids over the notes' key lengths: set sustain: false "
                             "too (sustain: true folds it into the note lengths)")

    @property
    def velocity_bin_size(self) -> int:
        return math.ceil(127 / self.velocity_bins)

    def velocity_bin(self, velocity):
        """The bin (1-based) of a MIDI velocity, or of each of an array of them."""
        return np.clip((velocity - 1) // self.velocity_bin_size + 1, 1, self.velocity_bins)

    @property
    def default_velocity_bin(self) -> int:
        """The bin of a piece's notes until its first VELOCITY event: mezzo-forte (64)."""
        return int(self.velocity_bin(64))

    def bin_velocity(self, vbin: np.ndarray) -> np.ndarray:
        """The MIDI velocity each bin (1-based) decodes to: its softest."""
        return np.minimum(1 + (vbin - 1) * self.velocity_bin_size, 127)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TokenizerConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown tokenizer config keys: {sorted(unknown)}")
        return cls(**d)


@dataclass(frozen=True)
class Layout:
    """First id of each event family, derived from a config."""

    note_on: int
    note_off: int
    time_shift: int
    velocity: int
    pad: int
    eos: int
    vocab_size: int
    pedal: int | None = None  # PEDAL_DOWN's id (PEDAL_UP's is the next), after EOS; None without pedal_events

    @staticmethod
    def of(cfg: TokenizerConfig) -> Layout:
        n_pitch = cfg.pitch_max - cfg.pitch_min + 1
        shift = 2 * n_pitch
        vel = shift + cfg.max_shift_steps
        pad = vel + cfg.velocity_bins
        if cfg.pedal_events:  # after the specials, so that a model without them grows by two rows
            return Layout(0, n_pitch, shift, vel, pad, pad + 1, pad + 4, pad + 2)
        return Layout(0, n_pitch, shift, vel, pad, pad + 1, pad + 2)


class EventTokenizer:
    """MIDI <-> Performance-event ids. ``encode`` takes a path or a ``pretty_midi.PrettyMIDI``."""

    kind = "performance"

    def __init__(self, config: TokenizerConfig | dict | None = None):
        if isinstance(config, dict):
            config = TokenizerConfig.from_dict(config)
        self.config = config or TokenizerConfig()
        self.layout = Layout.of(self.config)

    # ----- vocabulary -------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.layout.vocab_size

    @property
    def pad_id(self) -> int:
        return self.layout.pad

    @property
    def eos_id(self) -> int:
        return self.layout.eos

    def id_to_token(self, i: int) -> str:
        c, lay = self.config, self.layout
        if not 0 <= i < lay.vocab_size:
            raise ValueError(f"id {i} outside the vocabulary of size {lay.vocab_size}")
        if i < lay.note_off:
            return f"NOTE_ON_{i - lay.note_on + c.pitch_min}"
        if i < lay.time_shift:
            return f"NOTE_OFF_{i - lay.note_off + c.pitch_min}"
        if i < lay.velocity:
            return f"TIME_SHIFT_{i - lay.time_shift + 1}"
        if i < lay.pad:
            return f"VELOCITY_{i - lay.velocity + 1}"
        if lay.pedal is not None and i >= lay.pedal:
            return "PEDAL_DOWN" if i == lay.pedal else "PEDAL_UP"
        return "PAD" if i == lay.pad else "EOS"

    def velocity_ids(self) -> np.ndarray:
        """The VELOCITY events' ids, softest first."""
        return np.arange(self.layout.velocity, self.layout.pad)

    # ----- encoding ---------------------------------------------------------------------------
    def read(self, midi, reader: str = "symusic") -> Notes:
        """Notes of a path (read with ``reader``) or of a PrettyMIDI, sustain (or the pedal's events) and drums
        handled."""
        c = self.config
        sustain = PEDAL_EVENTS if c.pedal_events else c.sustain
        if isinstance(midi, (str, os.PathLike)):
            return read_notes(midi, reader=reader, drop_drums=c.drop_drums, sustain=sustain)
        if hasattr(midi, "instruments"):
            return notes_from_pretty_midi(midi, drop_drums=c.drop_drums, sustain=sustain)
        raise TypeError(f"encode() takes a path or a pretty_midi.PrettyMIDI, not {type(midi).__name__}")

    def encode(self, midi, reader: str = "symusic") -> np.ndarray:
        """Ids (int64) of a MIDI path or PrettyMIDI. Raises MidiReadError for unusable files."""
        notes = self.read(midi, reader=reader)
        ids = self.encode_notes(notes)
        if len(ids) == 0:
            path = str(midi) if isinstance(midi, (str, os.PathLike)) else None
            raise MidiReadError(path, "no notes inside the tokenizer's pitch range")
        return ids

    def quantize_notes(self, notes: Notes) -> Notes:
        """The exact notes that ``decode(encode(.))`` gives back (times on the grid, velocity binned; with
        ``pedal_events``, the pedal on its grid applied)."""
        on, off, pitch, vbin = self._canonical(notes)
        keys = self._notes_from_steps(on, off, pitch, vbin)
        if not self.config.pedal_events:
            return keys
        return self._sounding(keys, *pedal_steps(notes.pedal, self.config.time_step))

    def _sounding(self, keys: Notes, steps: np.ndarray, down: np.ndarray) -> Notes:
        """Notes on the grid as they sound with the pedal changes (steps, down): held on, then re-struck
        pitches cut as encoding does."""
        if not len(steps):
            return keys
        return self._notes_from_steps(*self._canonical(sounding(keys, steps, down, self.config.time_step)))

    def _canonical(self, notes: Notes):
        """Quantise and normalise: one note per (pitch, onset), same-pitch notes never overlap."""
        c = self.config
        keep = (notes.pitch >= c.pitch_min) & (notes.pitch <= c.pitch_max) & (notes.velocity > 0)
        on = np.floor(notes.start[keep] / c.time_step + 0.5).astype(np.int64)
        off = np.floor(notes.end[keep] / c.time_step + 0.5).astype(np.int64)
        on = np.maximum(on, 0)
        off = np.maximum(off, on + 1)  # a note lasts at least one step
        pitch = notes.pitch[keep].astype(np.int64)
        vbin = c.velocity_bin(notes.velocity[keep])
        order = np.lexsort((off, on, pitch))
        on, off, pitch, vbin = on[order], off[order], pitch[order], vbin[order]
        # Of notes struck together on one pitch keep the longest (the last after sorting by off).
        last_of_group = np.ones(len(on), dtype=bool)
        last_of_group[:-1] = (pitch[1:] != pitch[:-1]) | (on[1:] != on[:-1])
        on, off, pitch, vbin = on[last_of_group], off[last_of_group], pitch[last_of_group], vbin[last_of_group]
        # A re-struck pitch ends the note that was still sounding (as the decoder reads it).
        same_next = np.zeros(len(on), dtype=bool)
        same_next[:-1] = pitch[1:] == pitch[:-1]
        next_on = np.concatenate([on[1:], [0]])
        off = np.where(same_next, np.minimum(off, next_on), off)
        return on, off, pitch, vbin

    def encode_notes(self, notes: Notes) -> np.ndarray:
        """Vectorised encoding of a note array (no Python loop per event)."""
        on, off, pitch, vbin = self._canonical(notes)
        lay, c = self.layout, self.config
        n = len(on)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        times = np.concatenate([off, on])
        rank = np.concatenate([np.zeros(n, np.int64), np.full(n, 2)])  # NOTE_OFF 0, the pedal 1, NOTE_ON 2
        event_ids = np.concatenate([lay.note_off + pitch, lay.note_on + pitch]) - c.pitch_min
        bins = np.concatenate([np.zeros(n, np.int64), vbin])
        if c.pedal_events:
            steps, down = pedal_steps(notes.pedal, c.time_step)
            times, event_ids = np.concatenate([times, steps]), np.concatenate([event_ids, lay.pedal + ~down])
            rank = np.concatenate([rank, np.ones(len(steps), np.int64)])
            bins = np.concatenate([bins, np.zeros(len(steps), np.int64)])  # the pedal carries no velocity
        # At one instant: offs before ons (so a re-strike reads off-then-on), the pedal between, then by pitch.
        order = np.lexsort((event_ids, rank, times))
        times, event_ids, bins = times[order], event_ids[order], bins[order]
        is_on = rank[order] == 2
        # A VELOCITY event only where the bin differs from the previous NOTE_ON's.
        on_bins = bins[is_on]
        change = np.concatenate([[True], on_bins[1:] != on_bins[:-1]])
        need_vel = np.zeros(len(times), bool)
        need_vel[np.flatnonzero(is_on)[change]] = True
        vel_ids = lay.velocity + bins - 1
        return self.with_time_shifts(times, event_ids, need_vel, vel_ids)

    def with_time_shifts(self, times, event_ids, need_vel=None, vel_ids=None) -> np.ndarray:
        """Ids of events at integer ``times`` (steps, non-decreasing): TIME_SHIFT runs are written
        before each event id, and a VELOCITY id too where ``need_vel`` is set."""
        lay, max_shift = self.layout, self.config.max_shift_steps
        n = len(times)
        if need_vel is None:
            need_vel = np.zeros(n, bool)
        delta = np.diff(times, prepend=0)
        n_shift = -(-delta // max_shift)  # ceil
        counts = n_shift + need_vel + 1
        ends = np.cumsum(counts)
        out = np.full(int(ends[-1]) if n else 0, lay.time_shift + max_shift - 1, dtype=np.int64)
        out[ends - 1] = event_ids
        if need_vel.any():
            out[ends[need_vel] - 2] = vel_ids[need_vel]
        has_shift = n_shift > 0
        last_shift_pos = (ends - counts + n_shift - 1)[has_shift]
        remainder = delta[has_shift] - (n_shift[has_shift] - 1) * max_shift
        out[last_shift_pos] = lay.time_shift + remainder - 1
        return out

    def shift_steps(self, ids) -> np.ndarray:
        """Time steps each id moves the clock forward: 1..max_shift_steps for a TIME_SHIFT, 0 otherwise."""
        ids = np.asarray(ids, dtype=np.int64)
        lay = self.layout
        is_shift = (ids >= lay.time_shift) & (ids < lay.velocity)
        return np.where(is_shift, ids - lay.time_shift + 1, 0)

    def split_time_shifts(self, ids) -> tuple[np.ndarray, np.ndarray, int]:
        """Inverse of ``with_time_shifts``: (step of each non-shift id, the non-shift ids, final step)."""
        ids = np.asarray(ids, dtype=np.int64)
        shift = self.shift_steps(ids)
        steps = np.cumsum(shift)
        total = int(steps[-1]) if len(ids) else 0
        return steps[shift == 0], ids[shift == 0], total

    # ----- decoding ---------------------------------------------------------------------------
    def decode_notes(self, ids) -> Notes:
        """Notes of any id sequence: stray NOTE_OFFs ignored, re-strikes end the open note, notes
        still open at the end closed there, PAD skipped, EOS ends the sequence."""
        lay, c = self.layout, self.config
        step, vbin, open_notes, pedal = 0, None, {}, []
        rows = []  # (on_step, off_step, pitch, bin)
        default_bin = c.default_velocity_bin  # until a VELOCITY event arrives
        for i in self._checked_ids(ids).tolist():
            if i == lay.eos:
                break
            if i < lay.note_off:  # NOTE_ON
                pitch = i - lay.note_on + c.pitch_min
                self._close(open_notes, pitch, step, rows)
                open_notes[pitch] = (step, vbin or default_bin)
            elif i < lay.time_shift:  # NOTE_OFF
                self._close(open_notes, i - lay.note_off + c.pitch_min, step, rows)
            elif i < lay.velocity:
                step += i - lay.time_shift + 1
            elif i < lay.pad:
                vbin = i - lay.velocity + 1
            elif lay.pedal is not None and i >= lay.pedal:
                pedal.append((step, i == lay.pedal))
        for pitch in list(open_notes):
            start, _ = open_notes[pitch]
            self._close(open_notes, pitch, max(step, start + 1), rows)
        if not rows:
            return Notes.empty()
        arr = np.array(sorted(rows), dtype=np.int64)
        keys = self._notes_from_steps(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3])
        if not pedal:
            return keys
        changes = np.array(pedal, dtype=np.int64).reshape(-1, 2)  # (step, down) as the ids came
        return self._sounding(keys, *grid_changes(changes[:, 0], changes[:, 1] > 0))

    def _checked_ids(self, ids) -> np.ndarray:
        """The ids up to the first EOS (included), after checking each is in the vocabulary: a negative
        id would otherwise read as a NOTE_ON of a negative pitch. One sequence only (`id_row`)."""
        arr = id_row(ids)
        eos = np.flatnonzero(arr == self.layout.eos)
        return id_row(arr[: eos[0] + 1] if len(eos) else arr, self.layout.vocab_size)

    @staticmethod
    def _close(open_notes: dict, pitch: int, step: int, rows: list) -> None:
        if pitch in open_notes:
            start, vbin = open_notes.pop(pitch)
            if step > start:  # a zero-length note carries nothing: drop it
                rows.append((start, step, pitch, vbin))

    def _notes_from_steps(self, on, off, pitch, vbin) -> Notes:
        c = self.config
        order = np.lexsort((pitch, on))
        return Notes(on[order] * c.time_step, off[order] * c.time_step, pitch[order], c.bin_velocity(vbin[order]))

    def decode(self, ids, program: int = 0):
        """A ``pretty_midi.PrettyMIDI`` with one piano track holding the decoded notes
        (`musictx.io.midi_write.notes_to_midi`)."""
        return notes_to_midi(self.decode_notes(ids), program)

    # ----- persistence ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"kind": "performance", "format_version": FORMAT_VERSION, "vocab_size": self.vocab_size,
                "config": self.config.to_dict()}

    def save(self, path) -> None:
        """tokenizer.json, written whole or not at all (`musictx.safe_output.atomic_path`; the caller decided
        whether ``path`` may be replaced)."""
        from musictx.safe_output import write_text

        write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n", "tokenizer", replace=True)

    @classmethod
    def from_dict(cls, d: dict) -> EventTokenizer:
        if d.get("kind") != "performance":
            raise TokenizerMismatchError(f"not a performance tokenizer: kind={d.get('kind')!r}")
        tok = cls(TokenizerConfig.from_dict(d["config"]))
        if d.get("vocab_size", tok.vocab_size) != tok.vocab_size:
            raise TokenizerMismatchError(f"stored vocab_size {d['vocab_size']} != {tok.vocab_size}")
        return tok

    @classmethod
    def load(cls, path) -> EventTokenizer:
        return cls.from_dict(read_json_object(path, "a tokenizer file"))

    def check_compatible(self, other: EventTokenizer | dict, what: str = "data") -> None:
        """Raise TokenizerMismatchError naming the differing fields, or the other's kind when it is not one of
        Performance events (a REMI tokenizer, or its dict)."""
        other_d = other.to_dict() if hasattr(other, "to_dict") else dict(other)
        if other_d.get("kind", "performance") != "performance":
            raise TokenizerMismatchError(f"tokenizer mismatch with {what}: this model reads Performance events, "
                                         f"{what} holds {str(other_d.get('kind')).upper()} tokens")
        other_cfg = other.config if isinstance(other, EventTokenizer) else EventTokenizer.from_dict(other).config
        a, b = self.config.to_dict(), other_cfg.to_dict()
        diff = {k: (a[k], b[k]) for k in a if a[k] != b[k]}
        if diff:
            detail = ", ".join(f"{k}: {x!r} here vs {y!r} in {what}" for k, (x, y) in diff.items())
            raise TokenizerMismatchError(f"tokenizer config mismatch with {what}: {detail}")

    def __eq__(self, other) -> bool:
        return isinstance(other, EventTokenizer) and self.config == other.config

    def __repr__(self) -> str:
        return f"EventTokenizer(vocab_size={self.vocab_size}, config={self.config})"
