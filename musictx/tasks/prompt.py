"""Tasks as prompt formats around the one sampler.

Every task (a performance continued, a metrical seed continued by bars, bars filled in, a melody accompanied)
builds a `Prompt`: the ids the net continues, what the run's hooks are made from (`HookInputs`), the ids that
end a sample and the room for new ids. `sample` makes the hook list in the one place it is made
(`musictx.decoding.hooks.registry.build_hooks`) and calls `musictx.decoding.sampling.generate` once.

A ``musictx-generate`` run is a `Job`: its prompt, how the sampled ids become takes (decoded, ready to write:
`musictx.tasks.take`), what its record says of how they were made, and its progress bar. `draw` runs
it, so that a run reads: options -> model -> job (seed or song read, prompt built) -> one draw -> write.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import Tensor, nn

from musictx.decoding.hook import HookInputs
from musictx.decoding.hooks.registry import build_hooks
from musictx.decoding.sampling import GenerationInterrupted, generate
from musictx.tasks.take import Batch, Take


@dataclass
class Prompt:
    """What the one sampler continues, and how."""

    ids: Tensor  # (B, T0): every sample's prompt, on the net's device
    hooks: HookInputs  # the task, tokenizer and sampling options, and what the task's hooks read
    max_new_tokens: int
    ends: Any = None  # the PAD and EOS ids (a tokenizer or `SpecialIds`); None: the hooks' tokenizer's


def sample(net: nn.Module, prompt: Prompt) -> Tensor:
    """(B, T0 + n) ids: ``prompt`` continued under its task's hooks. A Ctrl-C raises `GenerationInterrupted`."""
    inputs = prompt.hooks
    ends = inputs.tokenizer if prompt.ends is None else prompt.ends
    return generate(net, ends, prompt.ids, inputs.sampling, build_hooks(inputs),
                    max_new_tokens=prompt.max_new_tokens)


def new_rows(ids: Tensor, prompt: Prompt) -> np.ndarray:
    """(B, T) the sampled ``ids`` from the prompt's last id on: the first new Bar, where a prompt of bars ends
    on the Bar that opens the first new one."""
    return ids[:, prompt.ids.shape[1] - 1:].cpu().numpy()


@dataclass
class Job:
    """One ``musictx-generate`` run, ready to draw."""

    prompt: Prompt
    takes: Callable[[Tensor, bool, float], list[Take]]  # (ids (B, T), cut short by a Ctrl-C, wall s) -> takes
    about: dict  # the run's own entries of generation.json (its seed, bars or task)
    # a context manager around the draw, giving the ``on_step(next_ids, done)`` that reports progress (or None)
    progress: Callable[[], AbstractContextManager] = nullcontext
    keeps_partial: bool = True  # a Ctrl-C keeps the partial samples; False: it ends the run with nothing written


def draw(net: nn.Module, job: Job) -> Batch:
    """``job``'s samples, drawn as one batch and decoded; a Ctrl-C while sampling keeps the partial samples
    (``Batch.cut_short``) where the job can write them, and goes on up where it cannot."""
    t0 = time.perf_counter()
    with job.progress() as on_step:
        job.prompt.hooks.on_step = on_step
        try:
            ids, cut_short = sample(net, job.prompt), False
        except GenerationInterrupted as stop:
            if not job.keeps_partial:
                raise
            ids, cut_short = stop.ids, True
    wall = time.perf_counter() - t0
    return Batch(job.takes(ids, cut_short, wall), job.about, wall, cut_short)
