"""The infill and accompaniment scorecards (``musictx-evaluate mode=infill`` / ``mode=accompany``): each song
of the split has bars filled (or its melody accompanied) by the model, and the result is measured beside
the song's real bars and tracks and beside chance.

- **infill**: ``bars`` bars from bar ``first_bar`` are filled (every track). Measures: the rest of the file
  unchanged, the new notes inside the range's bar lines, onsets on the song's eighth grid, pitch-class
  correlation with the real middle, the top-line interval across the two seams, density against the real;
  and the NLL of the real middle given both edges against given the left edge only (does the model use the
  right edge?). "chance" is the same bars of another song of the split pasted in (the grid: random onsets).
- **accompany**: the song's MELODY track alone, as a file beside its beat file, accompanied (BRIDGE and
  PIANO) for the bars that cover ``seconds`` from the bar where the melody enters (``accompany_from``;
  "song": from the first bar, intro included). Measures: the share of accompaniment onsets on
  strong beats whose pitch class is in the annotated chord (``chord_midi.txt``; chance: a random pitch
  class), density and register against the real accompaniment, the melody unchanged, and speed.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pretty_midi
import torch
from symusic import Score

from musictx.decoding import SamplingOptions, context_length, loose_ids, mixture_nll, repeat_plan
from musictx.evaluation.checks import ACCOMPANY_FROM, EvaluateError, each_song
from musictx.evaluation.chords import Harmony
from musictx.evaluation.scorecard import song_grid
from musictx.io.chord_labels import Chords
from musictx.io.infill_format import BarSplitter, bar_starts
from musictx.io.score_io import read_score, score_to_pretty_midi
from musictx.io.score_prep import ROLE_PROGRAMS
from musictx.listed import counted
from musictx.listening import scorecard_metrics as sm
from musictx.listening.note_span import Span
from musictx.tasks import (
    accompany_song,
    copy_history,
    in_bars,
    infill_prompt,
    infill_song,
    melody_keys,
    melody_song,
    read_song,
)

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
ACCOMPANY_MEASURES = (
    ("melody_unchanged", "melody unchanged, note for note (share of songs)"),
    ("chord_tone_share", "strong-beat onsets on a chord tone"),
    ("pitch_classes", "distinct pitch classes per half bar (how full the chords are)"),
    ("repeat_overlap", "a repeated melody bar's accompaniment: pitches shared with its first time"),
    ("density_ratio", "accompaniment notes per second / the real's"),
    ("mean_pitch", "accompaniment mean pitch (MIDI)"),
    ("pitch_spread", "accompaniment pitch spread (std, semitones)"),
    ("nll_melody", "NLL of the real accompaniment, melody given (bars 17-20)"),
    ("nll_no_melody", "NLL of the real accompaniment, melody silent there"),
    ("realtime", "x real time (music seconds / wall seconds)"),
)
ACCOMPANIMENT = ("BRIDGE", "PIANO")


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


def melody_file(path: Path, folder: Path) -> Path:
    """The song's MELODY track alone, beside a copy of its beat file (so its bars are the song's)."""
    score = read_score(path)
    score.tracks = [t for t in score.tracks if t.name.upper() == "MELODY"]
    out = folder / path.parent.name / path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    score.dump_midi(str(out))
    shutil.copy(path.with_name("beat_midi.txt"), out.with_name("beat_midi.txt"))
    return out


def accompaniment_figures(span: Span, harmony: Harmony, seconds: float) -> tuple[dict, float]:
    share, chance = harmony.chord_tone_share(span.start, span.pitch)
    pitch = span.pitch.astype(np.float64)
    return {"chord_tone_share": share, "density": len(span) / seconds,
            "pitch_classes": harmony.pitch_classes_per_span(span.start, span.pitch),
            "mean_pitch": float(pitch.mean()) if len(pitch) else float("nan"),
            "pitch_spread": float(pitch.std()) if len(pitch) else float("nan")}, chance


def accompany_range(song, melody_path: Path, seconds: float, start: str) -> tuple[int, int, np.ndarray]:
    """(s, e, bar-line seconds): the bars [s, e) covering ``seconds`` from the song's first bar (``start``
    "song") or from the bar where the melody enters ("melody": a pop song's intro has no melody to accompany,
    so its accompaniment there can only be guessed)."""
    if start not in ACCOMPANY_FROM:
        raise ValueError(f"infill.accompany_from={start!r}: give {' or '.join(ACCOMPANY_FROM)}")
    lines = bar_seconds(song, list(range(song.n_bars + 1)))
    s = 0
    if start == "melody":
        onsets = file_span(melody_path).start
        first = float(onsets.min()) if len(onsets) else float(lines[0])
        s = int(np.clip(np.searchsorted(lines, first + 1e-6, side="right") - 1, 0, song.n_bars - 1))
    e = int(min(np.searchsorted(lines, lines[s] + seconds - 1e-6), song.n_bars))
    return s, max(e, s + 1), lines


def accompany_card(net, tok, path: Path, folder: Path, opts: dict, sampling: SamplingOptions) -> dict:
    melody_path = melody_file(path, folder)
    song = melody_song(tok, melody_path)
    s, e, lines = accompany_range(song, melody_path, float(opts["seconds"]), opts.get("accompany_from", "melody"))
    start = time.perf_counter()
    scheme = opts.get("accompany_scheme", "lead")
    # accompany_chords: the song's annotated chords given, as a lead sheet would (else the melody alone)
    chords = Chords.read(path.with_name("chord_midi.txt"), strict=False) if opts.get("accompany_chords") else None
    out, _ = accompany_song(net, tok, song, list(ACCOMPANIMENT), s, e, sampling, scheme=scheme, chords=chords)
    wall = time.perf_counter() - start
    t0, t1 = lines[s], lines[e]
    harmony = Harmony.read(path.with_name("chord_midi.txt"), path.with_name("beat_midi.txt"))
    real_all, new_all = file_span(path), file_span(out)
    acc = lambda span: span.select(np.isin(np.asarray(span.track_names)[span.track], ACCOMPANIMENT))  # noqa: E731
    real, new = acc(real_all).window(t0, t1), acc(new_all).window(t0, t1)
    model, chance = accompaniment_figures(new, harmony, t1 - t0)
    real_row, _ = accompaniment_figures(real, harmony, t1 - t0)
    pairs = repeat_plan(melody_keys(tok, song, {ROLE_PROGRAMS["MELODY"]}, s, e))
    model["repeat_overlap"] = repeat_overlap(new, lines[s:e + 1], pairs)
    real_row["repeat_overlap"] = repeat_overlap(real, lines[s:e + 1], pairs)
    model["density_ratio"] = model["density"] / max(real_row["density"], 1e-9)
    real_row["density_ratio"] = 1.0
    given = read_score(melody_path).tracks[0].notes.numpy()
    written = out.tracks[0].notes.numpy()
    model["melody_unchanged"] = float(all(np.array_equal(given[k], written[k]) for k in given))
    model["realtime"] = (t1 - t0) / wall
    model.update(accompaniment_nll(net, tok, path, scheme))
    return {"song": str(path), "bars": [s + 1, e], "seconds": t1 - t0, "model": model, "real": real_row,
            "chance": {"chord_tone_share": chance}}


def repeat_overlap(span: Span, lines: np.ndarray, plan: dict[int, int]) -> float:
    """Mean over the bars of ``plan`` (bar -> the earlier bar with the same melody; bars counted from
    ``lines``' first, seconds) of the share of pitches the two bars' notes have in common; nan for none."""
    bars = {k: Counter(span.window(lines[k], lines[k + 1]).pitch.tolist()) for k in {*plan, *plan.values()}}
    shares = [sum((bars[k] & bars[j]).values()) / max(bars[k].total(), bars[j].total(), 1) for k, j in plan.items()]
    return float(np.mean(shares)) if shares else float("nan")


def accompaniment_nll(net, tok, path: Path, scheme: str = "lead") -> dict:
    """NLL of the song's real BRIDGE and PIANO in bars 17-20 written after its past, with the melody of
    those bars given, and with it silent there: how much the model reads the melody it accompanies. Scheme
    "lead": the accompaniment's ids in the plain stream; "infill": the taken middle of the infill format."""
    song = read_song(tok, path)
    s = min(16, song.n_bars - 5)
    melody, acc = {ROLE_PROGRAMS["MELODY"]}, {ROLE_PROGRAMS[r] for r in ACCOMPANIMENT}
    silent = without_in_bars(tok, song, s, s + 4, melody)
    if scheme == "lead":
        return {"nll_melody": stream_nll(net, tok, song, s, s + 4, acc),
                "nll_no_melody": stream_nll(net, tok, silent, s, s + 4, acc)}
    return {"nll_melody": middle_nll(net, tok, song, s, s + 4, False, acc),
            "nll_no_melody": middle_nll(net, tok, silent, s, s + 4, False, acc)}


def note_programs(tok, ids: np.ndarray) -> np.ndarray:
    """(T,) the program of the note each id belongs to (its Program, Pitch, Velocity, Duration), else -1."""
    out, current = np.full(len(ids), -1), -1
    for k, i in enumerate(int(x) for x in ids):
        kind = tok.type_of[i]
        if kind == "Program":
            current = int(tok.id_to_token(i).split("_")[1])
        elif kind not in ("Pitch", "Velocity", "Duration"):
            current = -1
        out[k] = current
    return out


@torch.no_grad()
def stream_nll(net, tok, song, s: int, e: int, programs: set[int]) -> float:
    """Mean NLL (nats/token) of the ids of ``programs``' notes in bars [s, e) of the plain stream, after as
    much of the song before them as the context holds."""
    end = song.end_of(e)
    lo = song.end_of(int(np.searchsorted(song.starts, end - (context_length(net) or 1024))))
    ids = song.ids[lo:end].astype(np.int64)
    x = torch.as_tensor(ids, dtype=torch.long)[None]  # (1, T)
    logp = torch.log_softmax(net.eval()(x)[0, :-1].float(), dim=-1)  # (T - 1, V)
    nll = -logp.gather(1, x[0, 1:, None])[:, 0].numpy()  # (T - 1,) the NLL of each next id
    chosen = np.isin(note_programs(tok, ids), list(programs)) & (np.arange(len(ids)) >= song.end_of(s) - lo)
    return float(nll[np.flatnonzero(chosen[1:])].mean())


INFILL_MODE = "infill"  # mode=infill's scorecard; the other is accompany's


def run_task_scorecard(net, tok, songs: list[Path], opts: dict, task: str, progress=print) -> dict:
    """The infill or accompany scorecard over ``songs`` (the i-th uses sampling seed + i)."""
    sampling = SamplingOptions.from_mapping(opts)
    if task == INFILL_MODE and len(songs) < 2:  # the chance column would be the song itself
        raise EvaluateError(f"mode=infill needs 2 songs or more: its chance column pastes the same bars of another "
                            f"song; {len(songs)} given (infill.max_songs={opts.get('max_songs')})")
    skipped: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cards = {  # each mode's card of song k (an infill card also reads the next song, for chance)
            "infill": lambda k, path, one: infill_card(net, tok, path, Path(songs[(k + 1) % len(songs)]), opts, one),
            "accompany": lambda k, path, one: accompany_card(net, tok, path, Path(tmp), opts, one)}

        def card(k: int, path: Path) -> dict:
            return cards[task](k, path, replace(sampling, seed=sampling.seed + k))

        per_song = list(each_song(songs, card, skipped, progress, f"{task} scorecard"))  # a bad song: skipped
    means = {side: {key: _nan_mean([c[side].get(key, np.nan) for c in per_song])
                    for key in sorted({k for c in per_song for k in c[side]})} for side in ("model", "real", "chance")}
    return {"task": task, "songs": per_song, "means": means, "settings": dict(opts), "skipped": skipped}


def _nan_mean(values: list[float]) -> float:
    """np.nanmean without its RuntimeWarning on stderr when no song had the measure (a song without a repeated
    melody bar): NaN then, written as null and shown as "-"."""
    kept = [v for v in values if not np.isnan(v)]
    return float(np.mean(kept)) if kept else float("nan")


def format_task_scorecard(result: dict) -> str:
    m, s, n = result["means"], result["settings"], len(result["songs"])
    infill = result["task"] == INFILL_MODE
    measures = INFILL_MEASURES if infill else ACCOMPANY_MEASURES
    start = "the melody's entry" if s.get("accompany_from", "melody") == "melody" else "the song's start"
    songs = counted(n, "song")
    head = (f"infill scorecard: {songs}, bars {s['first_bar']}-{s['first_bar'] + s['bars'] - 1}" if infill
            else f"accompany scorecard: {songs}, the bars of {s['seconds']:g} s from {start}, BRIDGE and PIANO "
            "written for the MELODY" + (" and the annotated chords" if s.get("accompany_chords") else ""))
    lines = [head, "| measure (mean) | model | real | chance |", "|---|---|---|---|"]
    for key, label in measures:
        row = [m[side].get(key) for side in ("model", "real", "chance")]
        lines.append(f"| {label} | " + " | ".join(_fmt(x) for x in row) + " |")
    if infill:
        gain = m["model"].get("nll_left", np.nan) - m["model"].get("nll_both", np.nan)
        net = m["model"].get("nll_left_net", np.nan) - m["model"].get("nll_both_net", np.nan)
        lines.append(f"NLL with both edges is {gain:.3f} nats/token lower than with the same left edge alone, as "
                     f"sampled (copy cache {copy_strength(s):g}); {net:.3f} with the network alone")
    return "\n".join(lines)


def copy_strength(settings: dict) -> float:
    """The copy cache's strength a scorecard's settings sampled with."""
    return SamplingOptions.from_mapping(settings).hooks.copy_cache.strength


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "-"
    return f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}"
