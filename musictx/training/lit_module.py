"""LightningModule for any next-token net (Music Transformer, vanilla Transformer, LSTM).

Checkpoints hold, besides Lightning's own keys, a ``"musictx"`` block with the net's registry name and
constructor kwargs and the tokenizer dict, so `musictx.checkpoints.model_store.load_checkpoint` rebuilds the net and
the tokenizer from the file alone (as nanoGPT's checkpoints store ``model_args``).
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from musictx.checkpoints.model_store import CHECKPOINT_KEY, checkpoint_block, load_checkpoint
from musictx.io.tokenizers import tokenizer_from_dict
from musictx.training.options import TrainOptionError, check_schedule, net_from_options


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


def compile_kwargs_for(kwargs: dict, device_type: str) -> dict:
    """torch.compile arguments for a device. On CPU, inductor's default backend draws dropout masks with
    aten's RNG (``fallback_random``): with its own generated RNG code, compiled training steps of a small
    Music Transformer ran slower than eager on CPU, with aten's as fast as eager.
    GPUs keep inductor's fused RNG. Explicit ``options`` win; ``mode`` excludes ``options``."""
    if device_type != "cpu" or kwargs.get("backend", "inductor") != "inductor" or kwargs.get("mode") is not None:
        return dict(kwargs)
    return {**kwargs, "options": {"fallback_random": True, **(kwargs.get("options") or {})}}


def batch_seed(seed: int, rank: int, step: int, batch_idx: int) -> int:
    """The torch seed of one training batch on one rank: mixed by numpy's SeedSequence, so that nearby
    (rank, step) pairs give unrelated streams."""
    entropy = [seed % 2**64, rank, step, batch_idx]
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0] >> 1)  # torch takes < 2**63


def follow_schedule(scheduler: torch.optim.lr_scheduler.LambdaLR, base_lrs: list[float]) -> None:
    """Set each parameter group's base lr to ``base_lrs`` and its lr to the scheduler's multiplier at the
    update it takes next (``last_epoch`` updates are done)."""
    scheduler.base_lrs = list(base_lrs)
    for group, base, multiplier in zip(scheduler.optimizer.param_groups, base_lrs, scheduler.lr_lambdas, strict=True):
        group["initial_lr"] = base
        group["lr"] = base * multiplier(scheduler.last_epoch)


