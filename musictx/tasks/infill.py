"""Filling bars of a song as a prompt format: the context around a bar range in the infill format
(`infill_prompt`), the copy cache's history, and the prompt of the middle (`song_middle_prompt`) for the one
sampler (`musictx.tasks.prompt`); what comes back is put into the file's own score by
`musictx.tasks.write_back.filled_file`, where nothing outside the range (or outside the tracks asked
for) is touched.
"""

from __future__ import annotations

import numpy as np
import torch
from symusic import Score

from musictx.decoding.errors import GenerateError
from musictx.decoding.hook import HookInputs
from musictx.decoding.sampling import SpecialIds
from musictx.decoding.sampling_options import SamplingOptions
from musictx.decoding.window import context_length
from musictx.io.infill_format import BarSplitter, InfillIds, build_infill
from musictx.tasks.prompt import Prompt, new_rows, sample
from musictx.tasks.song_bars import SongBars
from musictx.tasks.write_back import filled_file

RIGHT_SHARE = 0.4  # of the context left after the span and the middle's room, at most this much after the span


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
    bar by bar: what the copy cache may copy (`musictx.decoding.hooks.copy_cache`). The bars after the range
    (with ``use_right``) come first and those before it last, so that the middle goes on from the bar
    before it, as in the song, and its first ids match where that bar's music came back."""
    splitter = BarSplitter(tok)
    bars = [*(range(e, song.n_bars) if use_right else ()), *range(0, s)]
    parts = [np.asarray(splitter.split(song.bar_ids(b), taken)[1], dtype=np.int64) for b in bars]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def middle_prompt(net, tok, context: np.ndarray, n_bars: int, programs: list[int], room: int,
                  sampling: SamplingOptions, history: np.ndarray | None = None, samples: int = 1) -> Prompt:
    """The prompt of ``samples`` middles after ``context`` (`infill_prompt`: it ends with Infill_Start), each
    ``n_bars`` bars from its first Bar, in ``room`` ids. ``history`` (`copy_history`): the song's bars the
    copy cache may copy, with ``sampling.copy_cache``."""
    if room < 2:
        raise GenerateError(f"no room left in the model's {context_length(net)}-id context to write the bars")
    device = next(net.parameters()).device
    ids = torch.as_tensor(np.concatenate([context, [tok.bar_id]]), dtype=torch.long, device=device)
    hooks = HookInputs("infill", tok, sampling, programs=programs, history=history, stop_after_bars=n_bars - 1)
    ends = SpecialIds(pad_id=tok.pad_id, eos_id=InfillIds.of(tok).end)  # the middle ends at Infill_End
    return Prompt(ids[None].repeat(samples, 1), hooks, room - 1, ends)  # (B, T0)


def song_middle_prompt(net, tok, song: SongBars, s: int, e: int, taken: set[int] | None,
                       sampling: SamplingOptions, use_right: bool = True, samples: int = 1) -> Prompt:
    """The prompt of ``samples`` fillings of bars [s, e) of ``song`` (the ``taken`` tracks, None: all): the
    context around them (`infill_prompt`) and the copy cache's history, made once."""
    context, room = infill_prompt(tok, song, s, e, taken, context_length(net) or 1024, use_right)
    programs = sorted(taken) if taken is not None else sorted(t.program for t in song.read.tracks.tracks)
    return middle_prompt(net, tok, context, e - s, programs, room, sampling,
                         copy_history(tok, song, s, e, taken, use_right), samples)


def middle_bars(tok, rows: np.ndarray, n_bars: int) -> list[np.ndarray]:
    """Each sampled middle's music ids (sentinels, PAD and EOS dropped) from its first Bar up to the Bar that
    would open bar ``n_bars + 1``; ``rows`` (B, T): the sampler's ids from the first Bar on."""
    out = []
    for middle in rows:
        middle = middle[middle < tok.vocab_size - len(tok.extra_tokens)]  # sentinels and beyond: no music
        middle = middle[(middle != tok.pad_id) & (middle != tok.eos_id)]
        at = np.flatnonzero(middle == tok.bar_id)
        out.append(middle[:at[n_bars]] if len(at) > n_bars else middle)
    return out


def infill_song(net, tok, song: SongBars, s: int, e: int, taken: set[int] | None, sampling: SamplingOptions,
                use_right: bool = True) -> tuple[Score, np.ndarray]:
    """(the file with bars [s, e) (of the ``taken`` tracks, None: all) filled, the middle's ids)."""
    return infill_songs(net, tok, song, s, e, taken, sampling, use_right)[0]


def infill_songs(net, tok, song: SongBars, s: int, e: int, taken: set[int] | None, sampling: SamplingOptions,
                 use_right: bool = True, samples: int = 1, on_step=None
                 ) -> list[tuple[Score, np.ndarray]]:
    """``samples`` fillings of bars [s, e) drawn as one batch (`song_middle_prompt`): (the file with them
    filled, the middle's ids) each. ``on_step(next_ids, done)``: called after every draw."""
    prompt = song_middle_prompt(net, tok, song, s, e, taken, sampling, use_right, samples)
    prompt.hooks.on_step = on_step
    out = new_rows(sample(net, prompt), prompt)  # (B, T) from the first new Bar
    return [(filled_file(tok, song, s, e, taken, m), m) for m in middle_bars(tok, out, e - s)]
