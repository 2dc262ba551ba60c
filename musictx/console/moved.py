"""The old places of the command lines that moved into `musictx.commands` (issue 19, then the harmonizer's):
``python -m <old module>`` ran nothing and ended with status 0, which reads as success.
Each old module ends with ``if __name__ == "__main__": moved(...)``, which says where the command is now."""

from __future__ import annotations

import sys

# the old module -> the command line that replaced it (its options unchanged unless it says so)
MOVED = {
    "musictx.training.harmonizer": "python -m musictx.commands.harmonizer (same options)",
    "musictx.evaluation.compare": "python -m musictx.commands.compare <sweep folder>",
    "musictx.evaluation.motif": "python -m musictx.commands.motif_curves (the curves' figure); "
                                "musictx-evaluate mode=motif (the measure)",
    "musictx.checkpoints.export": "musictx-export <checkpoint> <output folder>",
}


def moved(module: str) -> None:
    """End ``python -m <module>`` with one line naming the command's new place, exit status 2 (a usage error)."""
    print(f"python -m {module}: error: this command moved; run {MOVED[module]}", file=sys.stderr, flush=True)
    raise SystemExit(2)
