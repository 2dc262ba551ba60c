"""The jobs of a ``musictx-train -m`` sweep to compose before Hydra starts it.

Hydra composes each job of a sweep only when it reaches it: a mistyped key or choice in one of the values
(``-m model=music_transformr,lstm``) ended in Hydra's own lines of text and search path, and a bad value in the
second job was found after the first had trained. The command composes the jobs listed here first, each
through the same one-line checks as a single run. Only plain comma lists are read; a value with quotes or
parentheses (``range(...)``, ``glob(*)``, ``'a,b'``) leaves the whole sweep to Hydra, which alone parses those.
"""

from __future__ import annotations

MULTIRUN_FLAGS = ("-m", "--multirun")
_OPEN, _CLOSE = "[{", "]}"


def _top_level_values(value: str) -> list[str] | None:
    """``a,b`` -> ['a', 'b']; ``[1,2]`` -> ['[1,2]'] (commas inside brackets are a list, not a sweep); None for a
    value this reader leaves to Hydra (quotes, parentheses, unbalanced brackets)."""
    if any(c in value for c in "'\"()\\"):
        return None
    values, depth, start = [], 0, 0
    for i, char in enumerate(value):
        depth += (char in _OPEN) - (char in _CLOSE)
        if depth < 0:
            return None
        if char == "," and depth == 0:
            values.append(value[start:i])
            start = i + 1
    return None if depth else [*values, value[start:]]


def sweep_jobs(args: list[str]) -> list[list[str]]:
    """The overrides of the jobs that together hold every value of a ``-m`` sweep once: the first job takes each
    sweep's first value, each further job one other value of one sweep. [] when ``args`` is not a plain multirun
    (no ``-m``, another Hydra flag, or a value only Hydra can read)."""
    flags = [a for a in args if a.startswith("-")]
    if not flags or any(f not in MULTIRUN_FLAGS for f in flags):
        return []
    choices = []
    for arg in (a for a in args if not a.startswith("-")):
        key, eq, value = arg.partition("=")
        values = _top_level_values(value) if eq else [None]
        if values is None:
            return []
        choices.append([arg if v is None else f"{key}={v}" for v in values])
    first = [values[0] for values in choices]
    return [first] + [[*first[:i], v, *first[i + 1:]] for i, values in enumerate(choices) for v in values[1:]]
