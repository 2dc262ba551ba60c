"""Motif memory: does a model keep the seed's motif as it plays on? (``musictx-evaluate mode=motif``)

The case for relative attention in music is that a model able to look at "the same figure two bars ago"
keeps a motif longer than an LSTM or plain attention, which drift away from it. Likelihood does not show
this, so it is measured directly, as a *forgetting curve*:

1. Motif. The seed's notes are read as one line (onsets closer than ``CHORD_SECONDS`` form a chord, read
   low to high) and cut into n-grams of pitch intervals (transposition-invariant), alone or paired with
   the bin of the inter-onset interval (rhythm). The seed's motif is the set of its n-grams that occur at
   least twice in it; `motif_score` is the share of the seed's notes inside such a repeat (with rhythm).
2. Seeds. `pick_motif_seeds` keeps the N pieces of a split whose first ``seed_seconds`` score highest
   (optionally also seeds later in the pieces, and at most a few per folder, i.e. per work);
   `seed_from_file` makes a user's MIDI file the one seed, continued N times.
3. Curve. What follows the seed is cut into windows (``window_seconds``); in each, the share of the motif's
   n-grams that come back (with and without rhythm, and "near": each interval within ``NEAR_SEMITONES``,
   which also counts a motif sequenced inside a key, where a major second becomes a minor one; and
   "figure": only each interval's direction, with rhythm, so that the figure played on another chord, a
   broken chord with its intervals changed, counts as a listener hears it; chance is higher here, so read
   it against the floor) and the pitch-class and IOI total-variation distances to the seed. The real
   continuation is the ceiling, unconditioned samples (which never heard the seed) the floor; each curve
   is a mean over seeds with a 95% band (mean +- 1.96 sd / sqrt(n)).

An empty window (the sample stopped, or a long rest) counts as forgotten: reuse 0, distances 1. Every
sequence ends at ``length_seconds``, so the n-grams starting in the last window's final notes are lost
alike for model, ceiling and floor. Matching is exact: on performed piano (data/piano test split) the real
continuations bring back only a few percent of the seed's 4-grams per 5 s window, unrelated music ~0.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path, PurePosixPath

import numpy as np

from musictx.decoding import GenerateError, SamplingOptions, context_length
from musictx.evaluation.continuation import notes_between
from musictx.evaluation.metrics import ioi_histogram, pitch_class_histogram, tv_distance
from musictx.io.midi_io import Notes
from musictx.tasks import Seed, cut_at_seconds, piece_notes, sample_continuations, seed_from_midi, unconditional_seed

CHORD_SECONDS = 0.035  # onsets closer than this are one chord (performed chords spread over ~30 ms)
# Inter-onset bins for rhythm n-grams: 0 = same chord, then octave (x2) bins from 35 ms to 4.5 s. Octaves,
# not finer, because performed timing wanders (finer bins halved the real continuations' rhythm reuse on
# the piano test split); absolute rather than ratios of successive IOIs, because a continuation keeps the
# tempo and a ratio doubles the jitter.
RHYTHM_EDGES = np.concatenate([[0.0], CHORD_SECONDS * 2.0 ** np.arange(8), [np.inf]])
# A motif moved along a scale (a sequence) changes some intervals by a semitone; exact matching misses it.
NEAR_SEMITONES = 1
METRICS = (("motif_reuse", "motif reuse"), ("motif_reuse_rhythm", "motif reuse + rhythm"),
           ("motif_reuse_near", f"motif reuse, intervals +-{NEAR_SEMITONES}"),
           ("figure_reuse", "figure: contour + rhythm"),
           ("pitch_class_tv", "pitch-class dist. to seed"), ("ioi_tv", "IOI dist. to seed"))
SOURCES = (("continuation", "model"), ("real", "real (ceiling)"), ("unconditioned", "unconditioned (floor)"))
Z95 = 1.96


# ----- motifs in a note sequence ----------------------------------------------------------------------
def read_line(notes: Notes) -> tuple[np.ndarray, np.ndarray]:
    """(pitch, onset) of the notes as one line: by onset, chords snapped to their first onset and read
    low to high, so that a chord's spread does not shuffle its intervals."""
    order = np.lexsort((notes.pitch, notes.start))
    start, pitch = notes.start[order], notes.pitch[order]
    onset = start.copy()
    for i in range(1, len(onset)):
        if start[i] - onset[i - 1] < CHORD_SECONDS:
            onset[i] = onset[i - 1]
    order = np.lexsort((pitch, onset))
    return pitch[order], onset[order]


