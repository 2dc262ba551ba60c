"""The comparison report of a ``musictx-train -m experiment=compare`` sweep (`musictx.evaluation.compare`):
a Hydra callback that writes it when the sweep ends, and by hand for a finished sweep:

    python -m musictx.commands.compare multirun/compare/<date>   # --overwrite: replace its report
"""

from __future__ import annotations

from hydra.experimental.callback import Callback

from musictx.evaluation.compare import write_report


class CompareReport(Callback):
    """Hydra callback: write the report once every job of the sweep has finished."""

    def on_multirun_end(self, config, **kwargs) -> None:
        write_report(config.hydra.sweep.dir)


def main(argv: list[str] | None = None) -> None:
    """``python -m musictx.commands.compare <sweep dir>``: any error, and Ctrl-C, in one line."""
    from musictx.console.args import OneLineParser
    from musictx.console.guard import command_guard

    parser = OneLineParser(prog="python -m musictx.commands.compare", description=__doc__.splitlines()[0])
    parser.add_argument("sweep", help="the folder of a finished musictx-train -m experiment=compare sweep")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the compare.md and val_loss.png already there (the sweep's own report)")
    args = parser.parse_args(argv)
    with command_guard(parser.prog, overwrite=args.overwrite, flag="--overwrite"):
        write_report(args.sweep, strict=True)


if __name__ == "__main__":
    main()
