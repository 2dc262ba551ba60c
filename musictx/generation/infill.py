"""Filling bars of a song: the context around a bar range in the infill format, the middle sampled, and its
notes put back into the file's own score, where nothing outside the range (or outside the tracks asked
for) is touched.

The model never rewrites what it was given: the output is the input file's score with the notes of the
chosen tracks inside the chosen bars replaced, so the rest is the file's own events, note for note. The new
notes are placed bar by bar on the song's bar lines and cut at the range's last bar line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from symusic import Note, Score

from musictx.generation.hook_registry import build_hooks
from musictx.generation.hooks import HookInputs
from musictx.generation.metrical_seed import bar_lines, ticks_to_seconds
from musictx.generation.sampling import SpecialIds, generate
from musictx.generation.sampling_options import SamplingOptions
from musictx.generation.seeds import GenerateError
from musictx.generation.window import context_length
from musictx.io.infill_format import BarSplitter, InfillIds, bar_starts, build_infill
from musictx.io.metrical_tokenizer import ReadScore
from musictx.io.midi_io import MidiReadError
from musictx.io.score_io import read_score

RIGHT_SHARE = 0.4  # of the context left after the span and the middle's room, at most this much after the span


@dataclass
class SongBars:
    """A file read for infill: the score as tokenized (meter applied), its ids and where its bars are."""

    path: str
    read: ReadScore
    ids: np.ndarray  # (T,) the whole song, EOS dropped
    starts: np.ndarray  # (n_bars,) index of each Bar id
    lines: np.ndarray  # (>= n_bars + 1,) bar-line ticks of the read score

    @property
    def n_bars(self) -> int:
        return len(self.starts)

    def line_seconds(self, bars: list[int]) -> np.ndarray:
        """Seconds (the file's own clock) of the bar lines ``bars`` (0-based; n_bars is the last line)."""
        ticks = np.asarray([int(self.lines[b]) - self.read.shift_ticks for b in bars])
        return ticks_to_seconds(read_score(self.path), np.maximum(ticks, 0))

    def bar_ids(self, b: int) -> np.ndarray:
        end = self.starts[b + 1] if b + 1 < self.n_bars else len(self.ids)
        return self.ids[self.starts[b]:end]

    def end_of(self, b: int) -> int:
        """Token index where bar ``b`` begins (the song's end for ``b == n_bars``)."""
        return int(self.starts[b]) if b < self.n_bars else len(self.ids)


def read_song(tok, path: str | os.PathLike, read: ReadScore | None = None) -> SongBars:
    """``path`` read as the tokenizer reads it (POP909's beat file applied); ``read`` to use a score made here."""
    read = read or tok.read(path)
    ids = tok.encode_score(read.score)
    ids = ids[ids != tok.eos_id]
    return SongBars(str(path), read, ids, bar_starts(ids, tok.bar_id), bar_lines(read.score))


def meter_warning(song: SongBars) -> str:
    """"" for a song whose bars look like bars; else one clause saying that its meter makes every bar one
    beat long (POP909's MIDI files say 1/4 and keep their real bars in ``beat_midi.txt``, which was not
    found beside it), so the model writes a bar's music into each beat."""
    signatures = song.read.score.time_signatures
    if not signatures or any(t.numerator > 1 for t in signatures):
        return ""
    return (f"; careful: {Path(song.path).name} says {signatures[0].numerator}/{signatures[0].denominator} "
            "throughout, so each of its bars is one beat long and the new music is packed into it: give the "
            "file its real meter (or put POP909's beat_midi.txt beside it)")


def parse_bars(spec, song: SongBars) -> tuple[int, int]:
    """``"9-12"`` (1-based, inclusive; or one bar ``"9"``) as the 0-based range [s, e) of ``song``'s bars."""
    text = str(spec).strip()
    try:
        a, _, b = text.partition("-")
        first, last = int(a), int(b or a)
    except ValueError:
        raise GenerateError(f"bars={spec}: give a bar range as FIRST-LAST, e.g. bars=9-12") from None
    if not 1 <= first <= last <= song.n_bars:
        raise MidiReadError(song.path, f"bars={spec} is outside the song's bars 1-{song.n_bars}")
    return first - 1, last


def programs_of_names(song: SongBars, names) -> set[int] | None:
    """The internal programs of the file's tracks named in ``names`` (case-insensitive); None: all tracks."""
    if not names:
        return None
    wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    by_name = {t.name.strip().lower(): t.program for t in song.read.tracks.tracks}
    unknown = [n for n in wanted if n.lower() not in by_name]
    if unknown:
        raise MidiReadError(song.path, f"no track named {', '.join(unknown)} (tracks: "
                                       f"{', '.join(t.name or '(unnamed)' for t in song.read.tracks.tracks)})")
    return {by_name[n.lower()] for n in wanted}


def context_bars(song: SongBars, s: int, e: int, room: int, use_right: bool) -> tuple[int, int]:
    """(lo, hi): bars lo..s-1 before the span and e..hi-1 after it that fit in ``room`` ids; the right edge
    gets at most `RIGHT_SHARE` of it first, the left what is left over, then the right whatever the left
    did not need (at the start of a song)."""
    def left_len(lo: int) -> int:
        return song.end_of(s) - song.end_of(lo)

    def right_len(hi: int) -> int:
        return song.end_of(hi) - song.end_of(e)

    hi, lo = e, s
    while use_right and hi < song.n_bars and right_len(hi + 1) <= RIGHT_SHARE * room:
        hi += 1
    while lo > 0 and left_len(lo - 1) + right_len(hi) <= room:
        lo -= 1
    while use_right and hi < song.n_bars and left_len(lo) + right_len(hi + 1) <= room:
        hi += 1
    return lo, hi


def infill_prompt(tok, song: SongBars, s: int, e: int, taken: set[int] | None, max_len: int,
                  use_right: bool = True, keep_right: bool = True) -> tuple[np.ndarray, int]:
    """(prompt ending with Infill_Start, ids of room left for the middle) for bars [s, e) of ``song``.
    ``keep_right=False``: the context chosen as with the right edge, then the right edge left out (the same
    left edge without the right: what the right edge adds, measured)."""
    splitter = BarSplitter(tok)
    span = [song.bar_ids(b) for b in range(s, e)]
    parts = [splitter.split(bar, taken) for bar in span]
    taken_now = sum(len(took) for _, took in parts)  # the real middle's length: the room the new one gets
    middle_room = min(max(int(1.5 * taken_now) + 16 * (e - s), 48 * (e - s)), max_len // 2)
    span_len = sum(len(given) + 1 for given, _ in parts) + 1  # the span's given part, Fills, Infill_Start
    room = max(max_len - middle_room - span_len, 0)
    lo, hi = context_bars(song, s, e, room, use_right)
    hi = hi if keep_right else e
    left, right = song.ids[song.end_of(lo):song.end_of(s)], song.ids[song.end_of(e):song.end_of(hi)]
    prompt, _ = build_infill(left, span, right, splitter, taken, InfillIds.of(tok))
    return prompt, max_len - len(prompt)


def copy_history(tok, song: SongBars, s: int, e: int, taken: set[int] | None, use_right: bool = True
                 ) -> np.ndarray:
    """The song's bars outside [s, e) as the middle is written (only the ``taken`` tracks' notes, None: all),
    bar by bar: what the copy cache may copy (`musictx.generation.copy_cache`). The bars after the range
    (with ``use_right``) come first and those before it last, so that the middle goes on from the bar
    before it, as in the song, and its first ids match where that bar's music came back."""
    splitter = BarSplitter(tok)
    bars = [*(range(e, song.n_bars) if use_right else ()), *range(0, s)]
    parts = [np.asarray(splitter.split(song.bar_ids(b), taken)[1], dtype=np.int64) for b in bars]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def sample_middle(net, tok, prompt: np.ndarray, n_bars: int, programs: list[int], room: int,
                  sampling: SamplingOptions, history: np.ndarray | None = None, samples: int = 1, on_step=None
                  ) -> list[np.ndarray]:
    """The ids of ``samples`` middles, drawn as one batch, each ``n_bars`` bars from its first Bar (cut
    before the Bar that would open one more). ``history`` (`copy_history`): the song's bars the copy cache
    may copy, with ``sampling.copy_cache``; ``on_step(next_ids, done)``: called after every draw."""
    if room < 2:
        raise GenerateError(f"no room left in the model's {context_length(net)}-id context to write the bars")
    device = next(net.parameters()).device
    ids = torch.as_tensor(np.concatenate([prompt, [tok.bar_id]]), dtype=torch.long, device=device)
    ids = ids[None].repeat(samples, 1)  # (B, T0)
    hooks = build_hooks(HookInputs("infill", tok, sampling, programs=programs, history=history,
                                   stop_after_bars=n_bars - 1, on_step=on_step))
    ends = SpecialIds(pad_id=tok.pad_id, eos_id=InfillIds.of(tok).end)  # the middle ends at Infill_End
    out = generate(net, ends, ids, sampling, hooks, max_new_tokens=room - 1)
    return [_middle_bars(tok, row, n_bars) for row in out[:, len(prompt):].cpu().numpy()]


def _middle_bars(tok, middle: np.ndarray, n_bars: int) -> np.ndarray:
    """A sampled middle's music ids (sentinels, PAD and EOS dropped), up to the Bar that would open bar
    ``n_bars + 1``."""
    middle = middle[middle < tok.vocab_size - len(tok.extra_tokens)]  # sentinels and beyond: no music
    middle = middle[(middle != tok.pad_id) & (middle != tok.eos_id)]
    at = np.flatnonzero(middle == tok.bar_id)
    return middle[:at[n_bars]] if len(at) > n_bars else middle


def middle_notes(tok, middle: np.ndarray, song: SongBars, s: int, e: int) -> dict[int, list[Note]]:
    """{internal program: notes in the read score's ticks} of the middle's bars, placed on bars s.. of the
    song and cut at the range's end."""
    tpq, end = song.read.score.ticks_per_quarter, int(song.lines[e])
    at = np.flatnonzero(middle == tok.bar_id)
    out: dict[int, list[Note]] = {}
    for j, first in enumerate(at[: e - s]):
        last = at[j + 1] if j + 1 < len(at) else len(middle)
        bar = tok.decode_score(middle[first:last])  # this bar alone: its line at tick 0
        factor = tpq / bar.ticks_per_quarter
        for track in bar.tracks:
            program = -1 if track.is_drum else int(track.program)
            for n in track.notes:
                start = int(song.lines[s + j]) + round(n.time * factor)
                if start >= end:
                    continue
                duration = max(min(round(n.duration * factor), end - start), 1)
                out.setdefault(program, []).append(Note(start, duration, n.pitch, n.velocity))
    return out


def in_bars(song: SongBars, onsets: np.ndarray, s: int, e: int, positions_per_beat: int) -> np.ndarray:
    """(N,) whether each onset (the file's ticks) falls in bars [s, e) once on the tokens' grid, as the
    tokenizer puts it: a note played a little before a bar line is in that bar, for the model and here."""
    grid = song.read.score.ticks_per_quarter / positions_per_beat
    on_grid = np.floor((np.asarray(onsets) + song.read.shift_ticks) / grid + 0.5) * grid  # read-score ticks
    return (on_grid >= song.lines[s]) & (on_grid < song.lines[e])


def replace_in_file(song: SongBars, s: int, e: int, taken: set[int] | None,
                    new: dict[int, list[Note]], positions_per_beat: int) -> Score:
    """The file's own score (``song.path`` read again, no meter applied) with the taken tracks' notes whose
    onsets fall in bars [s, e) replaced by ``new`` (read-score ticks, moved back by the read's shift)."""
    original, shift = read_score(song.path), song.read.shift_ticks
    for track, info in zip(original.tracks, song.read.tracks.tracks, strict=True):
        if taken is not None and info.program not in taken:
            continue
        a = track.notes.numpy()
        keep = ~in_bars(song, a["time"], s, e, positions_per_beat)
        notes = [Note(n.time - shift, n.duration, n.pitch, n.velocity) for n in new.get(info.program, [])
                 if n.time >= shift]  # a note in a pickup's bar before the file's start is left out
        rows = [(int(t), int(d), int(p), int(v)) for t, d, p, v in
                zip(a["time"][keep], a["duration"][keep], a["pitch"][keep], a["velocity"][keep], strict=True)]
        rows += [(n.time, n.duration, n.pitch, n.velocity) for n in notes]
        rows.sort(key=lambda r: (r[0], r[2]))
        track.notes = Note.from_numpy(*(np.array(c, dtype=np.int32) for c in zip(*rows, strict=True))) \
            if rows else Note.from_numpy(*(np.zeros(0, np.int32),) * 4)
    return original


def infill_song(net, tok, song: SongBars, s: int, e: int, taken: set[int] | None, sampling: SamplingOptions,
                use_right: bool = True) -> tuple[Score, np.ndarray]:
    """(the file with bars [s, e) (of the ``taken`` tracks, None: all) filled, the middle's ids)."""
    return infill_songs(net, tok, song, s, e, taken, sampling, use_right)[0]


def infill_songs(net, tok, song: SongBars, s: int, e: int, taken: set[int] | None, sampling: SamplingOptions,
                 use_right: bool = True, samples: int = 1, on_step=None
                 ) -> list[tuple[Score, np.ndarray]]:
    """``samples`` fillings of bars [s, e) drawn as one batch: (the file with them filled, the middle's ids)
    each. The prompt and the copy cache's history are made once."""
    prompt, room = infill_prompt(tok, song, s, e, taken, context_length(net) or 1024, use_right)
    programs = sorted(taken) if taken is not None else sorted(t.program for t in song.read.tracks.tracks)
    middles = sample_middle(net, tok, prompt, e - s, programs, room, sampling,
                            copy_history(tok, song, s, e, taken, use_right), samples, on_step)
    per_beat = tok.miditok.config.max_num_pos_per_beat
    return [(replace_in_file(song, s, e, taken, middle_notes(tok, m, song, s, e), per_beat), m) for m in middles]
