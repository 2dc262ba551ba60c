"""Lightning callbacks of musictx-train."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException

from musictx.evaluation.recall import context_ceiling, copy_gain, draw_probes
from musictx.io.token_store import TokenArrays
from musictx.training.checkpoint_io import AtomicCheckpointIO
from musictx.training.orphans import sweep_orphans


class LastCheckpoint(L.Callback):
    """Keep ``<dirpath>/last.ckpt`` current: written after every validation and when training ends.

    Lightning's ``save_last`` follows the top-k save (``last.ckpt`` is refreshed only when val/loss
    improves), so a resume could silently rewind. The file is written whole or not at all: by
    `musictx.training.checkpoint_io.AtomicCheckpointIO` (a temporary beside it, renamed over it) when the trainer
    saves through it, else under a temporary name of its own renamed here. A run killed mid-save keeps the
    previous good file; the temporaries such kills leave are removed when a run starts in the folder
    (`musictx.training.orphans.sweep_orphans`, one line). On SIGTERM the current step is saved too.
    """

    def __init__(self, dirpath: str | os.PathLike, filename: str = "last.ckpt"):
        self.path = Path(dirpath) / filename
        self.saved_step: int | None = None

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:  # musictx-train swept already (`musictx.training.run.train`): then none is left
            sweep_orphans([self.path.parent])

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
        # a preempted job resumes where it stopped. musictx.commands.train then exits non-zero.
        if isinstance(exception, SIGTERMException) and trainer.global_step != self.saved_step:
            self.save(trainer)

    def save(self, trainer: L.Trainer) -> None:
        """Every rank calls this (the strategy gathers state); rank zero writes and renames."""
        if isinstance(getattr(trainer.strategy, "checkpoint_io", None), AtomicCheckpointIO):
            trainer.save_checkpoint(self.path)  # staged beside it and renamed: a second temporary would only cost
        else:
            tmp = self.path.with_name(f".{self.path.name}.tmp-{socket.gethostname()}-{os.getpid()}")
            trainer.save_checkpoint(tmp)
            if trainer.is_global_zero:
                os.replace(tmp, self.path)
        self.saved_step = trainer.global_step


class ValidateAtEnd(L.Callback):
    """Validate after the last training step when ``val_check_interval`` would not: a run shorter than the
    interval (a 30-step fine-tune with validation every 1000) otherwise ends with no val/loss, no best
    checkpoint and no metrics.csv row. Asking Lightning to stop at that step makes its own loop validate
    there, so checkpoints and loggers see it as any other validation (and it runs once if the step was a
    check step anyway). `musictx.commands.train_objects.build` puts it first in every run's callbacks.

    A run resumed from a checkpoint written in such a validation would log every step one too low:
    Lightning counts logged steps apart from ``global_step`` and, for a checkpoint written in a validation,
    adds the missing one only when its schedule says that step validates. The count is put right at the
    first batch of a fit, before the other callbacks log.
    """

    def __init__(self):
        self._first_batch = False

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._first_batch = True

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        if self._first_batch and pl_module.automatic_optimization:
            loop = trainer.fit_loop.epoch_loop  # one logged step per optimizer step: equal at a batch start
            loop._batches_that_stepped = max(loop._batches_that_stepped, trainer.global_step)
        self._first_batch = False

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        if is_final_batch(trainer):
            trainer.should_stop = True


def is_final_batch(trainer: L.Trainer) -> bool:
    """Whether the batch that just ended is the run's last: ``max_steps`` reached, or the last batch of
    the last of ``max_epochs``."""
    if trainer.max_steps is not None and trainer.max_steps > 0 and trainer.global_step >= trainer.max_steps:
        return True
    loop = trainer.fit_loop.epoch_loop
    max_epochs = trainer.max_epochs
    return (max_epochs is not None and max_epochs > 0 and trainer.current_epoch >= max_epochs - 1
            and loop.batch_progress.is_last_batch)


class RecallProbe(L.Callback):
    """Log the copy gain (`musictx.evaluation.recall.copy_gain`) of the validation split at every validation, as
    ``recall/gain_<gap>``: the nats/token a repeated passage gains from having been heard ``gap`` tokens
    earlier. The probes are drawn once, so the curve follows the model, not the draw. Gaps whose probe
    does not fit the model's context are left out, and a split too small for probes is said once."""

    def __init__(self, gaps: tuple[int, ...], num_probes: int, passage: int, skip: int = 16, seed: int = 0):
        # gaps, num_probes and passage: conf/callbacks/default.yaml's recall_probe block, their one home
        self.gaps, self.num_probes, self.passage, self.skip, self.seed = tuple(gaps), num_probes, passage, skip, seed
        self._probes = None

    def _setup(self, trainer: L.Trainer, pl_module: L.LightningModule) -> bool:
        if self._probes is not None:
            return bool(self._probes)
        context = context_ceiling(pl_module.net) or getattr(trainer.datamodule, "seq_len", None) or 0
        self.gaps = tuple(g for g in self.gaps if 2 * self.passage + g <= context + 1)
        if not self.gaps:  # said before any probe is drawn: drawing them for no gap is no error of the data's
            print(f"recall probe off: no gap fits a context of {context} with passages of {self.passage} tokens")
            self._probes = []
            return False
        try:
            arrays = TokenArrays(trainer.datamodule.dir, "validation")
            self._probes = draw_probes(arrays, self.num_probes, self.passage, max(self.gaps), self.seed)
        except ValueError as err:
            self._probes = []
            print(f"recall probe off: {err}")
        return bool(self._probes)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not self._setup(trainer, pl_module):
            return
        tok = trainer.datamodule.tokenizer
        for gap in self.gaps:
            gain = copy_gain(pl_module.net, tok, self._probes, gap, self.skip, device=pl_module.device)["gain"]
            pl_module.log(f"recall/gain_{gap}", gain, rank_zero_only=True, batch_size=1)