class MusicLitModule(L.LightningModule):
    """Trains ``net`` (ids (B, T) -> logits (B, T, V)) with cross-entropy in nats per token, PAD ignored.

    Args:
        net: the model, built, or its config (``name``: a key of `musictx.models.MODELS`, and its
            constructor arguments), which the model store builds; its spec goes into checkpoints.
        tokenizer: the data tokenizer's ``to_dict()`` (or the tokenizer, taken as its dict); saved in checkpoints,
            checked on resume.
        optimizer: a partial optimizer (``_partial_: true``), called with the parameter groups.
        scheduler: a schedule config for `make_schedule` (``name`` paper / cosine / constant), stepped
            every optimizer update.
        compile: ``torch.compile`` the net in `configure_model` (via ``nn.Module.compile``, so the
            state-dict keys stay clean); ``compile_kwargs`` go to ``torch.compile``.
    """

    def __init__(self, net: nn.Module | dict, tokenizer: dict, optimizer: Callable | None = None,
                 scheduler: dict | None = None, compile: bool = False, compile_kwargs: dict | None = None):
        super().__init__()
        if hasattr(tokenizer, "to_dict"):  # before the hyperparameters are saved: a checkpoint holds the dict
            tokenizer = tokenizer.to_dict()  # (loaded with weights_only=True), never a pickled tokenizer
        # The net is rebuilt from net_spec on load; the optimizer is a callable, not data.
        self.save_hyperparameters(ignore=["net", "optimizer"], logger=False)
        self.net = net if isinstance(net, nn.Module) else net_from_options(net)
        self.tokenizer = tokenizer_from_dict(tokenizer)
        self.pad_id = self.tokenizer.pad_id
        self.optimizer_factory = optimizer or torch.optim.AdamW
        self.scheduler_config = dict(scheduler or {"name": "constant"})
        # Checked now, while the config is being built: in configure_optimizers a bad value ended the run after
        # the Trainer had started, in a raw TypeError from AdamW (schedule.lr is the optimizer's lr too).
        check_schedule(self.scheduler_config)
        try:
            make_schedule(**self.scheduler_config)(1)
        except TypeError as err:  # a key the schedule does not take (+schedule.foo=1)
            raise TrainOptionError(f"schedule: {err}") from None
        # Not `self.compile`: that would hide nn.Module.compile.
        self.compile_net, self.compile_kwargs = compile, dict(compile_kwargs or {})
        self.recent_losses: collections.deque[float] = collections.deque(maxlen=10)
        self._unchecked_losses: list[torch.Tensor] = []  # losses since the last optimizer step, on device
        self._last_batch_idx = 0
        self._rng_seed: int | None = None  # base of the per-batch torch seeds (`on_train_batch_start`)
        self._last_batch_end: float | None = None
        self._eval_sums: torch.Tensor | None = None  # (nll sum, correct, targets) of the running eval
        self._schedule_base_lrs: list[float] | None = None  # this config's base lr of each group (`on_train_start`)

    def configure_model(self) -> None:
        if self.compile_net and getattr(self.net, "_compiled_call_impl", None) is None:
            # the device training will run on (the net is moved there only after this hook)
            device = self._trainer.strategy.root_device if self._trainer is not None else self.device
            self.net.compile(**compile_kwargs_for(self.compile_kwargs, device.type))

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
    def on_fit_start(self) -> None:
        # The data seed (the config's `seed`), else the one seed_everything gave torch: the same on every rank.
        seed = getattr(self.trainer.datamodule, "seed", None)
        self._rng_seed = int(seed if seed is not None else torch.initial_seed())
        self._learn_parts_and_level()

    def _learn_parts_and_level(self) -> None:
        """What the net learns besides its weights, saved with them: the parts (``net.learnt_programs``: the
        Programs of the train data, with those of the weights it started from, `init_from`; a continuation writes
        no track of another program) and how loud the music is played (``net.heard_velocity``: the train data's
        median velocity; a pp, ff or flat seed is heard at it, `musictx.io.dynamics`)."""
        datamodule = self.trainer.datamodule
        found = datamodule.programs() if hasattr(datamodule, "programs") else None
        if found is not None:
            self.net.learnt_programs = tuple(sorted({*(getattr(self.net, "learnt_programs", None) or ()), *found}))
        level = datamodule.velocity() if hasattr(datamodule, "velocity") else None
        if level is not None:
            self.net.heard_velocity = level

    def on_train_start(self) -> None:
        # After Lightning restored the training state, before the first update (Lightning calls this later
        # than on_fit_start): a resume brings back the optimizer's lr of the next update as the run's old
        # schedule computed it, and the scheduler's base lrs. The multiplier function is this config's (a
        # function is not saved), so every later update followed the new schedule but the first took the
        # old one's lr: with a larger trainer.max_steps, a cosine's total steps had changed. Set from this
        # config's schedule (its schedule.lr too), the first update follows it as well; with the config the
        # run had, nothing changes.
        scheduler = self.lr_schedulers()
        if isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR) and self._schedule_base_lrs is not None:
            follow_schedule(scheduler, self._schedule_base_lrs)

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        # seed_everything seeds every DDP rank alike, so without this every rank would drop the same units.
        # Reseeding per batch from (seed, rank, step, batch) gives each rank its own dropout masks, and makes
        # them a function of the position in training (as the data windows are): a resumed run draws the
        # masks the uninterrupted run drew. The weights were broadcast by DDP long before.
        seed = self._rng_seed if self._rng_seed is not None else torch.initial_seed()
        torch.manual_seed(batch_seed(seed, self.global_rank, self.global_step, batch_idx))

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        x, y = batch
        nll, _, count = self.loss_terms(x, y)
        loss = nll / count.clamp(min=1)  # a batch of PAD targets only has loss 0, not 0/0
        # Checked after backward (`on_before_optimizer_step`): no host sync and no collective here.
        self._unchecked_losses.append(loss.detach())
        self._last_batch_idx = batch_idx
        self.log("train/loss", loss, prog_bar=True, batch_size=x.shape[0])
        self.log("train/lr", self.optimizers().param_groups[0]["lr"], batch_size=x.shape[0])
        # x 1 while the loss is finite (bit-exact), x NaN otherwise: then every gradient of this rank is NaN,
        # and DDP's gradient all-reduce brings that to every rank in the same step (an infinite loss alone
        # can leave finite gradients, and the other ranks would train on and wait for this one forever).
        return loss * torch.where(torch.isfinite(loss.detach()), 1.0, float("nan"))

    def on_before_optimizer_step(self, optimizer) -> None:
        """Stop on a non-finite loss, on every rank in the same step, without a collective of our own.

        Runs after backward, before clipping: DDP has already summed the gradients of all ranks, so a
        non-finite loss on any rank (made NaN gradients by `training_step`) shows in every rank's gradient
        norm. One host sync per step (`.tolist()`), no barrier.
        """
        losses = [loss.float() for loss in self._unchecked_losses]  # the micro-batches since the last step
        losses = torch.stack(losses) if losses else torch.zeros(0, device=self.device)
        self._unchecked_losses = []
        scaled = getattr(self.trainer.precision_plugin, "scaler", None) is not None
        *values, check = torch.cat([losses, self._cross_rank_check(losses, scaled).reshape(1)]).tolist()
        bad_loss = next((v for v in values if not math.isfinite(v)), None)
        if bad_loss is None and math.isfinite(check):
            self.recent_losses.extend(values)
            return
        where = f"at step {self.global_step} (batch {self._last_batch_idx})"
        if bad_loss is not None:
            what = f"training loss is {bad_loss} {where}"
        elif scaled:
            what = f"training loss is non-finite on another rank {where}"
        else:
            what = (f"gradient norm is {check} {where} while the loss of this rank is finite: a non-finite "
                    "loss on another rank (DDP sums the ranks' gradients), or an overflow in backward")
        recent = ", ".join(f"{v:.4f}" for v in self.recent_losses) or "none"
        # fp16 weights hold the optimizer's state in fp16 too: AdamW's eps (1e-9) is 0 there, and a weight whose
        # gradient is 0 (an unseen token's row) gets 0/0 at the first update; the run's NaN from its second step
        half = (" trainer.precision=16-true keeps the weights and the optimizer's state in fp16, where AdamW's eps "
                "is 0: use 16-mixed (GPU), bf16-mixed or 32-true." if self.trainer.precision == "16-true" else "")
        raise NonFiniteLossError(f"{what}; last finite losses: {recent}. Lower the learning rate, check "
                                 f"gradient_clip_val, or use a different precision.{half}")

    def _cross_rank_check(self, losses: torch.Tensor, scaled: bool) -> torch.Tensor:
        """A scalar that is non-finite when some rank's loss was: the total gradient norm, as DDP left it.

        Under fp16 with a GradScaler infinite gradients are routine (the scaler skips those steps) and
        say nothing, so there, with DDP, the ranks' counts of non-finite losses are all-reduced instead:
        the one case that keeps a collective per step.
        """
        if not scaled:
            grads = [p.grad for p in self.net.parameters() if p.grad is not None]
            if grads:
                return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)).float())
        elif self.trainer.world_size > 1:
            bad = self.trainer.strategy.reduce((~torch.isfinite(losses)).sum().float(), reduce_op="sum")
            return torch.where(bad > 0, float("nan"), 0.0)
        return losses.new_zeros(())

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
        try:
            optimizer = self.optimizer_factory(groups)
        except (TypeError, ValueError) as err:  # model.optimizer.weight_decay=abc: AdamW's raw TypeError otherwise
            words = [f"{k}={v!r}" for k, v in getattr(self.optimizer_factory, "keywords", {}).items()
                     if isinstance(v, str)]  # the likely culprits: no option of torch's optimizers is a string
            raise TrainOptionError(f"model.optimizer: {err}" + (f" ({', '.join(words)})" if words else "")) from None
        schedule = make_schedule(**self.scheduler_config)
        # LambdaLR counts from 0 at construction; the k-th update (k from 1) uses schedule(k).
        lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: schedule(i + 1))
        self._schedule_base_lrs = list(lr_scheduler.base_lrs)  # a resume restores the checkpoint's over them
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": lr_scheduler, "interval": "step"}}

    # ----- checkpoints --------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint[CHECKPOINT_KEY] = checkpoint_block(self.net, self.tokenizer, self.optimizer_factory)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        stored = checkpoint.get(CHECKPOINT_KEY, {}).get("tokenizer")
        if stored is not None:
            self.tokenizer.check_compatible(stored, what="the checkpoint")


__all__ = ["MusicLitModule", "load_checkpoint", "make_schedule"]
