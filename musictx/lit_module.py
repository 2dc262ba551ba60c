"""LightningModule for any next-token net (Music Transformer, vanilla Transformer, LSTM).

Checkpoints hold, besides Lightning's own keys, a ``"musictx"`` block with the net's registry name and
constructor kwargs and the tokenizer dict, so `musictx.model_store.load_checkpoint` rebuilds the net and
the tokenizer from the file alone (as nanoGPT's checkpoints store ``model_args``).
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn

from musictx.model_store import CHECKPOINT_FORMAT, CHECKPOINT_KEY, load_checkpoint, net_spec
from musictx.tokenizer import EventTokenizer


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


# ----- learning-rate schedules: multipliers of the optimizer's base lr, by update number (from 1) ----
def paper_schedule(step: int, d_model: int, warmup_steps: int = 8000, factor: float = 2.0) -> float:
    """Vaswani et al. / Music Transformer: factor * min(1, step/warmup) * max(step, warmup)^-0.5 *
    d_model^-0.5. With the optimizer's base lr at 1 (schedule/paper.yaml) this is the learning rate."""
    return factor * min(1.0, step / warmup_steps) * max(step, warmup_steps) ** -0.5 * d_model**-0.5


def cosine_schedule(step: int, warmup_steps: int, total_steps: int, min_ratio: float = 0.1) -> float:
    """Linear warmup to 1, then half a cosine down to ``min_ratio`` at ``total_steps``, flat after."""
    if step < warmup_steps:
        return step / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(total_steps - warmup_steps, 1))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def make_schedule(name: str, lr: float | None = None, **kwargs) -> Callable[[int], float]:
    """The multiplier function of a schedule config (``lr`` is the optimizer's base lr, unused here)."""
    if name == "paper":
        return lambda step: paper_schedule(step, **kwargs)
    if name == "cosine":
        if kwargs.get("total_steps", 0) <= 0:
            raise ValueError("the cosine schedule needs total_steps > 0 (set trainer.max_steps)")
        return lambda step: cosine_schedule(step, **kwargs)
    if name == "constant":
        return lambda step: 1.0
    raise ValueError(f"unknown schedule {name!r}; expected paper, cosine or constant")


