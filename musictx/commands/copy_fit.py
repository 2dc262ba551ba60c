"""Fit the copy cache's mixture weights on validation songs (`musictx.evaluation.copy_fit`):

    python -m musictx.commands.copy_fit --checkpoint pop_infill --data data/pop --split validation --songs 30
    python -m musictx.commands.copy_fit --task continue --checkpoint pop --skip 30 --songs 0   # continuation weights

Every error, and Ctrl-C, ends in one line (`musictx.console.guard`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from musictx.console.guard import command_guard
from musictx.evaluation.copy_fit import run, run_continue

PROG = "python -m musictx.commands.copy_fit"


def main() -> None:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="pop_infill")
    ap.add_argument("--data", type=Path, default=Path("data/pop"))
    ap.add_argument("--split", default="validation")
    ap.add_argument("--songs", type=int, default=30)
    ap.add_argument("--first-bar", type=int, default=17)
    ap.add_argument("--bars", type=int, default=4)
    ap.add_argument("--task", choices=("infill", "continue"), default="infill",
                    help="continue: the continuation's weights (10 s seed from 25 s, the next 30 s)")
    ap.add_argument("--skip", type=int, default=0, help="continue: the split's first songs left out of the fit "
                    "(the scorecard's own); then --songs songs, 0: all the rest")
    a = ap.parse_args()
    with command_guard(PROG):
        if a.task == "continue":
            run_continue(a.checkpoint, a.data, a.split, slice(a.skip, a.skip + a.songs if a.songs else None))
        else:
            run(a.checkpoint, a.data, a.split, a.songs, a.first_bar, a.bars)


if __name__ == "__main__":
    main()
