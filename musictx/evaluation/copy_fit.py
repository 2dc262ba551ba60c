"""Fits the copy cache's mixture weights (`musictx.decoding.hooks.copy_cache.COPY_WEIGHTS`) by likelihood.

For each song, bars ``first_bar``.. are the middle; every id of the real middle is scored by the net (at its
infill prompt) and looked up in the cache over the song's other bars, once with the bars after the middle
and once without (as the infill scorecard's two NLLs). Each bucket of match lengths gets the weight that
makes the pooled ids most likely; the NLLs with the fitted weights are printed beside the net's own.

    python -m musictx.commands.copy_fit --checkpoint pop_infill --data data/pop --split validation --songs 30

Fit on validation songs only: the test split is for the scorecard.

``--task continue`` fits the continuation's weights (`musictx.decoding.hooks.copy_cache.CONTINUE_WEIGHTS`) the same
way: each song's real next ``length_seconds`` after a ``seed_seconds`` seed from ``seed_from`` (the scorecard's
seed), every id scored by the net after the seed and the real ids before it, and looked up in the cache over
the seed (the prompt, ending with the first new Bar id) and the real ids before it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from musictx.checkpoints.model_store import load_model
from musictx.decoding.hooks.copy_cache import (
    CONTINUE_FITTED,
    CONTINUE_WEIGHTS,
    COPY_WEIGHTS,
    cache_lookups,
    loose_ids,
    weight_of,
)
from musictx.decoding.window import context_length
from musictx.evaluation.checks import EvaluateError
from musictx.evaluation.infill_scorecard import middle_log_probs
from musictx.evaluation.run import split_songs
from musictx.evaluation.scoring import plan_windows
from musictx.io.infill_format import InfillIds
from musictx.io.tokenizers import is_metrical
from musictx.tasks.infill import copy_history
from musictx.tasks.metrical_seed import bars_for, metrical_seed
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


def target_log_probs(net, ids: np.ndarray) -> np.ndarray:
    """(T - 1,) the net's log-probability of each of ids[1:] after the ids before it; past the net's context in
    the windows the split's NLL uses (`musictx.evaluation.scoring.plan_windows`, stride half the context)."""
    size = context_length(net) or len(ids)
    out = []
    with torch.no_grad():
        for w in plan_windows(len(ids), size, max(size // 2, 1)):
            x = torch.as_tensor(ids[w.start:w.start + w.length], dtype=torch.long)[None]  # (1, W)
            y = torch.as_tensor(ids[w.start + 1 + w.score_from:w.start + w.length + 1], dtype=torch.long)  # (S,)
            logp = torch.log_softmax(net.eval()(x)[0, w.score_from:].float(), dim=-1)  # (S, V)
            out.append(logp.gather(1, y[:, None])[:, 0].numpy())
    return np.concatenate(out)


def continuation_rows(net, tok, path: Path, seed_seconds: float, seed_from: float, length_seconds: float
                      ) -> list[tuple[bool, float, int, float]]:
    """(True, the net's probability of the real id, longest match, the cache's probability) for every id of
    the song's real continuation after the scorecard's seed (none where the song ends within it)."""
    seed = metrical_seed(tok, path, seed_seconds, seed_from)
    bars = bars_for(seed, length_seconds, None)
    real = seed.bars_after(tok.bar_id, bars + 1)  # one bar more: the song goes on past the continuation
    if np.count_nonzero(real == tok.bar_id) <= bars:
        return []
    real = real[1:np.flatnonzero(real == tok.bar_id)[bars]].astype(np.int64)  # after the first new Bar id
    prompt = np.concatenate([seed.ids, [tok.bar_id]]).astype(np.int64)
    p = np.exp(target_log_probs(net, np.concatenate([prompt, real]))[len(prompt) - 1:])  # (M,)
    lengths, shares = cache_lookups(prompt, real, loose_ids(tok))
    return [(True, float(p[t]), int(lengths[t]), float(shares[t])) for t in range(len(real))]


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


def copy_model(checkpoint: str, task: str):
    """(net, tokenizer) of ``checkpoint``, or EvaluateError when it cannot be fitted for ``task``: the copy cache
    works on a metrical model's bars, and the infill weights on the infill format's prompt."""
    net, tok, _ = load_model(checkpoint)
    if not is_metrical(tok):
        wanted = "pop_infill" if task == "infill" else "pop"
        raise EvaluateError(f"--checkpoint {checkpoint}: a Performance-event model; the copy cache copies a metrical "
                            f"(REMI) model's bars (--checkpoint {wanted})")
    if task == "infill":
        try:
            InfillIds.of(tok)
        except ValueError as err:
            raise EvaluateError(f"--checkpoint {checkpoint}: --task infill needs a model fine-tuned on the infill "
                                f"format (--checkpoint pop_infill; --task continue fits a plain one): {err}") from None
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


def run_continue(checkpoint: str, data: Path, split: str, songs: slice) -> list[tuple[int, float]]:
    """The continuation's weights on the songs ``songs`` of the split (the scorecard's seed: 10 s from 25 s,
    30 s after it)."""
    paths = chosen_songs(data, split, songs)  # before the model loads
    net, tok = copy_model(checkpoint, "continue")
    rows = fit_rows([r for path in tqdm(paths, desc="songs") for r in continuation_rows(net, tok, path, 10, 25, 30)],
                    paths)
    weights = fit(rows, [lo for lo, _ in CONTINUE_FITTED])
    print(f"{len(paths)} songs, {len(rows)} ids; fitted (shortest match, weight):",
          ", ".join(f"({lo}, {w:.2f})" for lo, w in weights))
    counts = np.bincount(np.searchsorted([lo for lo, _ in weights], rows[:, 2], side="right") - 1)
    print("ids per bucket:", dict(zip([lo for lo, _ in weights], counts.tolist(), strict=False)))
    for name, table in (("the net alone", [(0, 0.0)]), ("the shipped fit", CONTINUE_FITTED),
                        ("the sampler's (matches >= 8 ids)", CONTINUE_WEIGHTS), ("fitted now", weights)):
        print(f"{name}: NLL {nll(rows, table):.4f} nats/token")
    return weights


def run(checkpoint: str, data: Path, split: str, songs: slice, first_bar: int, bars: int) -> list[tuple[int, float]]:
    """The infill copy cache's weights on the songs ``songs`` of the split (bars ``first_bar``.. filled)."""
    paths = chosen_songs(data, split, songs)  # before the model loads
    net, tok = copy_model(checkpoint, "infill")
    rows = fit_rows([r for path in tqdm(paths, desc="songs") for r in song_rows(net, tok, path, first_bar, bars)],
                    paths)
    weights = fit(rows, [lo for lo, _ in COPY_WEIGHTS])
    both, left = rows[rows[:, 0] == 1], rows[rows[:, 0] == 0]
    print("fitted (shortest match, weight):", ", ".join(f"({lo}, {w:.2f})" for lo, w in weights))
    for name, table in (("the net alone", [(0, 0.0)]), ("shipped weights", COPY_WEIGHTS), ("fitted weights", weights)):
        print(f"{name}: NLL both edges {nll(both, table):.4f}, left only {nll(left, table):.4f}, "
              f"gain {nll(left, table) - nll(both, table):.4f} nats/token")
    return weights


if __name__ == "__main__":  # the command moved: its old line must not end quietly with status 0
    from musictx.console.moved import moved

    moved("musictx.evaluation.copy_fit")
