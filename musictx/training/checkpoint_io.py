"""Checkpoints written whole or not at all, staged beside their destination.

Lightning's `TorchCheckpointIO` saves through fsspec's transaction, which writes each checkpoint to a
``tempfile.mkstemp()`` file in ``$TMPDIR`` and then moves it: a full ``$TMPDIR`` lost every checkpoint (and the
error named the checkpoint folder's disk), and a run killed during the move left a checkpoint-sized
``$TMPDIR/tmpXXXXXXXX``. Here the bytes of `torch.save` are written straight to a temporary name in the
checkpoint's own folder (`musictx.safe_output.atomic_path`: same disk) and synced, and one rename makes it the
checkpoint. A run killed or out of disk in the middle of a save keeps the previous checkpoint, its temporary
is swept by the next run (`musictx.training.orphans`), and a full disk is one line naming the checkpoint and its
disk's free space. No byte of a checkpoint goes through ``$TMPDIR``.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from musictx.safe_output import atomic_path


class AtomicCheckpointIO(TorchCheckpointIO):
    """`TorchCheckpointIO` with tmp beside the file + fsync + rename. Which files a run may replace was settled
    before it started (`musictx.commands.train`): a resumed run rewrites its own ``best-*.ckpt``."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if storage_options is not None:  # as Lightning's: this plugin has no storage options
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Serialised in memory first, as Lightning does: torch's writer turns a failed write into a RuntimeError
        # ("unexpected pos"), while a plain write of the bytes fails with the OSError that says "disk full".
        data = io.BytesIO()
        torch.save(checkpoint, data)
        with atomic_path(path, "checkpoint", replace=True) as tmp, open(tmp, "wb") as f:
            f.write(data.getbuffer())
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename makes it the checkpoint (a power cut keeps one whole)