def ngrams(notes: Notes, size: int = 4, rhythm: bool = False, contour: bool = False) -> tuple[list[tuple], np.ndarray]:
    """The interval n-grams of ``notes`` in order, and the onset of each one's first note. With ``rhythm``
    each interval is paired with the RHYTHM_EDGES bin of the time to the next onset; with ``contour`` an
    interval is only its direction (-1, 0, +1)."""
    pitch, onset = read_line(notes)
    if len(pitch) <= size:
        return [], np.zeros(0)
    steps = np.diff(pitch)
    symbols: list = (np.sign(steps) if contour else steps).tolist()
    if rhythm:
        symbols = list(zip(symbols, (np.digitize(np.diff(onset), RHYTHM_EDGES) - 1).tolist(), strict=True))
    keys = [tuple(symbols[i:i + size]) for i in range(len(symbols) - size + 1)]
    return keys, onset[:len(keys)]


def is_trivial(key: tuple) -> bool:
    """Repeated notes, trills and broken octaves (period 1 or 2) repeat in any music; not motifs."""
    intervals = [s[0] if isinstance(s, tuple) else s for s in key]
    return all(i == 0 for i in intervals) or (len(key) > 2 and all(key[i] == key[i + 2] for i in range(len(key) - 2)))


def seed_motif(seed: Notes, size: int = 4, rhythm: bool = False, contour: bool = False) -> set[tuple]:
    """The n-grams that occur at least twice in the seed (trivial ones left out); a seed with no repeat
    (a user's file) falls back to all its n-grams, so that reuse stays defined."""
    counts = Counter(k for k in ngrams(seed, size, rhythm, contour)[0] if not is_trivial(k))
    return {k for k, c in counts.items() if c >= 2} or set(counts)


def motif_score(seed: Notes, size: int = 4) -> float:
    """Share of the seed's notes that lie in an occurrence of a repeated (non-trivial) n-gram with rhythm:
    0 for a seed without a repeat, 1 for a motif played over and over."""
    keys, _ = ngrams(seed, size, rhythm=True)
    if not keys:
        return 0.0
    counts = Counter(keys)
    covered = np.zeros(len(keys) + size, dtype=bool)  # one slot per note of the line
    for i, key in enumerate(keys):
        if counts[key] >= 2 and not is_trivial(key):
            covered[i:i + size + 1] = True
    return float(covered.mean())


def near_share(motif: set[tuple], seen: set[tuple], tolerance: int = NEAR_SEMITONES) -> float:
    """Share of the ``motif``'s interval n-grams with an n-gram in ``seen`` whose every interval is within
    ``tolerance`` semitones of it (0: exact matching)."""
    if not motif or not seen:
        return 0.0
    want, have = np.array(sorted(motif)), np.array(sorted(seen))  # (M, n), (S, n)
    close = (np.abs(want[:, None, :] - have[None, :, :]) <= tolerance).all(axis=-1)  # (M, S)
    return float(close.any(axis=1).mean())


# ----- the curve of one sequence ----------------------------------------------------------------------
def window_edges(length_seconds: float, window_seconds: float) -> list[tuple[float, float]]:
    """Consecutive windows covering [0, length_seconds); the last may be shorter."""
    n = max(math.ceil(length_seconds / window_seconds - 1e-9), 1)
    return [(k * window_seconds, min((k + 1) * window_seconds, length_seconds)) for k in range(n)]


def notes_in(notes: Notes, start: float, end: float) -> Notes:
    keep = (notes.start >= start - 1e-9) & (notes.start < end - 1e-9)
    return Notes(notes.start[keep], notes.end[keep], notes.pitch[keep], notes.velocity[keep])


def window_curve(seed: Notes, after: Notes, windows: list[tuple[float, float]], size: int = 4) -> dict[str, list]:
    """Per window of ``after`` (the notes after the seed, time 0 = where the seed ends): motif reuse with and
    without rhythm, near, and of the figure (directions + rhythm); pitch-class and IOI distance to the seed;
    notes per second. An n-gram belongs to the window of its first note, so a motif straddling a window edge
    still counts."""
    out: dict[str, list] = {key: [] for key, _ in METRICS} | {"notes_per_s": []}
    for rhythm, contour, key in ((False, False, "motif_reuse"), (True, False, "motif_reuse_rhythm"),
                                 (True, True, "figure_reuse")):
        motif = seed_motif(seed, size, rhythm, contour)
        keys, starts = ngrams(after, size, rhythm, contour)
        for a, b in windows:
            seen = {k for k, s in zip(keys, starts, strict=True) if a - 1e-9 <= s < b - 1e-9}
            out[key].append(len(motif & seen) / len(motif) if motif else 0.0)
            if key == "motif_reuse":
                out["motif_reuse_near"].append(near_share(motif, seen))
    pc_seed, ioi_seed = pitch_class_histogram(seed), ioi_histogram(seed)
    for a, b in windows:
        part = notes_in(after, a, b)
        out["pitch_class_tv"].append(tv_distance(pitch_class_histogram(part), pc_seed))
        out["ioi_tv"].append(tv_distance(ioi_histogram(part), ioi_seed))
        out["notes_per_s"].append(len(part) / (b - a))
    return out


