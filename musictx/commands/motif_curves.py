"""Several models' forgetting curves in one figure, from the metrics.json files of ``musictx-evaluate
mode=motif`` runs (`musictx.evaluation.motif_plots`):

    python -m musictx.commands.motif_curves curves.png runA/metrics.json runB/metrics.json --labels A B
"""

from __future__ import annotations

import json
from pathlib import Path

from musictx.console.args import OneLineParser
from musictx.evaluation.checks import EvaluateError
from musictx.evaluation.motif_plots import plot_forgetting_curves, result_label


def main(argv: list[str] | None = None) -> None:
    """``python -m musictx.commands.motif_curves curves.png runA/metrics.json runB/metrics.json``: several
    models' curves in one figure (each metrics.json from ``musictx-evaluate mode=motif``)."""
    parser = OneLineParser(prog="python -m musictx.commands.motif_curves", description=main.__doc__)
    parser.add_argument("out", help="PNG to write")
    parser.add_argument("metrics", nargs="+", help="metrics.json files of mode=motif runs")
    parser.add_argument("--labels", nargs="+", help="one name per metrics.json (default: model class and step)")
    args = parser.parse_args(argv)
    from musictx.console.guard import command_guard  # any error, and Ctrl-C, in one line

    with command_guard(parser.prog):
        results = [_read(p) for p in args.metrics]
        missing = [p for p, r in zip(args.metrics, results, strict=True) if "motif" not in r]
        if missing:
            parser.error(f"no mode=motif result in {missing}")
        labels = args.labels or [result_label(r, Path(p).parent.name)
                                 for p, r in zip(args.metrics, results, strict=True)]
        print(f"wrote {plot_forgetting_curves([r['motif'] for r in results], args.out, labels)}")


def _read(path: str) -> dict:
    try:
        found = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise EvaluateError(f"{path}: not a metrics.json of musictx-evaluate ({' '.join(str(err).split())})") from None
    if not isinstance(found, dict):
        raise EvaluateError(f"{path}: not a metrics.json of musictx-evaluate")
    return found



if __name__ == "__main__":
    main()
