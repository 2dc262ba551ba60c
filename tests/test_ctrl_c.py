"""A Ctrl-C that lands inside a finalizer is swallowed by Python; `remembered_ctrl_c` remembers it."""

from __future__ import annotations

import os
import signal

import pytest

from musictx.generation.ctrl_c import remembered_ctrl_c


class _CtrlCInFinalizer:
    """Sends SIGINT from its own __del__ and keeps running there, so the KeyboardInterrupt is raised inside
    the finalizer, where Python prints "Exception ignored" and drops it (as in a GC weakref callback)."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100_000):
            pass


@pytest.fixture
def python_sigint():
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_python_drops_a_ctrl_c_raised_in_a_finalizer(python_sigint):
    _CtrlCInFinalizer()  # no KeyboardInterrupt reaches this frame: the problem the guard exists for


def test_the_guard_remembers_it_and_puts_the_handler_back(python_sigint):
    with remembered_ctrl_c() as pressed:
        assert not pressed()
        _CtrlCInFinalizer()
        assert pressed()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt), remembered_ctrl_c():  # a plain Ctrl-C still raises at once
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100_000):
            pass
