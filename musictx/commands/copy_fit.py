"""Fit the copy cache's mixture weights on validation songs (`musictx.evaluation.copy_fit`):

    python -m musictx.commands.copy_fit --checkpoint pop_infill --data data/pop --split validation --songs 30
    python -m musictx.commands.copy_fit --task continue --checkpoint pop --skip 30 --songs 0   # continuation weights

Every error, and Ctrl-C, ends in one line (`musictx.console.guard`).
"""

from __future__ import annotations

from pathlib import Path

from musictx.console.args import COUNT, OneLineParser, number
from musictx.console.guard import command_guard
from musictx.evaluation.copy_fit import run, run_continue

PROG = "python -m musictx.commands.copy_fit"


def main() -> None:
    ap = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="pop_infill")
    ap.add_argument("--data", type=Path, default=Path("data/pop"))
    ap.add_argument("--split", default="validation")
    ap.add_argument("--songs", type=number(int, low=0), default=30,
                    help="songs fitted on (after --skip); 0: all the rest")
    ap.add_argument("--first-bar", type=COUNT, default=17)
    ap.add_argument("--bars", type=COUNT, default=4)
    ap.add_argument("--task", choices=("infill", "continue"), default="infill",
                    help="continue: the continuation's weights (10 s seed from 25 s, the next 30 s)")
    ap.add_argument("--skip", type=number(int, low=0), default=0,
                    help="the split's first songs left out of the fit (for --task continue, the scorecard's own)")
    a = ap.parse_args()
    with command_guard(PROG):
        songs = slice(a.skip, a.skip + a.songs if a.songs else None)
        if a.task == "continue":
            run_continue(a.checkpoint, a.data, a.split, songs)
        else:
            run(a.checkpoint, a.data, a.split, songs, a.first_bar, a.bars)


if __name__ == "__main__":
    main()
