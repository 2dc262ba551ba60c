"""The motif claim, paired by seed (issue 64, item 3): does the Music Transformer restate its seed's motif more
often than the vanilla Transformer and the LSTM, and how near the real continuation does it come?

Reads ``<root>/<net>_<arm>_s<k>/metrics.json``: ``musictx-evaluate mode=motif`` runs of each network (``mt``,
``vanilla``, ``lstm``), ``alone`` (note echo off) or with the ``sampler`` (recall guidance on), sampled from
``motif.seed=k`` (one sample a seed each; docs/piano-paper-size.md has the commands). The samples of one seed are
averaged, then differences are bootstrapped over the seeds (10,000 resamples, 95% percentile interval):

    python scripts/motif_paired.py outputs/w2/motif [--arm alone] [--measure motif_reuse_near]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from motif_table import WINDOW_ENDING_AT

NETS = (("mt", "Music Transformer"), ("vanilla", "vanilla Transformer"), ("lstm", "LSTM"))
ENDING_AT = {**{f"{s} s": [w] for s, w in WINDOW_ENDING_AT.items()}, "all": list(range(12))}  # the 5 s windows
RESAMPLES = 10_000


def per_seed(root: Path, net: str, arm: str, source: str = "continuation", measure: str = "motif_reuse"
             ) -> tuple[np.ndarray, list[str]]:
    """(seeds, windows) motif reuse, the samples of each seed averaged; and the seeds' names (to check pairing)."""
    runs = sorted(root.glob(f"{net}_{arm}_s*/metrics.json"))
    if not runs:
        raise FileNotFoundError(f"no {net}_{arm}_s*/metrics.json under {root}")
    values, names = [], None
    for run in runs:
        motif = json.loads(run.read_text())["motif"]
        if names is not None and motif["seeds"] != names:
            raise ValueError(f"{run} continues other seeds than {runs[0]}")
        names = motif["seeds"]
        values.append(np.asarray(motif["curves"][source][measure]["values"], dtype=float))
    return np.mean(values, axis=0), names  # (n_seeds, n_windows)


def interval(diff: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean of paired differences (one per seed)."""
    picks = rng.integers(0, len(diff), size=(RESAMPLES, len(diff)))
    means = diff[picks].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def table(root: Path, arm: str, measure: str = "motif_reuse") -> str:
    rng = np.random.default_rng(0)
    reuse = {net: per_seed(root, net, arm, measure=measure) for net, _ in NETS}
    real, real_names = per_seed(root, "mt", arm, source="real", measure=measure)
    if any(names != real_names for _, names in reuse.values()):
        raise ValueError("the networks' runs continue different seeds")
    lines = [f"| {arm}: window ending | " + " | ".join(name for _, name in NETS) + " | real | MT - vanilla "
             "(95% CI) | MT - LSTM (95% CI) | MT / real |", "|---" * 7 + "|---|"]
    for label, cols in ENDING_AT.items():
        mean = {net: reuse[net][0][:, cols].mean(axis=1) for net, _ in NETS}  # (n_seeds,)
        r = real[:, cols].mean(axis=1)
        cells = [f"{mean[net].mean():.3f}" for net, _ in NETS] + [f"{r.mean():.3f}"]
        for base in ("vanilla", "lstm"):
            d = mean["mt"] - mean[base]
            lo, hi = interval(d, rng)
            cells.append(f"{d.mean():+.3f} ({lo:+.3f} to {hi:+.3f})")
        cells.append(f"{mean['mt'].mean() / r.mean():.2f}" if r.mean() > 0 else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", type=Path)
    p.add_argument("--arm", default="alone", choices=("alone", "sampler"))
    p.add_argument("--measure", default="motif_reuse", choices=("motif_reuse", "motif_reuse_near"),
                   help="exact interval 4-grams (any transposition), or each interval within a semitone")
    args = p.parse_args()
    try:
        print(table(args.root, args.arm, args.measure))
    except (FileNotFoundError, ValueError) as err:
        p.exit(1, f"motif_paired.py: error: {err}\n")
