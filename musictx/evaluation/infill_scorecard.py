"""The infill and accompaniment scorecards (``musictx-evaluate mode=infill`` / ``mode=accompany``): each song
of the split has bars filled (or its melody accompanied) by the model, and the result is measured beside
the song's real bars and tracks and beside chance.

- **infill**: ``bars`` bars from bar ``first_bar`` are filled (every track). Measures: the rest of the file
  unchanged, the new notes inside the range's bar lines, onsets on the song's eighth grid, pitch-class
  correlation with the real middle, the top-line interval across the two seams, density against the real;
  and the NLL of the real middle given both edges against given the left edge only (does the model use the
  right edge?). "chance" is the same bars of another song of the split pasted in (the grid: random onsets).
- **accompany** (`musictx.evaluation.accompany_card`): the song's melody accompanied (BRIDGE and PIANO) for the
  bars that cover ``seconds`` from the bar where the melody enters, and measured against the real accompaniment.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pretty_midi
import torch
from symusic import Score

from musictx.decoding import SamplingOptions, context_length, loose_ids, mixture_nll
from musictx.evaluation.scorecard import song_grid
from musictx.io.infill_format import BarSplitter, bar_starts
from musictx.io.score_io import read_score, score_to_pretty_midi
from musictx.listening import scorecard_metrics as sm
from musictx.listening.note_span import Span
from musictx.tasks import copy_history, in_bars, infill_prompt, infill_song, read_song

INFILL_MEASURES = (  # key, label
    ("unchanged", "rest of the file unchanged (share of songs)"),
    ("on_bar_lines", "new notes inside the range's bar lines (share)"),
    ("grid_share", "onsets on the song's eighth grid (+-30 ms)"),
    ("pc_correlation", "pitch-class correlation with the real middle"),
    ("seam_interval", "top-line interval across the seams (semitones)"),
    ("density_ratio", "notes per second / the real middle's"),
    ("nll_both", "NLL of the real middle, both edges (nats/token), as sampled"),
    ("nll_left", "NLL of the real middle, the same left edge only, as sampled"),
    ("nll_both_net", "the same, both edges, the network alone (no copy cache)"),
    ("nll_left_net", "the same, left edge only, the network alone"),
    ("nll_left_longer", "the same, left edge only, its room all to the left, the network alone"),
    ("realtime", "x real time (music seconds / wall seconds)"),
)


def file_span(score_or_path) -> Span:
    pm = pretty_midi.PrettyMIDI(str(score_or_path)) if isinstance(score_or_path, (str, Path)) \
        else score_to_pretty_midi(score_or_path)
    return Span.from_pretty_midi(pm)


def bar_seconds(song, bars: list[int]) -> np.ndarray:
    """Seconds (the file's clock) of the song's bar lines ``bars``."""
    return song.line_seconds(bars)


def seam_interval(before: Span, middle: Span, after: Span) -> float:
    """Mean absolute top-line interval (semitones) from the last note before the middle into it, and from its
    last note into the first after it; nan when neither seam has notes on both sides."""
    (_, b), (_, m), (_, a) = sm.top_line(before), sm.top_line(middle), sm.top_line(after)
    seams = []
    if len(b) and len(m):
        seams.append(abs(int(m[0]) - int(b[-1])))
    if len(m) and len(a):
        seams.append(abs(int(a[0]) - int(m[-1])))
    return float(np.mean(seams)) if seams else float("nan")


@torch.no_grad()
def middle_log_probs(net, tok, song, s: int, e: int, use_right: bool, taken: set[int] | None = None,
                     keep_right: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(the net's log-probabilities (M, V) at each id of the real middle of bars [s, e) (the ``taken``
    programs' notes, None: all) after its prompt, the middle's ids (M,)); ``use_right``, ``keep_right``: as
    `infill_prompt`'s. Infill_End is left out; a middle past the context is cut."""
    prompt, _ = infill_prompt(tok, song, s, e, taken, context_length(net) or 1024, use_right, keep_right)
    splitter = BarSplitter(tok)
    middle = np.concatenate([splitter.split(song.bar_ids(b), taken)[1] for b in range(s, e)]).astype(np.int64)
    ids = np.concatenate([prompt, middle])[: context_length(net) or 1024]
    x = torch.as_tensor(ids, dtype=torch.long)[None]  # (1, T)
    logp = torch.log_softmax(net.eval()(x)[0, len(prompt) - 1:-1].float(), dim=-1)  # (M, V)
    return logp.numpy(), ids[len(prompt):]


def middle_nll(net, tok, song, s: int, e: int, use_right: bool, taken: set[int] | None = None,
               keep_right: bool = True, copy_cache: float = 0.0) -> float:
    """Mean NLL (nats/token) of the real middle (`middle_log_probs`). ``copy_cache`` > 0: the net mixed with
    the copy cache over the song's bars outside the range (those after it only where the prompt keeps the
    right edge): the distribution the infill sampler draws from."""
    logp, targets = middle_log_probs(net, tok, song, s, e, use_right, taken, keep_right)
    if not copy_cache:
        return float(-logp[np.arange(len(targets)), targets].mean())
    history = copy_history(tok, song, s, e, taken, use_right and keep_right)
    return float(mixture_nll(logp, targets, history, copy_cache, loose=loose_ids(tok)).mean())


def without_in_bars(tok, song, s: int, e: int, hidden: set[int]):
    """``song`` with the notes of the ``hidden`` programs taken out of bars [s, e) (a melody silent there)."""
    splitter = BarSplitter(tok)
    parts = [song.ids[:song.end_of(s)]]
    parts += [np.asarray(splitter.split(song.bar_ids(b), hidden)[0], dtype=np.int64) for b in range(s, e)]
    ids = np.concatenate([*parts, song.ids[song.end_of(e):]])
    return replace(song, ids=ids, starts=bar_starts(ids, tok.bar_id))


def outside_unchanged(path, out: Score, song, s: int, e: int, per_beat: int) -> tuple[bool, bool]:
    """(every note outside bars [s, e) as in the file, every new note inside the range's bar lines)."""
    original, shift = read_score(path), song.read.shift_ticks
    lo, hi = int(song.lines[s]) - shift, int(song.lines[e]) - shift
    same, inside = True, True
    for before, after in zip(original.tracks, out.tracks, strict=True):
        a, b = before.notes.numpy(), after.notes.numpy()
        keep_a, keep_b = ~in_bars(song, a["time"], s, e, per_beat), ~in_bars(song, b["time"], s, e, per_beat)
        rows = [sorted(zip(*(z[k][m].tolist() for k in ("time", "duration", "pitch", "velocity")), strict=True))
                for z, m in ((a, keep_a), (b, keep_b))]
        same &= rows[0] == rows[1]
        inside &= bool(np.all((b["time"][~keep_b] >= lo) & (b["time"][~keep_b] + b["duration"][~keep_b] <= hi)))
    return same, inside


def infill_card(net, tok, path: Path, other: Path, opts: dict, sampling: SamplingOptions) -> dict:
    """{"model", "real", "chance"} figures of one song's bars filled."""
    song = read_song(tok, path)
    s = min(int(opts["first_bar"]) - 1, song.n_bars - int(opts["bars"]) - 1)
    e = s + int(opts["bars"])
    t0, t1 = bar_seconds(song, [s, e])
    start = time.perf_counter()
    out, _ = infill_song(net, tok, song, s, e, None, sampling)
    wall = time.perf_counter() - start
    real_all, new_all = file_span(path), file_span(out)
    grid = song_grid(path, pretty_midi.PrettyMIDI(str(path)))
    before, after = real_all.window(t0 - 4, t0), real_all.window(t1, t1 + 4)
    real, new = real_all.window(t0, t1), new_all.window(t0, t1)
    other_song = read_song(tok, other)
    o0, o1 = bar_seconds(other_song, [s, min(e, other_song.n_bars)])
    pasted = file_span(other).window(o0, o1).shifted(t0 - o0)
    same, inside = outside_unchanged(path, out, song, s, e, tok.miditok.config.max_num_pos_per_beat)
    seconds = t1 - t0

    def figures(span: Span) -> dict:
        return {"grid_share": sm.grid_share(span.start, grid), "pc_correlation": sm.pc_correlation(span, real),
                "seam_interval": seam_interval(before, span, after),
                "density_ratio": len(span) / max(len(real), 1)}
    model = {**figures(new), "unchanged": float(same), "on_bar_lines": float(inside),
             "nll_both": middle_nll(net, tok, song, s, e, True, copy_cache=sampling.hooks.copy_cache.strength),
             "nll_left": middle_nll(net, tok, song, s, e, True, keep_right=False,
                                    copy_cache=sampling.hooks.copy_cache.strength),
             "nll_both_net": middle_nll(net, tok, song, s, e, True),
             "nll_left_net": middle_nll(net, tok, song, s, e, True, keep_right=False),
             "nll_left_longer": middle_nll(net, tok, song, s, e, False),
             "realtime": seconds / wall}
    chance = {**figures(pasted), "grid_share": sm.chance_grid_share(grid, t0, t1)}
    return {"song": str(path), "bars": [s + 1, e], "seconds": seconds, "model": model, "real": figures(real),
            "chance": chance}
