"""Train the melody harmonizer on a prepared POP909 folder (`musictx.training.harmonizer`):

    python -m musictx.commands.harmonizer --data data/pop [--out outputs/harmonizer/weights.npz] [--overwrite]

Every error, and Ctrl-C, ends in one line (`musictx.console.guard`).
"""

from __future__ import annotations

from pathlib import Path

from musictx.console.args import OneLineParser
from musictx.console.guard import command_guard
from musictx.models.harmonizer import WEIGHTS
from musictx.training.harmonizer import PROG, run


def main() -> None:
    ap = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("data/pop"), help="a prepared POP909 folder")
    ap.add_argument("--out", type=Path, default=Path("outputs/harmonizer/weights.npz"),
                    help=f"where the weights go (the shipped ones, {WEIGHTS.relative_to(WEIGHTS.parents[3])}, are "
                         "replaced by hand, as a model is shipped)")
    ap.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    a = ap.parse_args()
    with command_guard(PROG, overwrite=a.overwrite, flag="--overwrite"):
        run(a.data, a.out, a.overwrite)


if __name__ == "__main__":
    main()