def summarise(rows: list[dict[str, list]]) -> dict[str, dict[str, list]]:
    """Mean and 95% band per window of each metric over the rows (one row per seed); values kept so that
    runs can be pooled or bootstrapped later."""
    out = {}
    for key in rows[0]:
        values = np.asarray([r[key] for r in rows], dtype=float)  # (n_seeds, n_windows)
        mean = values.mean(axis=0)
        half = Z95 * values.std(axis=0, ddof=1) / math.sqrt(len(values)) if len(values) > 1 else 0 * mean
        out[key] = {"mean": mean.tolist(), "lo": (mean - half).tolist(), "hi": (mean + half).tolist(),
                    "values": values.tolist()}
    return out


# ----- seeds ------------------------------------------------------------------------------------------
@dataclass
class MotifSeed:
    """A seed to continue and what really followed it (``ids`` runs past the seed; None: nothing known)."""

    seed: Seed
    score: float
    name: str
    ids: np.ndarray | None = None

    def real_after(self, tok, length_seconds: float) -> Notes | None:
        """The notes that really followed the seed, time 0 = where it ends."""
        if self.ids is None:
            return None
        return notes_between(tok, self.ids, self.seed.seconds, self.seed.seconds + length_seconds)


def seed_group(name: str) -> str:
    """The folder of a piece's file (a work in ASAP-style trees, where performances of one work share a
    folder); a file without a folder is its own group."""
    parent = PurePosixPath(name).parent
    return name if str(parent) == "." else str(parent)


def _candidates(tok, ids: np.ndarray, seed_s: float, length_s: float, stride_s: float | None, size: int):
    """(score, start second) of each candidate seed of one piece: its opening, or with ``stride_s`` one
    every ``stride_s`` seconds, as long as seed + continuation fit in the piece."""
    spare = tok.split_time_shifts(ids)[2] * tok.config.time_step - seed_s - length_s
    if spare < -1e-9:
        return []
    starts = np.arange(0.0, spare + 1e-9, stride_s) if stride_s else np.zeros(1)
    notes = tok.decode_notes(cut_at_seconds(tok, ids, float(starts[-1]) + seed_s))  # only what seeds need
    out = []
    for t0 in starts.tolist():
        seed = notes_in(notes, t0, t0 + seed_s)
        if len(seed) >= 2 * (size + 1):
            out.append((motif_score(seed, size), t0))
    return out


def _motif_seed(tok, ids: np.ndarray, t0: float, seed_s: float, length_s: float, score: float,
                name: str) -> MotifSeed:
    """The seed starting ``t0`` s into a piece and the piece's next ``length_s`` s. Past the opening the
    notes are re-encoded from ``t0`` (training windows start anywhere in a piece too, so such a prompt is
    in-distribution); notes struck before ``t0`` are left out."""
    if t0 > 0:
        notes = notes_in(tok.decode_notes(cut_at_seconds(tok, ids, t0 + seed_s + length_s)), t0, np.inf)
        ids = tok.encode_notes(Notes(notes.start - t0, notes.end - t0, notes.pitch, notes.velocity))
        name = f"{name}@{t0:g}s"
    piece = cut_at_seconds(tok, ids, seed_s + length_s)
    return MotifSeed(Seed(cut_at_seconds(tok, piece, seed_s), seed_s, name), score, name, piece)


def pick_motif_seeds(arrays, tok, n: int, seed_seconds: float, length_seconds: float, size: int = 4,
                     min_score: float = 0.0, stride_seconds: float | None = None,
                     max_per_group: int | None = None) -> list[MotifSeed]:
    """The ``n`` seeds of a split (`musictx.io.token_store.TokenArrays`) with the clearest repeating motif,
    best first (ties: split order, then time). Candidates are the pieces' first ``seed_seconds`` (or,
    with ``stride_seconds``, a seed every that many seconds), with two n-grams' worth of notes and room
    for the real continuation (the ceiling). ``max_per_group`` caps the seeds from one folder, so that
    performances of one work do not fill the list with the same music."""
    found = []
    for i in range(len(arrays)):
        ids = np.asarray(arrays.piece(i), dtype=np.int64)
        found += [(-score, i, t0) for score, t0 in _candidates(tok, ids, seed_seconds, length_seconds,
                                                                stride_seconds, size) if score >= min_score]
    picked, per_group = [], Counter()
    for neg_score, i, t0 in sorted(found):
        name = arrays.files[i] if arrays.files else str(i)
        if len(picked) == n:
            break
        if max_per_group is not None and per_group[seed_group(name)] >= max_per_group:
            continue
        per_group[seed_group(name)] += 1
        ids = np.asarray(arrays.piece(i), dtype=np.int64)
        picked.append(_motif_seed(tok, ids, t0, seed_seconds, length_seconds, -neg_score, name))
    return picked


