"""Fits the copy cache's mixture weights (`musictx.decoding.hooks.copy_cache.COPY_WEIGHTS`) by likelihood.

For each song, bars ``first_bar``.. are the middle; every id of the real middle is scored by the net (at its
infill prompt) and looked up in the cache over the song's other bars, once with the bars after the middle
and once without (as the infill scorecard's two NLLs). Each bucket of match lengths gets the weight that
makes the pooled ids most likely; the NLLs with the fitted weights are printed beside the net's own.

    python -m bench copy_fit --checkpoint pop_infill --data data/pop --split validation --songs 30

Fit on validation songs only: the test split is for the scorecard.

A study, not part of the installed package: run from the repository's root. (The continuation's own fit, for
a copy cache in task=continue, went with that option; docs/two-sample-2026-11.md keeps its numbers.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm import tqdm

from musictx.checkpoints.model_store import load_model
from musictx.console.args import COUNT, OneLineParser, number
from musictx.decoding.hooks.copy_cache import (
    COPY_WEIGHTS,
    cache_lookups,
    loose_ids,
    weight_of,
)
from musictx.evaluation.checks import EvaluateError
from musictx.evaluation.infill_scorecard import middle_log_probs
from musictx.evaluation.run import split_songs
from musictx.io.infill_format import InfillIds
from musictx.io.tokenizers import is_metrical
from musictx.tasks.infill import copy_history
from musictx.tasks.song_bars import read_song

GRID = np.linspace(0.0, 0.99, 100)


def song_rows(net, tok, path: Path, first_bar: int, bars: int) -> list[tuple[bool, float, int, float]]:
    """(with the right side, the net's probability of the real id, longest match, the cache's probability)
    for every id of the song's real middle, with and without the bars after it."""
    song = read_song(tok, path)
    s = min(first_bar - 1, song.n_bars - bars - 1)
    rows = []
    for right in (True, False):
        logp, targets = middle_log_probs(net, tok, song, s, s + bars, True, keep_right=right)
        lengths, shares = cache_lookups(copy_history(tok, song, s, s + bars, None, right), targets, loose_ids(tok))
        p = np.exp(logp[np.arange(len(targets)), targets])
        rows += [(right, float(p[t]), int(lengths[t]), float(shares[t])) for t in range(len(targets))]
    return rows


def fit(rows: np.ndarray, shortest: list[int]) -> list[tuple[int, float]]:
    """The likeliest weight for each bucket [shortest[i], shortest[i + 1]) of match lengths."""
    p, k, q = rows[:, 1], rows[:, 2], rows[:, 3]
    out = []
    for lo, hi in zip(shortest, [*shortest[1:], np.inf], strict=True):
        m = (k >= lo) & (k < hi)
        scores = [np.log((1 - w) * p[m] + w * q[m] + 1e-30).sum() for w in GRID]
        out.append((lo, float(GRID[int(np.argmax(scores))]) if m.any() else 0.0))
    return out


def nll(rows: np.ndarray, weights: list[tuple[int, float]]) -> float:
    w = np.array([weight_of(int(k), weights) for k in rows[:, 2]])
    return float(-np.log((1 - w) * rows[:, 1] + w * rows[:, 3] + 1e-30).mean())


def copy_model(checkpoint: str):
    """(net, tokenizer) of ``checkpoint``, or EvaluateError when its copy cache cannot be fitted: the copy cache
    works on a metrical model's bars, and its weights on the infill format's prompt."""
    net, tok, _ = load_model(checkpoint)
    if not is_metrical(tok):
        raise EvaluateError(f"--checkpoint {checkpoint}: a Performance-event model; the copy cache copies a metrical "
                            "(REMI) model's bars (--checkpoint pop_infill)")
    try:
        InfillIds.of(tok)
    except ValueError as err:
        raise EvaluateError(f"--checkpoint {checkpoint}: the fit needs a model fine-tuned on the infill format "
                            f"(--checkpoint pop_infill): {err}") from None
    return net, tok


def chosen_songs(data: Path, split: str, songs: slice) -> list[Path]:
    """The split's songs ``songs`` picks, or EvaluateError when it picks none (``--skip`` past the split's end)."""
    paths = split_songs(data, split)
    if not paths[songs]:
        raise EvaluateError(f"--data {data} --split {split}: --skip {songs.start} leaves none of its {len(paths)} "
                            "song(s); lower --skip")
    return paths[songs]


def fit_rows(rows: list, paths: list[Path]) -> np.ndarray:
    """``rows`` as an (N, 4) array, or EvaluateError when the songs gave no id to fit on."""
    if not rows:
        raise EvaluateError(f"the {len(paths)} song(s) chosen, from {paths[0]}, gave no id to fit the weights on "
                            "(each ends before its bars or its continuation); choose more songs (--songs, --skip)")
    return np.array(rows)


def run(checkpoint: str, data: Path, split: str, songs: slice, first_bar: int, bars: int) -> list[tuple[int, float]]:
    """The infill copy cache's weights on the songs ``songs`` of the split (bars ``first_bar``.. filled)."""
    paths = chosen_songs(data, split, songs)  # before the model loads
    net, tok = copy_model(checkpoint)
    rows = fit_rows([r for path in tqdm(paths, desc="songs") for r in song_rows(net, tok, path, first_bar, bars)],
                    paths)
    weights = fit(rows, [lo for lo, _ in COPY_WEIGHTS])
    both, left = rows[rows[:, 0] == 1], rows[rows[:, 0] == 0]
    print("fitted (shortest match, weight):", ", ".join(f"({lo}, {w:.2f})" for lo, w in weights))
    for name, table in (("the net alone", [(0, 0.0)]), ("shipped weights", COPY_WEIGHTS), ("fitted weights", weights)):
        print(f"{name}: NLL both edges {nll(both, table):.4f}, left only {nll(left, table):.4f}, "
              f"gain {nll(left, table) - nll(both, table):.4f} nats/token")
    return weights


def main(argv=None) -> None:
    ap = OneLineParser(prog="python -m bench copy_fit", description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="pop_infill")
    ap.add_argument("--data", type=Path, default=Path("data/pop"))
    ap.add_argument("--split", default="validation")
    ap.add_argument("--songs", type=number(int, low=0), default=30,
                    help="songs fitted on (after --skip); 0: all the rest")
    ap.add_argument("--first-bar", type=COUNT, default=17)
    ap.add_argument("--bars", type=COUNT, default=4)
    ap.add_argument("--skip", type=number(int, low=0), default=0, help="the split's first songs left out of the fit")
    a = ap.parse_args(argv)
    run(a.checkpoint, a.data, a.split, slice(a.skip, a.skip + a.songs if a.songs else None), a.first_bar, a.bars)
