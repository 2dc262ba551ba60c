"""What clipping the relative term past the table (the recall issue's fix) does to the shipped piano model,
which was trained when keys past max_rel_dist got no relative term at all.

    python scripts/clip_vs_zero.py [data/piano]     # test NLL and copy gain, zeroed vs clipped; prints a table

The zeroed variant is the old behaviour, brought back here only for this measurement by handing the kernels
the bare table (they give distances past its end no term)."""

from __future__ import annotations

import sys

import torch

from musictx.evaluation.run import evaluation_options, run_evaluation
from musictx.models import attention


def measure(data_dir: str) -> dict:
    cfg = evaluation_options(data={"dir": data_dir}, split="test", mode="nll", progress=False)
    rcfg = evaluation_options(data={"dir": data_dir}, split="test", mode="recall", progress=False)
    nll = run_evaluation(cfg)["nll"]["nll"]
    rec = run_evaluation(rcfg)["recall"]
    return {"nll": nll, "gain": {r["gap"]: r["gain"] for r in rec["copy"]["exact"]},
            "context": {c["context"]: c["nll"] for c in rec["context"]}}


def main() -> None:
    data_dir = sys.argv[1] if len(sys.argv) > 1 else "data/piano"
    torch.set_num_threads(1)
    clipped = measure(data_dir)
    real = attention.clipped_table
    attention.clipped_table = lambda rel_emb, t_k: rel_emb  # the old, zeroed term
    try:
        zeroed = measure(data_dir)
    finally:
        attention.clipped_table = real
    print("| piano model | test NLL | " + " | ".join(f"copy gain @{g}" for g in clipped["gain"]) + " | "
          + " | ".join(f"NLL ctx {c}" for c in clipped["context"]) + " |")
    for name, r in (("zeroed past 512 (as trained)", zeroed), ("clipped to E[511] (now)", clipped)):
        print(f"| {name} | {r['nll']:.4f} | " + " | ".join(f"{v:.3f}" for v in r["gain"].values()) + " | "
              + " | ".join(f"{v:.4f}" for v in r["context"].values()) + " |")


if __name__ == "__main__":
    main()
