"""Lists in one line that stays a line: a message names a handful of items and counts the rest (a file of 128
instruments otherwise wrote lines of 5,000 characters)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

MOST = 8  # items a message names before it counts the rest


def listed(items: Iterable[str], sep: str = ", ", most: int = MOST) -> str:
    """``items`` joined by ``sep``, the first ``most`` of them and "and N more" for the rest."""
    items = list(items)
    shown = sep.join(items[:most])
    return shown + (f"{sep}and {len(items) - most} more" if len(items) > most else "")


def counts_listed(counts: Mapping[str, int], most: int = MOST) -> str:
    """``{'PIANO': 40, 'MELODY': 12}`` as a message writes it, its first ``most`` entries and "N more" after."""
    shown = {k: counts[k] for k in list(counts)[:most]}
    more = len(counts) - len(shown)
    return str(shown) if not more else f"{str(shown)[:-1]}, ... {more} more tracks}}"


def counted(n: int, noun: str) -> str:
    """``1 song``, ``2 songs``: a count and its noun, plural but for one (a scorecard said "1 songs")."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