def _plain(value):
    """Keep only JSON-like values (checkpoints must load with ``torch.load(weights_only=True)``)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return repr(value)


class MusicLitModule(L.LightningModule):
    """Trains ``net`` (ids (B, T) -> logits (B, T, V)) with cross-entropy in nats per token, PAD ignored.

    Args:
        net: the built model; its class and config go into checkpoints (see `net_spec`).
        tokenizer: ``EventTokenizer.to_dict()`` of the data; saved in checkpoints, checked on resume.
        optimizer: a partial optimizer (``_partial_: true``), called with the parameter groups.
        scheduler: a schedule config for `make_schedule` (``name`` paper / cosine / constant), stepped
            every optimizer update.
        compile: ``torch.compile`` the net in `configure_model` (via ``nn.Module.compile``, so the
            state-dict keys stay clean); ``compile_kwargs`` go to ``torch.compile``.
    """

    def __init__(self, net: nn.Module, tokenizer: dict, optimizer: Callable | None = None,
                 scheduler: dict | None = None, compile: bool = False, compile_kwargs: dict | None = None):
        super().__init__()
        # The net is rebuilt from net_spec on load; the optimizer is a callable, not data.
        self.save_hyperparameters(ignore=["net", "optimizer"], logger=False)
        self.net = net
        self.tokenizer = EventTokenizer.from_dict(tokenizer)
        self.pad_id = self.tokenizer.pad_id
        self.optimizer_factory = optimizer or torch.optim.AdamW
        self.scheduler_config = dict(scheduler or {"name": "constant"})
        # Not `self.compile`: that would hide nn.Module.compile.
        self.compile_net, self.compile_kwargs = compile, dict(compile_kwargs or {})
        self.recent_losses: collections.deque[float] = collections.deque(maxlen=10)
        self._last_batch_end: float | None = None
        self._eval_sums: torch.Tensor | None = None  # (nll sum, correct, targets) of the running eval

    def configure_model(self) -> None:
        if self.compile_net and getattr(self.net, "_compiled_call_impl", None) is None:
            self.net.compile(**self.compile_kwargs)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.net(ids)

    def loss_terms(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(summed nll, correct predictions, target count) over the non-PAD targets of a batch."""
        logits = self.net(x)  # (B, T, V)
        flat = logits.reshape(-1, logits.shape[-1]).float()
        target = y.reshape(-1)
        nll = F.cross_entropy(flat, target, ignore_index=self.pad_id, reduction="sum")
        keep = target != self.pad_id
        correct = ((flat.argmax(-1) == target) & keep).sum()
        return nll, correct, keep.sum()

    # ----- training -----------------------------------------------------------------------------
    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        x, y = batch
        nll, _, count = self.loss_terms(x, y)
        loss = nll / count.clamp(min=1)  # a batch of PAD targets only has loss 0, not 0/0
        # The mean over ranks: a NaN on one rank stops every rank (none is left waiting in an all-reduce).
        value = self.trainer.strategy.reduce(loss.detach(), reduce_op="mean").item()
        if not math.isfinite(value):
            recent = ", ".join(f"{v:.4f}" for v in self.recent_losses) or "none"
            raise NonFiniteLossError(f"training loss is {value} at step {self.global_step} (batch {batch_idx});"
                                     f" last finite losses: {recent}. Lower the learning rate, check "
                                     "gradient_clip_val, or use a different precision.")
        self.recent_losses.append(value)
        self.log("train/loss", loss, prog_bar=True, batch_size=x.shape[0])
        self.log("train/lr", self.optimizers().param_groups[0]["lr"], batch_size=x.shape[0])
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        # Wall time between batch ends: data loading, forward, backward and the optimizer step.
        now = time.perf_counter()
        if self._last_batch_end is not None:
            tokens = batch[0].numel() * self.trainer.world_size
            self.log("train/tokens_per_s", tokens / (now - self._last_batch_end), batch_size=batch[0].shape[0])
        self._last_batch_end = now

    def on_train_epoch_start(self) -> None:
        self._last_batch_end = None

    # ----- validation / test: exact token-weighted means over the split ------------------------
    def _eval_start(self) -> None:
        dtype = torch.float32 if self.device.type == "mps" else torch.float64  # MPS has no float64
        self._eval_sums = torch.zeros(3, dtype=dtype, device=self.device)
        self._last_batch_end = None  # the time spent evaluating is not training throughput

    def _eval_step(self, batch) -> None:
        nll, correct, count = self.loss_terms(*batch)
        self._eval_sums += torch.stack([nll, correct, count]).to(self._eval_sums.dtype)

    def _eval_end(self, stage: str) -> None:
        sums = self._eval_sums
        if self.trainer.world_size > 1:  # each rank saw different windows
            sums = self.all_gather(sums).sum(0)
        nll, correct, count = sums.tolist()
        loss = nll / max(count, 1.0)
        self.log_dict({f"{stage}/loss": loss, f"{stage}/ppl": math.exp(min(loss, 50.0)),
                       f"{stage}/acc": correct / max(count, 1.0)}, prog_bar=stage == "val")

    def on_validation_epoch_start(self) -> None:
        self._eval_start()

    def validation_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch)

    def on_validation_epoch_end(self) -> None:
        self._eval_end("val")

    def on_test_epoch_start(self) -> None:
        self._eval_start()

    def test_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch)

    def on_test_epoch_end(self) -> None:
        self._eval_end("test")

    # ----- optimizer ----------------------------------------------------------------------------
    def configure_optimizers(self):
        # Weight decay on matrices and embeddings only, as in nanoGPT; biases and norms are exempt.
        params = [p for p in self.net.parameters() if p.requires_grad]
        groups = [{"name": "decay", "params": [p for p in params if p.dim() >= 2]},
                  {"name": "no_decay", "params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        optimizer = self.optimizer_factory(groups)
        schedule = make_schedule(**self.scheduler_config)
        # LambdaLR counts from 0 at construction; the k-th update (k from 1) uses schedule(k).
        lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: schedule(i + 1))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": lr_scheduler, "interval": "step"}}

    # ----- checkpoints --------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint[CHECKPOINT_KEY] = {
            "format": CHECKPOINT_FORMAT,
            "model": _plain(net_spec(self.net)),
            "tokenizer": self.tokenizer.to_dict(),
            "optimizer": _optimizer_description(self.optimizer_factory),
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        stored = checkpoint.get(CHECKPOINT_KEY, {}).get("tokenizer")
        if stored is not None:
            self.tokenizer.check_compatible(stored, what="the checkpoint")


def _optimizer_description(factory: Callable) -> dict:
    func = getattr(factory, "func", factory)
    return {"target": f"{func.__module__}.{func.__qualname__}",
            "kwargs": _plain(dict(getattr(factory, "keywords", {}) or {}))}


__all__ = ["MusicLitModule", "load_checkpoint", "make_schedule"]
