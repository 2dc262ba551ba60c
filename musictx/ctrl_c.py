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


@contextmanager
def remembered_ctrl_c() -> Iterator[Callable[[], bool]]:
    """Yield ``pressed()``: whether Ctrl-C came since the block began. Ctrl-C still raises KeyboardInterrupt
    at once. Outside the main thread, or when someone else handles SIGINT, nothing changes and ``pressed()``
    is always False."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield lambda: False
        return
    seen: list[int] = []

    def note_and_raise(signum, frame):
        seen.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, note_and_raise)
    try:
        yield lambda: bool(seen)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
