"""The paper's comparison at its size as one table (issue 64): each network's GPU run (card, minutes, tokens),
its NLL per token and per note on the validation and test splits, and its motif reuse alone at 30 and 60 s.

Reads the runs' ``train.json`` (as `scripts/import_pop_large.py` leaves them beside each model folder), the
``musictx-evaluate mode=nll`` runs ``<nll>/<name>_<split>/metrics.json`` and the motif runs that
`scripts/motif_paired.py` reads (docs/piano-paper-size.md has the commands):

    python scripts/paper_table.py --runs carry/paper_w2 --nll outputs/w2/nll --motif outputs/w2/motif
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from motif_paired import ENDING_AT, per_seed

NETS = (("paper_mt", "mt", "Music Transformer (relative attention)"), ("paper_vanilla", "vanilla",
        "vanilla Transformer"), ("paper_lstm", "lstm", "LSTM (Performance RNN's shape)"))
AT_30, AT_60 = ENDING_AT["30 s"][0], ENDING_AT["60 s"][0]  # the 5 s windows ending 30 and 60 s after the seed


def nll_cells(root: Path, name: str) -> list[str]:
    cells = []
    for split in ("validation", "test"):
        path = root / f"{name}_{split}" / "metrics.json"
        nll = json.loads(path.read_text())["nll"] if path.exists() else None
        cells += [f"{nll['nll']:.3f}", f"{nll['nll_per_note']:.2f}"] if nll else ["-", "-"]
    return cells


def motif_cells(root: Path, key: str, source: str = "continuation") -> str:
    """'exact 30 / 60 s | near 30 / 60 s' (near: each interval within a semitone)."""
    cells = []
    for measure in ("motif_reuse", "motif_reuse_near"):
        try:
            reuse, _ = per_seed(root, key, "alone", source, measure)
        except FileNotFoundError:  # not measured
            return "- | -"
        cells.append(f"{reuse[:, AT_30].mean():.3f} / {reuse[:, AT_60].mean():.3f}")
    return " | ".join(cells)


def table(runs: Path, nll: Path, motif: Path) -> str:
    lines = ["| network | parameters | tokens seen | H200 minutes | validation nats/token | nats/note | test "
             "nats/token | nats/note | motif alone, 30 / 60 s | near |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for name, key, label in NETS:
        record = json.loads((runs / name / "train.json").read_text())
        last = record["history"][-1]
        lines.append(f"| {label} | {record['params'] / 1e6:.1f} M | {last['tokens_seen'] / 1e6:.1f} M | "
                     f"{last['train_s'] / 60:.1f} | " + " | ".join(nll_cells(nll, name)) + f" | "
                     f"{motif_cells(motif, key)} |")
    lines.append("| `piano` (shipped; 1.8 M, trained on CPU) | 1.8 M | - | - | " + " | ".join(nll_cells(nll, "piano"))
                 + " | - | - |")
    lines.append("| real continuation | | | | | | | | " + motif_cells(motif, "mt", "real") + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=Path, default=Path("carry/paper_w2"))
    p.add_argument("--nll", type=Path, default=Path("outputs/w2/nll"))
    p.add_argument("--motif", type=Path, default=Path("outputs/w2/motif"))
    args = p.parse_args()
    print(table(args.runs, args.nll, args.motif))
