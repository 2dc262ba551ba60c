"""The metrical, multi-track tokenizer: MidiTok's REMI with programs, tempos and time signatures. No torch.

A piece is one stream of bars: ``Bar TimeSig_4/4 Position_0 Tempo_.. Program_80 Pitch_67 Velocity_.. Duration_1.0.4
Position_4 ...``. A note has an explicit duration, so none can be left hanging; a bar and its positions
carry the beat; a Program token says which track plays each note (`musictx.io.score_prep` gives every
track its own program and brings names and real programs back on decoding).

What it is saved as: MidiTok's own parameter file (``MusicTokenizer.save``), inside our dict under
``"miditok"``, so a checkpoint, an export and a prepared dataset each carry the tokenizer that reads them.
The settings were chosen by measurement (``bench.tokenizers`` compares the variants).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import NamedTuple

import miditok
import numpy as np
from symusic import Score

from musictx.io.chord_labels import Chords
from musictx.io.chord_tokens import CHORD_TOKENS, chord_events, guess_chords, insert_chords, moved_chord
from musictx.io.held_meters import hold_meters
from musictx.io.id_checks import id_row
from musictx.io.jsonio import read_json_object
from musictx.io.meter_guess import apply_bars
from musictx.io.midi_io import MidiReadError, Notes
from musictx.io.midi_timing import read_timing
from musictx.io.read_errors import unreadable
from musictx.io.registers import Registers, fit_registers
from musictx.io.remi_settings import miditok_config, miditok_from_params, miditok_params
from musictx.io.score_io import read_score
from musictx.io.score_prep import (
    ROLE_PROGRAMS,
    TrackMap,
    assign_programs,
    chord_file_of,
    part_name,
)
from musictx.io.tokenizer import TokenizerMismatchError

FORMAT_VERSION = 1
KIND = "remi"

# The sentinels of the infill format (`musictx.io.infill_format`), appended after MidiTok's own ids with its
# ``add_to_vocab`` when a tokenizer is made with ``infill=True``: every id of a tokenizer without them keeps its
# meaning, so a model trained on plain REMI grows its embedding for them and nothing moves.
INFILL_TOKENS = ("Infill_Start", "Infill_End", "Fill_None")

class ReadScore(NamedTuple):
    score: Score  # in the file's ticks, the meter applied
    tracks: TrackMap
    shift_ticks: int  # how much later the music was moved to put its first downbeat on a bar line
    meter_found: str | None = None  # the line telling the user the bars were found from the music (else None)
    registers: Registers | None = None  # tracks moved by octaves into the pitches (`fit_registers`); None: not asked
    written_meters: list | None = None  # the time signatures to write the music back in where the file's are not
    # the tokens' (`musictx.io.held_meters`: a 2/2 read as 4/4 is written back 2/2); None: the score's own


class MetricalTokenizer:
    """MIDI <-> REMI ids (MidiTok). ``encode`` takes a path or a ``symusic.Score``."""

    kind = KIND

    def __init__(self, params: dict | None = None, infill: bool = False, chords: bool = False, **settings):
        """``params``: MidiTok's parameter file contents (a saved tokenizer); else ``settings`` for `miditok_config`.
        ``infill``: add the infill sentinels (`INFILL_TOKENS`) after MidiTok's ids; ``chords``: add the chord
        events (`musictx.io.chord_tokens.CHORD_TOKENS`) after those, and write a song's chords into its ids."""
        if params is None:
            params = miditok_params(miditok.REMI(miditok_config(**settings)))
        # Always built from the parameter file's contents, as a saved tokenizer is: MidiTok orders some ids
        # (the TimeSig ones) by the order of a dict's keys, which a JSON file with sorted keys changes, so a
        # tokenizer built from settings and the same tokenizer read back could number them differently.
        self.miditok = miditok_from_params(json.loads(json.dumps(params, sort_keys=True)))
        self.params = miditok_params(self.miditok)
        self.chords = chords
        self.extra_tokens = (INFILL_TOKENS if infill else ()) + (CHORD_TOKENS if chords else ())
        for token in self.extra_tokens:  # not MidiTok "special" tokens: those would be numbered first
            self.miditok.add_to_vocab(token)
        self.vocab = self.miditok.vocab  # token string -> id
        self._tokens = [None] * len(self.vocab)
        for token, i in self.vocab.items():
            self._tokens[i] = token
        self.type_of = np.array([t.split("_")[0] for t in self._tokens])  # (V,) token family of each id

    # ----- vocabulary -------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def pad_id(self) -> int:
        return self.vocab["PAD_None"]

    @property
    def eos_id(self) -> int:
        return self.vocab["EOS_None"]

    @property
    def bar_id(self) -> int:
        return self.vocab["Bar_None"]

    def id_to_token(self, i: int) -> str:
        if not 0 <= i < self.vocab_size:
            raise ValueError(f"id {i} outside the vocabulary of size {self.vocab_size}")
        return self._tokens[i]

    def ids_of_type(self, family: str) -> np.ndarray:
        return np.flatnonzero(self.type_of == family)

    def velocity_ids(self) -> np.ndarray:
        """The Velocity ids (as `EventTokenizer.velocity_ids`)."""
        return self.ids_of_type("Velocity")

    def numbers_of(self, family: str, missing: int = -1) -> np.ndarray:
        """(V,) the number each id of ``family`` carries (``Position_12`` -> 12, ``Program_-1`` -> -1), and
        ``missing`` for the other ids: the tables the samplers' hooks look ids up in."""
        out = np.full(self.vocab_size, missing, dtype=np.int64)
        for i in self.ids_of_type(family):
            out[i] = int(self._tokens[i].split("_")[1])
        return out

    def duration_beats(self) -> np.ndarray:
        """(V,) each Duration id's length in beats (MidiTok writes ``Duration_<beats>.<positions>.<per beat>``),
        nan for the other ids."""
        out = np.full(self.vocab_size, np.nan)
        for i in self.ids_of_type("Duration"):
            beats, positions, per_beat = map(int, self._tokens[i].split("_")[1].split("."))
            out[i] = beats + positions / per_beat
        return out

    def pitch_positions(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """(pitch, position in its bar) of every pitched note of ``ids``, in token order: the n-grams a
        memorization check compares (the same tune in another song's bar position is another tune)."""
        ids = np.asarray(ids, dtype=np.int64)
        pos_of = self.numbers_of("Position")
        is_pos, is_bar = pos_of[ids] >= 0, ids == self.bar_id
        marks = np.where(is_pos, pos_of[ids], np.where(is_bar, 0, -1))  # position set by each id, -1: none
        last = np.maximum.accumulate(np.where(marks >= 0, np.arange(len(ids)), -1))  # last mark at or before
        position = np.where(last >= 0, marks[np.maximum(last, 0)], 0)
        pitch_ids = self.ids_of_type("Pitch")
        is_pitch = (ids >= pitch_ids[0]) & (ids <= pitch_ids[-1])
        first_pitch = int(self._tokens[int(pitch_ids[0])].split("_")[1])
        return ids[is_pitch] - int(pitch_ids[0]) + first_pitch, position[is_pitch]

    def note_table(self, ids) -> tuple[Notes, np.ndarray, np.ndarray]:
        """(notes in seconds, the index of each note's Pitch id, the time in seconds at each id) of ``ids``:
        what the attention arcs draw. Times follow the stream's Tempo ids (120 bpm before the first)."""
        per_beat = self.miditok.config.max_num_pos_per_beat  # positions per beat of the meter's denominator
        quarter_s, den, bar_len = 0.5, 4, 4 * per_beat  # seconds per quarter, meter denominator, positions a bar
        bar_start = now = 0.0  # seconds
        rows, at, clock = [], [], np.zeros(len(ids))
        started, pitch, velocity = False, None, 64
        duration_beats = self.duration_beats()

        def pos_s() -> float:  # seconds of one position
            return quarter_s * 4 / den / per_beat

        for k, i in enumerate(np.asarray(ids, dtype=np.int64).tolist()):
            kind, _, value = self._tokens[i].partition("_")
            if kind == "Bar":
                bar_start = bar_start + bar_len * pos_s() if started else 0.0
                now, started = bar_start, True
            elif kind == "TimeSig":
                num, den = map(int, value.split("/"))
                bar_len = num * per_beat
            elif kind == "Tempo":
                quarter_s = 60.0 / float(value)
            elif kind == "Position":  # a window may open inside a bar: that bar counts from 0 s
                now, started = bar_start + int(value) * pos_s(), True
            elif kind in ("Pitch", "PitchDrum"):
                pitch, at_k = int(value), k
            elif kind == "Velocity":
                velocity = int(value)
            elif kind == "Duration" and pitch is not None:
                rows.append((now, now + duration_beats[i] * pos_s() * per_beat, pitch, velocity))
                at.append(at_k)
                pitch = None
            clock[k] = now
        a = np.array(rows, dtype=np.float64).reshape(-1, 4)
        notes = Notes(a[:, 0], a[:, 1], a[:, 2].astype(np.int64), a[:, 3].astype(np.int64))
        return notes, np.asarray(at, dtype=np.int64), clock

    def transpose_ids(self, ids: np.ndarray, semitones: int) -> np.ndarray:
        """``ids`` with every pitched note moved by ``semitones``, and every chord event's root; unchanged if a
        note would leave the range (Pitch ids are consecutive, one a semitone; drums have their own PitchDrum
        ids and stay)."""
        if semitones == 0:
            return ids
        pitch_ids = self.ids_of_type("Pitch")
        lo, hi = int(pitch_ids[0]), int(pitch_ids[-1])
        is_pitch = (ids >= lo) & (ids <= hi)
        moved = ids[is_pitch] + semitones
        if len(moved) and (moved.min() < lo or moved.max() > hi):
            return ids
        out = ids.copy()
        out[is_pitch] = moved
        if self.chords:  # the chords move with the notes: their roots turn round the circle of twelve
            out = self._chord_moved[semitones % 12][out].astype(ids.dtype, copy=False)
        return out

    @functools.cached_property
    def _chord_moved(self) -> np.ndarray:
        """(12, V): row s maps each id to itself, but a chord event's to the same chord s semitones up."""
        table = np.tile(np.arange(self.vocab_size, dtype=np.int64), (12, 1))
        for token in CHORD_TOKENS[1:]:  # Chord_N stays
            for s in range(12):
                table[s, self.vocab[token]] = self.vocab[moved_chord(token, s)]
        return table

    # ----- reading and encoding ---------------------------------------------------------------
    def read(self, midi, beats: str | os.PathLike | int | None = "auto") -> ReadScore:
        """The score ready to encode, its track map and how far the bars moved it (`ReadScore`). ``beats``:
        a POP909-style beat file to take the bars from; ``"auto"`` uses ``beat_midi.txt`` beside the file when
        there is one (and a file whose meter says one beat a bar gets its bars from its music); None: the
        file's own meter; a number: that many beats a bar, the downbeat found from the music."""
        if isinstance(midi, Score):
            score, path = midi.copy(), None
        else:
            path = Path(midi)
            try:
                score = read_score(path)
            except Exception as err:  # symusic raises RuntimeError / ValueError with terse text
                raise MidiReadError(str(path), unreadable(err)) from None
        if score.note_num() == 0:
            raise MidiReadError(str(path), "no notes")
        # symusic reads a track's lyrics as a second track of its name with no notes: as a part it took a program,
        # and a chorale's "Soprano" came back twice, the model writing a voice of its own into the copy
        score.tracks = [t for t in score.tracks if t.note_num()]
        shift, found = apply_bars(score, path, beats)
        written, held = hold_meters(score, self.miditok.config.time_signature_range,
                                    path.name if path is not None else "the score")
        found = "; ".join(line for line in (found, held) if line) or None
        return ReadScore(score, assign_programs(score), shift, found, written_meters=written)

    def fit_registers(self, read: ReadScore) -> ReadScore:
        """``read`` with its tracks moved by octaves into the tokens' pitches (in place; `musictx.io.registers`), for a
        seed or song to continue: training data is read as it is."""
        low, high = self.miditok.config.pitch_range
        keys = [(t.name, t.real_program) for t in read.tracks.tracks]
        names = [t.describe() for t in read.tracks.tracks]
        return read._replace(registers=fit_registers(read.score, keys, names, int(low), int(high)))

    def encode_score(self, score: Score) -> np.ndarray:
        seq = self.miditok.encode(score)
        return np.asarray(seq.ids, dtype=np.int64)

    def encode(self, midi, beats: str | os.PathLike | None = "auto") -> np.ndarray:
        read = self.read(midi, beats)
        return self.encode_read(read, None if isinstance(midi, Score) else midi)

    def encode_read(self, read: ReadScore, path: str | os.PathLike | None = None) -> np.ndarray:
        """The ids of a read score (`read`); with ``chords``, the chords of the chord file beside ``path``
        (`file_chords`) written in, else chords guessed from its notes (`musictx.io.chord_tokens.guess_chords`:
        on POP909's 94 validation songs the annotated chord at 67% of bar lines, its root at 76%)."""
        ids = self.encode_score(read.score)
        if not self.chords:
            return ids
        chords = self.file_chords(path, read) if path is not None else None
        chords = chords or guess_chords(self, ids, read.score)
        return self.add_chords(ids, read.score.ticks_per_quarter, *chords)

    @staticmethod
    def file_chords(path: str | os.PathLike, read: ReadScore) -> tuple[np.ndarray, list[str]] | None:
        """(each chord's start in ``read``'s ticks, its label) of the chord file beside the MIDI file ``path``
        (POP909's ``chord_midi.txt``, on that file's clock), or None without one."""
        found = chord_file_of(path)
        if found is None:
            return None
        chords = Chords.read(found, strict=False)  # POP909's own files: a line it cannot read is left out
        return read_timing(path).ticks(chords.starts) + read.shift_ticks, list(chords.labels)

    def add_chords(self, ids: np.ndarray, tpq: int, starts: np.ndarray, labels: list[str]) -> np.ndarray:
        """``ids`` (a score of ``tpq`` ticks a quarter) with the chord events of the chords starting at ticks
        ``starts`` (`musictx.io.chord_tokens`)."""
        return insert_chords(self, ids, chord_events(self, ids, tpq, starts, labels))

    # ----- decoding ---------------------------------------------------------------------------
    def decode_score(self, ids, tracks: TrackMap | None = None) -> Score:
        """A ``symusic.Score`` (ticks) of ``ids``; with ``tracks``, each track gets its name and real program
        back, in the map's order. A track the map does not know keeps its internal program, named by its role
        where it has one (MELODY, BRIDGE, PIANO: `part_name`): MidiTok's names of programs 80 and 81, "Lead 1
        (square)" and "Lead 2 (sawtooth)", both read back as a melody, and the bridge took the melody's place.
        Those tracks come MELODY, BRIDGE, PIANO first (POP909's order, which the notes of one onset follow), then
        by program: a song encoded, decoded and encoded again gives its ids back."""
        top = self.vocab_size - len(self.extra_tokens)  # the infill sentinels and the chord events are no music
        ids = [i for i in id_row(ids, self.vocab_size).tolist() if i not in (self.pad_id, self.eos_id) and i < top]
        score = self.miditok.decode(ids) if ids else Score(self.miditok.time_division)
        known = tracks.by_program() if tracks else {}
        rank = {t.program: k for k, t in enumerate(tracks.tracks)} if tracks else {}
        ranked = []
        for track in score.tracks:
            internal = -1 if track.is_drum else int(track.program)
            info = known.get(internal)
            if info is not None:
                track.name, track.program = info.name, info.real_program
            elif internal in ROLE_PROGRAMS.values():
                track.name = part_name(internal)
            ranked.append((rank.get(internal, len(rank) + _unknown_rank(internal)), track))
        score.tracks = [t for _, t in sorted(ranked, key=lambda r: r[0])]
        return score

    def decode(self, ids, tracks: TrackMap | None = None):
        """A ``pretty_midi.PrettyMIDI`` of ``ids`` (see `decode_score`)."""
        from musictx.io.score_io import score_to_pretty_midi

        return score_to_pretty_midi(self.decode_score(ids, tracks))

    def errors(self, ids) -> float:
        """MidiTok's share of ids that break the grammar (0 for a clean stream)."""
        return float(self.miditok.tokens_errors([int(i) for i in ids]))

    # ----- persistence ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = {"kind": KIND, "format_version": FORMAT_VERSION, "vocab_size": self.vocab_size, "miditok": self.params}
        if self.extra_tokens:
            d["extra_tokens"] = list(self.extra_tokens)
        return d

    def save_native(self, path) -> None:
        """MidiTok's own parameter file: ``miditok.REMI(params=path)`` reads it back."""
        from musictx.safe_output import atomic_path

        with atomic_path(path, "tokenizer", replace=True) as tmp:  # whole or not at all
            self.miditok.save(Path(tmp))

    def save(self, path) -> None:
        """tokenizer.json, written whole or not at all (`musictx.safe_output.atomic_path`; the caller decided
        whether ``path`` may be replaced)."""
        from musictx.safe_output import write_text

        write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n", "tokenizer", replace=True)

    @classmethod
    def from_dict(cls, d: dict) -> MetricalTokenizer:
        if d.get("kind") != KIND:
            raise TokenizerMismatchError(f"not a {KIND} tokenizer: kind={d.get('kind')!r}")
        extra = tuple(d.get("extra_tokens", ()))
        known = {(infill, chords): (INFILL_TOKENS if infill else ()) + (CHORD_TOKENS if chords else ())
                 for infill in (False, True) for chords in (False, True)}
        flags = next((k for k, v in known.items() if v == extra), None)
        if flags is None:
            raise TokenizerMismatchError(f"unknown extra tokens {list(extra)[:5]} ... (known: the infill sentinels "
                                         f"{list(INFILL_TOKENS)}, the chord events {CHORD_TOKENS[0]} ...)")
        tok = cls(params=d["miditok"], infill=flags[0], chords=flags[1])
        if d.get("vocab_size", tok.vocab_size) != tok.vocab_size:
            raise TokenizerMismatchError(f"stored vocab_size {d['vocab_size']} != {tok.vocab_size} rebuilt by MidiTok")
        return tok

    @classmethod
    def load(cls, path) -> MetricalTokenizer:
        return cls.from_dict(read_json_object(path, "a tokenizer file"))

    def check_compatible(self, other, what: str = "data") -> None:
        """Raise TokenizerMismatchError naming the settings that differ."""
        other_d = other.to_dict() if hasattr(other, "to_dict") else other
        if other_d.get("kind") != KIND:
            raise TokenizerMismatchError(f"tokenizer mismatch with {what}: this model reads {KIND.upper()} tokens, "
                                         f"{what} holds {str(other_d.get('kind', 'performance')).capitalize()} events")
        a, b = self.params.get("config", {}), other_d["miditok"].get("config", {})
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        diff += _extra_tokens_diff(self.to_dict().get("extra_tokens", ()), other_d.get("extra_tokens", ()), what)
        if diff or self.vocab_size != other_d.get("vocab_size", self.vocab_size):
            raise TokenizerMismatchError(f"tokenizer settings differ from {what}: {', '.join(diff) or 'vocabulary'}")

    def __eq__(self, other) -> bool:
        return (isinstance(other, MetricalTokenizer) and self.params == other.params
                and self.extra_tokens == other.extra_tokens)

    def __repr__(self) -> str:
        return f"MetricalTokenizer(REMI, vocab_size={self.vocab_size})"


def _extra_tokens_diff(mine, theirs, what: str) -> list[str]:
    """The extra token families (infill sentinels, chord events) of one side and not the other, in words: a
    pop_infill model on plain pop data differed only in them, and was said to differ in "vocabulary"."""
    families = {"the infill sentinels": INFILL_TOKENS, "the chord events": CHORD_TOKENS}
    said = []
    for name, tokens in families.items():
        here, there = set(tokens) <= set(mine), set(tokens) <= set(theirs)
        if here != there:
            said.append(f"{name} ({'here, not in ' if here else 'in '}{what}{'' if here else ', not here'})")
    return said


def _unknown_rank(internal: int) -> int:
    """Where a track no map names goes among such tracks: the roles in order, then by internal program."""
    order = list(ROLE_PROGRAMS.values())  # MELODY, BRIDGE, PIANO
    return order.index(internal) if internal in order else len(order) + internal + 1
