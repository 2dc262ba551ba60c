"""A Lightning callback that records, on each DDP rank, what tests/test_ddp.py checks about a real run.

Added to a ``musictx-train`` run through Hydra (``+callbacks.probe._target_=tests.ddp_probe.DDPProbe``), it
records per rank: the training batches, the dropout mask of the first block's first residual dropout,
the distributed ops of the profiled steps, the local validation sums and the logged validation loss, and
the error that stopped training. ``poison_step`` makes the net's output NaN on ``poison_rank`` from that
step on (a NaN arising on one rank). Each rank writes ``rank<r>.pt`` into ``out_dir`` when fit ends.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import lightning as L
import torch

DIST_WORDS = ("barrier", "all_reduce", "allreduce", "broadcast", "all_gather", "allgather", "gloo:", "c10d::")


class DDPProbe(L.Callback):
    def __init__(self, out_dir: str, profile_steps=(1, 2, 3), mask_steps=(0, 1), poison_step: int | None = None,
                 poison_rank: int = 1, wait_s: float = 60.0):
        self.out_dir = Path(out_dir)
        self.profile_steps, self.mask_steps = tuple(profile_steps), tuple(mask_steps)
        self.poison_step, self.poison_rank, self.wait_s = poison_step, poison_rank, wait_s
        self.record: dict = {"batches": {}, "masks": {}, "dist_ops": {}, "val": []}
        self._prof: torch.profiler.profile | None = None
        self._step = -1

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.rank = trainer.global_rank
        self.record.update(rank=self.rank, world_size=trainer.world_size)
        net = pl_module.net
        net.blocks[0].drop.register_forward_hook(self._mask_hook)
        net.head.register_forward_hook(self._poison_hook)

    def _mask_hook(self, module, inputs, output) -> None:
        # the first call of a step: dropout after attention (the second is after the feed-forward)
        if module.training and self._step in self.mask_steps and self._step not in self.record["masks"]:
            self.record["masks"][self._step] = (output == 0).cpu()  # the input is never exactly 0

    def _poison_hook(self, module, inputs, output):
        poisoned = self.poison_step is not None and self._step >= self.poison_step and module.training
        return output * float("nan") if poisoned and self.rank == self.poison_rank else output

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._step = trainer.global_step
        self.record["batches"][self._step] = batch[0].cpu().clone()
        if self._step in self.profile_steps:
            self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            self._prof.__enter__()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._prof is not None:  # forward, backward, optimizer step: the whole training step
            self._prof.__exit__(None, None, None)
            names = Counter(e.name for e in self._prof.events())
            self.record["dist_ops"][self._step] = {n: c for n, c in names.items()
                                                   if any(w in n.lower() for w in DIST_WORDS)}
            self._prof = None

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        # callbacks run before the module's hook: the sums are still this rank's own
        if not trainer.sanity_checking:
            self.record["val"].append({"step": trainer.global_step, "local_sums": pl_module._eval_sums.tolist()})

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self.record["val"][-1]["logged"] = {k: float(v) for k, v in trainer.callback_metrics.items()
                                                if k.startswith("val/")}

    def on_train_end(self, trainer, pl_module) -> None:
        self._write()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self.record["error"] = f"{type(exception).__name__}: {exception}"
        self._write()
        if self.rank == 0:  # rank 0 kills the other ranks after this hook: let them report first
            deadline = time.monotonic() + self.wait_s
            others = [self.out_dir / f"rank{r}.pt" for r in range(1, trainer.world_size)]
            while not all(p.exists() for p in others) and time.monotonic() < deadline:
                time.sleep(0.1)

    def _write(self) -> None:
        path = self.out_dir / f"rank{self.rank}.pt"
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        torch.save(self.record, tmp)
        os.replace(tmp, path)