def seed_from_file(tok, path: str, seed_seconds: float, length_seconds: float, size: int = 4) -> MotifSeed:
    """A user's MIDI file as the seed; its own music after ``seed_seconds`` is the ceiling when it lasts."""
    whole = seed_from_midi(tok, path)
    seed = seed_from_midi(tok, path, seed_seconds)
    notes = tok.decode_notes(seed.ids)
    if len(notes) <= size:
        raise ValueError(f"motif.seed_midi={path}: {len(notes)} notes in its first {seed_seconds:g} s; an "
                         f"interval {size}-gram needs {size + 1}")
    long_enough = whole.seconds >= seed.seconds + length_seconds - 1e-9
    return MotifSeed(seed, motif_score(notes, size), Path(path).name, whole.ids if long_enough else None)


# ----- the evaluation -----------------------------------------------------------------------------------
# The keys of conf/evaluate.yaml's `motif:` block besides its sampling ones (`SamplingOptions`); their
# defaults are written in the YAML only.
KEYS = ("num_seeds", "seed_midi", "seed_seconds", "length_seconds", "window_seconds", "ngram", "min_score",
        "stride_seconds", "max_per_group", "max_tokens")


def motif_sampling(s: dict) -> SamplingOptions:
    """The sampling options of a ``motif:`` block (missing or unresolved ones: the defaults), checked: a bad
    one raises ValueError naming ``motif.<option>``."""
    sampling = SamplingOptions.from_mapping(s)
    try:
        sampling.check_sampling()
    except GenerateError as err:
        raise ValueError(f"motif.{err}") from None
    return sampling


def _sample(net, tok, seed: Seed, sampling: SamplingOptions, s: dict, num_samples: int) -> list:
    return sample_continuations(net, tok, seed, sampling, num_samples=num_samples,
                                length_seconds=float(s["length_seconds"]), max_tokens=int(s["max_tokens"]))


def _seeds(tok, arrays, s: dict) -> list[MotifSeed]:
    """One entry per continuation: N split pieces, or the user's file N times."""
    n, size = int(s["num_seeds"]), int(s["ngram"])
    seed_s, length_s = float(s["seed_seconds"]), float(s["length_seconds"])
    if s["seed_midi"]:
        return [seed_from_file(tok, str(s["seed_midi"]), seed_s, length_s, size)] * n
    seeds = pick_motif_seeds(arrays, tok, n, seed_s, length_s, size, float(s["min_score"]),
                             s["stride_seconds"], s["max_per_group"])
    if not seeds:
        raise ValueError(f"no piece in {arrays.dir} [{arrays.split}] lasts seed_seconds + length_seconds = "
                         f"{seed_s + length_s:g} s with {2 * (size + 1)} notes and a motif score >= {s['min_score']}")
    return seeds


def _context_full_at(tok, net, seed: Seed, new_ids: np.ndarray) -> float | None:
    """Seconds after the seed at which seed + continuation fill the model's context (the first slide);
    None when they never do (or the net has no context limit)."""
    max_len = context_length(net)
    if max_len is None or len(seed.ids) + len(new_ids) <= max_len:
        return None
    return tok.split_time_shifts(new_ids[:max(max_len - len(seed.ids), 0)])[2] * tok.config.time_step


def _continue(net, tok, seeds: list[MotifSeed], s: dict, sampling: SamplingOptions) -> tuple[list, Seed, list]:
    """(continuation ids per seed, the unconditioned prompt, one unconditioned sample per seed)."""
    if s["seed_midi"]:  # one prompt: its N continuations are one batch
        conts = _sample(net, tok, seeds[0].seed, sampling, s, len(seeds))
    else:
        conts = [_sample(net, tok, m.seed, replace(sampling, seed=sampling.seed + k), s, 1)[0]
                 for k, m in enumerate(seeds)]
    free_seed = unconditional_seed(tok)
    return conts, free_seed, _sample(net, tok, free_seed, sampling, s, len(seeds))


