"""Sampling progress as a tqdm bar: the seconds of new music of the least advanced sample still running."""

from __future__ import annotations

import sys
from contextlib import nullcontext

from torch import Tensor
from tqdm import tqdm

from musictx.decoding.hook import LogitsHook
from musictx.decoding.hooks.length import ShiftClock


class SamplingProgress(LogitsHook):
    """A hook that moves a tqdm bar to the seconds of music made so far (of ``length_seconds`` when given),
    redrawn at most every ``every_s`` seconds of wall clock; the samples done are its postfix. A context
    manager: leaving it closes the bar."""

    def __init__(self, tokenizer, length_seconds: float | None, every_s: float, file=None):
        self.clock, self.time_step = ShiftClock.of(tokenizer), tokenizer.config.time_step
        self.bar = tqdm(total=length_seconds, desc="generating", unit=" s", mininterval=every_s,
                        file=file or sys.stdout, bar_format=_FORMAT if length_seconds else _OPEN_FORMAT)

    def update(self, next_ids: Tensor, done: Tensor) -> None:
        steps = self.clock.add(next_ids)  # (B,)
        running = ~done.cpu().numpy()
        # the least advanced sample still running; once all are done, the least advanced of them, so that the bar's
        # last state says every sample is done (it stopped at "1 of 2 samples done" though both were written)
        seconds = float(steps[running if running.any() else slice(None)].min()) * self.time_step
        if self.bar.total:  # a sample's last shift may pass the length: past its total, tqdm drops the total from
            seconds = min(seconds, self.bar.total)  # the bar's numbers and our format's {total:g} fails on None
        self.bar.set_postfix_str(f"{int(done.sum())} of {len(done)} samples done", refresh=False)
        self.bar.update(seconds - self.bar.n)

    def __enter__(self) -> SamplingProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()


def progress_bar(tokenizer, length_seconds: float | None, every_s: float | None):
    """``musictx-generate``'s bar (`SamplingProgress`), or when ``every_s`` is None a context that gives
    None: no bar."""
    return SamplingProgress(tokenizer, length_seconds, every_s) if every_s else nullcontext()


# tqdm's {postfix} brings its own leading ", "
_FORMAT = "{desc}: {n:.1f} of {total:g} s {bar} [{elapsed}<{remaining}{postfix}]"
_OPEN_FORMAT = "{desc}: {n:.1f} s [{elapsed}{postfix}]"
