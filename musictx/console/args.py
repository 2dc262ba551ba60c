"""The argparse command lines (``python -m bench ...``, ``python -m musictx.commands.harmonizer`` ...) refuse as
the Hydra commands do: one line ``<prog>: error: <what>`` and exit status 1, where argparse prints its usage
first and exits with 2; and their numbers are checked where they are read (a ``--seconds -1`` or a
``--repeats 0`` used to end deep in the work, in a traceback). Light: no torch, no Hydra (a bench sets its
OpenMP environment before torch loads)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose refusals are one line and exit status 1 (``--help`` is as argparse's)."""

    def error(self, message: str):
        print(f"{self.prog}: error: {' '.join(message.split())}", file=sys.stderr, flush=True)
        raise SystemExit(1)


def number(kind: type = int, low: float | None = None, above: float | None = None) -> Callable[[str], float]:
    """An argparse ``type``: ``kind`` (int or float), finite, >= ``low`` and > ``above`` where given; argparse
    names the option in the refusal ("argument --seconds: must be > 0, got -1")."""
    what = "a whole number" if kind is int else "a number"

    def convert(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if low is not None and value < low:
            raise argparse.ArgumentTypeError(f"must be {what} >= {low:g}, got {text}")
        if above is not None and not value > above:
            raise argparse.ArgumentTypeError(f"must be {what} > {above:g}, got {text}")
        return value

    convert.__name__ = kind.__name__  # argparse's own messages name the type
    return convert


COUNT = number(int, low=1)  # repeats, threads, tokens, sizes: at least one
SECONDS = number(float, above=0)


def number_list(low: int = 1) -> Callable[[str], str]:
    """An argparse ``type`` for a comma-separated list of whole numbers >= ``low`` (``1,4``): the text itself,
    checked (the bench splits it where it uses it)."""
    one = number(int, low=low)

    def convert(text: str) -> str:
        items = [t for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"must be comma-separated whole numbers >= {low}, got {text!r}")
        for item in items:
            one(item.strip())
        return text

    return convert
