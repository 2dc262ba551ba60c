"""`eval_mode`: a net in eval mode for a block, each module's train flag put back after. Torch only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def eval_mode(net: nn.Module) -> Iterator[None]:
    """Eval mode for the block (no dropout: what the net itself says), then exactly the flags it had: scoring in
    the middle of a training loop leaves the loop training, and a submodule frozen in eval mode stays so (a
    ``net.train(was_training)`` put every module back in train mode). A net already all in eval mode, the usual
    case when sampling, is left alone: setting the flags walks every module."""
    training = [module for module in net.modules() if module.training]
    if not training:
        yield
        return
    net.eval()
    try:
        yield
    finally:
        for module in training:
            module.training = True
