"""Lightning callbacks of musictx-train."""

from __future__ import annotations

import os
from pathlib import Path

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException


class LastCheckpoint(L.Callback):
    """Keep ``<dirpath>/last.ckpt`` current: written after every validation and when training ends.

    Lightning's ``save_last`` follows the top-k save (``last.ckpt`` is refreshed only when val/loss
    improves), so a resume could silently rewind. The file is written beside the target under a
    temporary name and then renamed over it, so a run killed mid-save keeps the previous good file.
    On SIGTERM the current step is saved too.
    """

    def __init__(self, dirpath: str | os.PathLike, filename: str = "last.ckpt"):
        self.path = Path(dirpath) / filename
        self.saved_step: int | None = None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.save(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Only when the last steps were not saved yet: at this point the loops have already moved on
        # to the next epoch, and a save of the same step would resume from the wrong data position.
        if trainer.global_step != self.saved_step:
            self.save(trainer)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        # SIGTERM (SLURM, Kubernetes, `timeout`): Lightning stops between batches; keep that step so that
        # a preempted job resumes where it stopped. musictx.train then exits non-zero.
        if isinstance(exception, SIGTERMException) and trainer.global_step != self.saved_step:
            self.save(trainer)

    def save(self, trainer: L.Trainer) -> None:
        """Every rank calls this (the strategy gathers state); rank zero writes and renames."""
        tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        trainer.save_checkpoint(tmp)
        if trainer.is_global_zero:
            os.replace(tmp, self.path)
        self.saved_step = trainer.global_step
