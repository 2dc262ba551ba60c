"""The three-model motif table of the README: how much of the seed's motif comes back at 10, 30 and 60 s, each
network alone and with the sampler, beside the real continuation and unconditioned samples.

Reads the ``metrics.json`` of six ``musictx-evaluate mode=motif`` runs (docs/three-models-2026-11.md, "With
the sampler", has the commands), ``<root>/<model>_alone`` and ``<root>/<model>_sampler``:

    python scripts/motif_table.py outputs/compare/motif
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

MODELS = (("mt", "Music Transformer (`piano`)"), ("vanilla", "vanilla Transformer"), ("lstm", "LSTM"))
WINDOW_ENDING_AT = {10: 1, 30: 5, 60: 11}  # the 5 s windows ending 10, 30 and 60 s after the seed


def curve(root: Path, run: str, source: str) -> dict:
    return json.loads((root / run / "metrics.json").read_text())["motif"]["curves"][source]


def cells(c: dict) -> str:
    """'a / b / c' exact motif reuse at 10/30/60 s, then its mean over every window and the near mean."""
    at = " / ".join(f"{c['motif_reuse']['mean'][w]:.3f}" for w in WINDOW_ENDING_AT.values())
    return f"{at} | {np.mean(c['motif_reuse']['mean']):.3f} | {np.mean(c['motif_reuse_near']['mean']):.3f}"


def table(root: Path) -> str:
    lines = ["| model | alone: exact 10 / 30 / 60 s | alone: all windows | alone: near | with the sampler: exact "
             "10 / 30 / 60 s | sampler: all windows | sampler: near |", "|---|---|---|---|---|---|---|"]
    for key, name in MODELS:
        if (root / f"{key}_sampler" / "metrics.json").exists():
            lines.append(f"| {name} | {cells(curve(root, f'{key}_alone', 'continuation'))} | "
                         f"{cells(curve(root, f'{key}_sampler', 'continuation'))} |")
    for source, name in (("real", "real continuation"), ("unconditioned", "unconditioned `piano` (floor)")):
        lines.append(f"| {name} | {cells(curve(root, 'mt_alone', source))} | | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(Path(sys.argv[1] if len(sys.argv) > 1 else "outputs/compare/motif")))
