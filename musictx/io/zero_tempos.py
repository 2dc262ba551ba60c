"""A set_tempo of 0 microseconds a beat in a MIDI file: no clock can play it (pretty_midi divides by it, and
the Performance readers put every later note at one instant). Every reader leaves such events out, the tempo
before each holding on, and the user is told in one line on stderr naming the file (`tell_zero_tempos`), once
per file and process, whichever of the readers (notes, tempo map, symusic score) reads it first. Other things a
reader reads otherwise than the file says are told the same way (`tell_once`)."""

from __future__ import annotations

import os
import sys

import numpy as np

_TOLD: set[tuple[str, str, int]] = set()  # (what, file, its mtime): each is said once a file and process


def tell_once(path: str | os.PathLike | None, what: str, text: str) -> None:
    """``warning: PATH: TEXT`` on stderr, once per file and ``what`` (the topic): every reader of a file would
    repeat it, and a user should learn once why the file's music is not read quite as it says."""
    if path is None:
        return
    try:
        key = (what, os.path.realpath(path), os.stat(path).st_mtime_ns)
    except OSError:
        key = (what, str(path), 0)
    if key in _TOLD:
        return
    _TOLD.add(key)
    print(f"warning: {path}: {text}", file=sys.stderr, flush=True)


def tell_zero_tempos(path: str | os.PathLike | None, count: int) -> None:
    """One line on stderr naming ``path`` when ``count`` set_tempo events of 0 were left out of it: the file's
    timing is not what it says, and a user should know why. Once per file (each reader of it would repeat it)."""
    if count:
        tell_once(path, "zero tempos", f"{count} tempo event(s) of 0 left out (no clock can play them); the tempo "
                  "before each holds on")


def playable_tempos(path, ticks: np.ndarray, mspq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ticks, microseconds a beat) of a file's tempo events without those of 0 or less, said (`tell_zero_tempos`)."""
    ticks, mspq = np.asarray(ticks), np.asarray(mspq)
    keep = mspq > 0
    tell_zero_tempos(path, int((~keep).sum()))
    return ticks[keep], mspq[keep]
