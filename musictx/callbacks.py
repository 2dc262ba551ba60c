"""Lightning callbacks of musictx-train."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException


class LastCheckpoint(L.Callback):
    """Keep ``<dirpath>/last.ckpt`` current: written after every validation and when training ends.

    Lightning's ``save_last`` follows the top-k save (``last.ckpt`` is refreshed only when val/loss
    improves), so a resume could silently rewind. The file is written beside the target under a
    temporary name and then renamed over it, so a run killed mid-save keeps the previous good file; the
    temporary files such kills leave are removed when a run starts in the folder (`remove_dead_temporaries`).
    On SIGTERM the current step is saved too.
    """

    def __init__(self, dirpath: str | os.PathLike, filename: str = "last.ckpt"):
        self.path = Path(dirpath) / filename
        self.saved_step: int | None = None

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            for path in remove_dead_temporaries(self.path):
                print(f"removed {path}: left by a run killed while saving")

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
        tmp = self.path.with_name(f".{self.path.name}.tmp-{socket.gethostname()}-{os.getpid()}")
        trainer.save_checkpoint(tmp)
        if trainer.is_global_zero:
            os.replace(tmp, self.path)
        self.saved_step = trainer.global_step


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):  # not a possible pid
        return False
    return True


def remove_dead_temporaries(path: Path) -> list[Path]:
    """Remove the ``.<name>.tmp-<host>-<pid>`` files beside ``path`` (older runs wrote ``.tmp-<pid>``) that
    a process of this host wrote and that is gone: a run killed during a save leaves one, as large as a
    checkpoint. Files of live processes, of other hosts and of other names are kept."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.tmp-(?:(?P<host>.+)-)?(?P<pid>\d+)")
    removed = []
    if not path.parent.is_dir():
        return removed
    host = socket.gethostname()
    for candidate in sorted(path.parent.iterdir()):
        match = pattern.fullmatch(candidate.name)
        if not match or match["host"] not in (None, host) or not candidate.is_file():
            continue
        pid = int(match["pid"])
        if pid != os.getpid() and not pid_alive(pid):
            candidate.unlink()
            removed.append(candidate)
    return removed
