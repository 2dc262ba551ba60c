"""The comparison report of a ``musictx-train -m experiment=compare`` sweep (`musictx.evaluation.compare`):
a Hydra callback that writes it when the sweep ends, and by hand for a finished sweep:

    python -m musictx.commands.compare multirun/compare/<date>
"""

from __future__ import annotations

import sys

from hydra.experimental.callback import Callback

from musictx.evaluation.compare import write_report


class CompareReport(Callback):
    """Hydra callback: write the report once every job of the sweep has finished."""

    def on_multirun_end(self, config, **kwargs) -> None:
        write_report(config.hydra.sweep.dir)


def main() -> None:
    """``python -m musictx.commands.compare <sweep dir>``: any error, and Ctrl-C, in one line."""
    from musictx.console.guard import command_guard

    if len(sys.argv) != 2:
        sys.exit("usage: python -m musictx.commands.compare <sweep dir>")
    with command_guard("python -m musictx.commands.compare"):
        write_report(sys.argv[1])


if __name__ == "__main__":
    main()
