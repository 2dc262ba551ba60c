"""The hooks of `musictx.generation.sampling.generate`: small objects that follow the ids and reshape the
logits before each draw. The grammar guards, recall guidance, the bar-repeat limit and progress are hooks.

`generate` calls, for each hook in order:

    hook.start(prompt)                   # once: the prompt (B, T0), on the net's device
    decoder = hook.around(decoder, net, pinned)   # once: a hook that asks the net itself wraps the decoder
    logits = hook(logits)                # every step: (B, V) -> (B, V), forbidden ids at -inf
    hook.update(next_ids, done)          # every step: the ids drawn (B,), and which samples are complete (B,)

Every method is optional: `LogitsHook` leaves the ids, the decoder and the logits as they are. A hook holds
the state of one call; make a fresh one per call.
"""

from __future__ import annotations

from torch import Tensor, nn


class LogitsHook:
    """A hook that does nothing; subclasses override what they need."""

    def start(self, prompt: Tensor) -> None:
        """Follow the prompt (B, T0) before the first draw."""

    def around(self, decoder, net: nn.Module, pinned: int):
        """The decoder the sampler steps (``restart(window)``, ``step(window)`` -> logits (B, V)); ``pinned``:
        prompt ids a slid window keeps at its start."""
        return decoder

    def __call__(self, logits: Tensor) -> Tensor:
        """The logits (B, V) of the next draw, reshaped; PAD and the earlier hooks' forbidden ids are -inf."""
        return logits

    def update(self, next_ids: Tensor, done: Tensor) -> None:
        """Follow the ids just drawn (B,); ``done`` (B,) bool: samples complete after them."""


class OnStep(LogitsHook):
    """A hook from a function ``fn(next_ids, done)`` called after every draw (progress reports, tests)."""

    def __init__(self, fn):
        self.fn = fn

    def update(self, next_ids: Tensor, done: Tensor) -> None:
        self.fn(next_ids, done)
