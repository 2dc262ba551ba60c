"""Fit the copy cache's mixture weights on validation songs (`musictx.evaluation.copy_fit`):

    python -m musictx.commands.copy_fit --checkpoint pop_infill --data data/pop --split validation --songs 30

Every error, and Ctrl-C, ends in one line (`musictx.console.guard`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from musictx.console.guard import command_guard
from musictx.evaluation.copy_fit import run

PROG = "python -m musictx.commands.copy_fit"


def main() -> None:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="pop_infill")
    ap.add_argument("--data", type=Path, default=Path("data/pop"))
    ap.add_argument("--split", default="validation")
    ap.add_argument("--songs", type=int, default=30)
    ap.add_argument("--first-bar", type=int, default=17)
    ap.add_argument("--bars", type=int, default=4)
    a = ap.parse_args()
    with command_guard(PROG):
        run(a.checkpoint, a.data, a.split, a.songs, a.first_bar, a.bars)


if __name__ == "__main__":
    main()
