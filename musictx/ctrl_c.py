"""A Ctrl-C that cannot be lost.

Python turns SIGINT into a KeyboardInterrupt raised in whatever code runs at that moment. When that is a
weakref callback or a ``__del__`` run by the garbage collector, Python prints "Exception ignored" and
carries on: the user pressed Ctrl-C and the command finishes as if nothing happened. Inside
`remembered_ctrl_c` the signal is also written down, so a loop can ask between steps and stop anyway.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_SEEN: list[int] = []  # the Ctrl-Cs noted since the outermost active block began


def _note_and_raise(signum, frame):
    _SEEN.append(signum)
    raise KeyboardInterrupt


@contextmanager
def remembered_ctrl_c() -> Iterator[Callable[[], bool]]:
    """Yield ``pressed()``: whether Ctrl-C came since the block began. Ctrl-C still raises KeyboardInterrupt
    at once. A block inside another shares the outer one's note, so a loop over songs asks between songs and
    the sampling loop inside it between steps, and a Ctrl-C lost in either is seen by both. Outside the main
    thread, or when someone else handles SIGINT, nothing changes and ``pressed()`` is always False."""
    handler = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    if handler is _note_and_raise:  # nested: the outer block notes, and puts the handler back
        yield lambda: bool(_SEEN)
        return
    if handler is not signal.default_int_handler:
        yield lambda: False
        return
    _SEEN.clear()
    signal.signal(signal.SIGINT, _note_and_raise)
    try:
        yield lambda: bool(_SEEN)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