def _curve_rows(tok, seeds: list[MotifSeed], conts: list, free_seed: Seed, free: list, windows: list,
                size: int, length: float) -> dict[str, list]:
    """Per source, one `window_curve` per continuation (the ceiling once per distinct seed)."""
    unique = list({id(m): m for m in seeds}.values())
    seed_notes = {id(m): tok.decode_notes(m.seed.ids) for m in unique}
    rows: dict[str, list] = {"continuation": [], "real": [], "unconditioned": []}
    for m, new, free_ids in zip(seeds, conts, free, strict=True):
        model_after = piece_notes(tok, m.seed, new, include_seed=False)
        free_after = piece_notes(tok, free_seed, free_ids, include_seed=False)
        rows["continuation"].append(window_curve(seed_notes[id(m)], model_after, windows, size))
        rows["unconditioned"].append(window_curve(seed_notes[id(m)], free_after, windows, size))
    for m in unique:
        real = m.real_after(tok, length)
        if real is not None:
            rows["real"].append(window_curve(seed_notes[id(m)], real, windows, size))
    return rows


def evaluate_motif(net, tok, arrays, cfg: dict, device=None) -> dict:
    """Forgetting curves of ``net`` (model, real continuation, unconditioned samples) over motif seeds.

    ``cfg``: the ``motif:`` block of conf/evaluate.yaml as a dict, every key of `KEYS` given (the YAML's
    block, e.g. ``musictx.evaluation.run.evaluation_options(motif={...}).motif``); sampling keys missing or
    unresolved take the `SamplingOptions` defaults. ``arrays``: the split to draw seeds from (unused with
    ``seed_midi``). ``device`` is not used (sampling runs where ``net`` is); it stays for callers that pass it."""
    missing = [key for key in KEYS if key not in cfg]
    if missing:
        raise ValueError(f"motif: no {', '.join(missing)}; evaluate.yaml's motif block has every key")
    sampling = motif_sampling(cfg)
    s = {**cfg, **{k: v for k, v in asdict(sampling).items() if k in cfg}}  # as sampled: references resolved
    size, length = int(s["ngram"]), float(s["length_seconds"])
    seeds = _seeds(tok, arrays, s)
    windows = window_edges(length, float(s["window_seconds"]))
    conts, free_seed, free = _continue(net, tok, seeds, s, sampling)
    rows = _curve_rows(tok, seeds, conts, free_seed, free, windows, size, length)
    full_at = [_context_full_at(tok, net, m.seed, new) for m, new in zip(seeds, conts, strict=True)]
    past = [t for t in full_at if t is not None]
    unique = list({id(m): m for m in seeds}.values())
    return {"seeds": [m.name for m in unique], "motif_scores": [m.score for m in unique],
            "seed_seconds": [m.seed.seconds for m in unique], "samples": len(seeds), "length_seconds": length,
            "window_seconds": float(s["window_seconds"]), "ngram": size, "windows": [list(w) for w in windows],
            "settings": s, "context": context_length(net), "context_full_s": full_at,
            "share_past_context": len(past) / len(full_at),
            "context_full_mean_s": float(np.mean(past)) if past else None,
            "curves": {key: summarise(r) for key, r in rows.items() if r},
            # what was played, so that other measures can be taken later without sampling again
            "sample_ids": {"continuation": [c.tolist() for c in conts], "unconditioned": [f.tolist() for f in free]}}


# ----- report -----------------------------------------------------------------------------------------
def format_motif_table(res: dict) -> str:
    """Markdown table, one row per window; each cell is model / real (ceiling) / unconditioned (floor)."""
    curves = res["curves"]
    sources = [key for key, _ in SOURCES if key in curves]
    full = res["context_full_mean_s"]
    lines = [f"\nMotif memory: {res['samples']} continuations of {len(res['seeds'])} seed(s) (motif score "
             f"{min(res['motif_scores']):.2f}-{max(res['motif_scores']):.2f}), {res['length_seconds']:g} s each, "
             f"interval {res['ngram']}-grams; cells: " + " / ".join(label for key, label in SOURCES if key in curves),
             f"context {res['context']} tokens, filled in {res['share_past_context']:.0%} of the continuations"
             + (f", on average {full:.1f} s after the seed" if full is not None else ""),
             "| window (s after seed) | " + " | ".join(label for _, label in METRICS) + " |",
             "|---|" + "---|" * len(METRICS)]
    for w, (a, b) in enumerate(res["windows"]):
        cells = [" / ".join(f"{curves[src][key]['mean'][w]:.3f}" for src in sources) for key, _ in METRICS]
        lines.append(f"| {a:g}-{b:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
