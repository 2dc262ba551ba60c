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
    parser.add_argument("out", help="the figure to write: a .png (or .pdf, .svg)")
    parser.add_argument("metrics", nargs="+", help="metrics.json files of mode=motif runs")
    parser.add_argument("--labels", nargs="+", help="one name per metrics.json (default: model class and step)")
    parser.add_argument("--overwrite", action="store_true", help="replace the figure if it exists")
    args = parser.parse_args(argv)
    # all refused before any file is read: a figure matplotlib cannot write, a label too few or too many
    problem = _figure_problem(Path(args.out))
    if problem:
        parser.error(f"{args.out}: {problem}")
    if args.labels and len(args.labels) != len(args.metrics):
        parser.error(f"--labels gives {len(args.labels)} name(s) for {len(args.metrics)} metrics.json file(s); "
                     "give one for each file, or leave --labels out")
    from musictx.console.guard import command_guard  # any error, and Ctrl-C, in one line

    with command_guard(parser.prog, overwrite=args.overwrite, flag="--overwrite"):
        results = [_read(p) for p in args.metrics]
        missing = [p for p, r in zip(args.metrics, results, strict=True) if "motif" not in r]
        if missing:
            parser.error(f"no mode=motif result in {missing}")
        labels = args.labels or [result_label(r, Path(p).parent.name)
                                 for p, r in zip(args.metrics, results, strict=True)]
        print(f"wrote {plot_forgetting_curves([r['motif'] for r in results], args.out, labels)}")


def _figure_problem(out: Path) -> str | None:
    """Why ``out`` cannot take the figure (matplotlib picks the format by the suffix), or None."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    formats = FigureCanvasAgg(Figure()).get_supported_filetypes()
    if out.suffix.lower().lstrip(".") not in formats:
        return f"not a figure's name (give it .png, .pdf or .svg; got {out.suffix or 'no suffix'})"
    if not out.parent.is_dir():
        return f"its folder {out.parent} does not exist"
    return None


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
