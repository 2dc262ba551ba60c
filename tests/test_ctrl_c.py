"""A Ctrl-C that lands inside a finalizer is swallowed by Python; `remembered_ctrl_c` remembers it."""

from __future__ import annotations

import os
import signal

import pytest

from musictx.ctrl_c import remembered_ctrl_c


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


def test_sampling_stops_at_a_swallowed_ctrl_c_with_the_ids_so_far(python_sigint):
    import torch

    from musictx.decoding.hook import OnStep
    from musictx.decoding.sampling import GenerationInterrupted, generate
    from musictx.decoding.sampling_options import SamplingOptions
    from musictx.models.transformer import MusicTransformer

    net = MusicTransformer(vocab_size=20, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=64)
    steps = []

    def on_step(next_ids, done):
        steps.append(1)
        if len(steps) == 5:
            _CtrlCInFinalizer()  # the KeyboardInterrupt is dropped inside __del__; generate must still stop

    prompt = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(GenerationInterrupted) as stop:
        generate(net, None, prompt, SamplingOptions(), [OnStep(on_step)], max_new_tokens=40)
    assert len(steps) == 5 and stop.value.ids.shape == (2, 3 + 5)
    assert torch.equal(stop.value.ids[:, :3], prompt)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_swallowed_between_songs_stops_the_evaluation_before_the_next(python_sigint):
    """The evaluations' song loop (`each_song`): a Ctrl-C lost in a finalizer while one song's card was made
    stops the run before the next song, and a sampling loop inside shares the note (nested blocks)."""
    from musictx.evaluation.checks import each_song

    done, lines = [], []

    def work(k, path):
        done.append(k)
        with remembered_ctrl_c() as inner:  # as generate() does inside a song
            if k == 1:
                _CtrlCInFinalizer()
            assert inner() == (k == 1)
        return {"k": k}

    with pytest.raises(KeyboardInterrupt):
        list(each_song([__file__] * 4, work, [], lines.append, "test"))
    assert done == [0, 1] and lines == ["test: 1/4 test_ctrl_c.py", "test: 2/4 test_ctrl_c.py"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
