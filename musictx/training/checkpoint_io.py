"""Checkpoints written whole or not at all: Lightning's `TorchCheckpointIO` writing under a temporary name
in the checkpoint's folder, renamed into place (`musictx.safe_output.atomic_path`). A run killed or out of
disk in the middle of a save keeps the previous checkpoint, and a full disk is one line naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.plugins.io import TorchCheckpointIO

from musictx.safe_output import atomic_path


class AtomicCheckpointIO(TorchCheckpointIO):
    """`TorchCheckpointIO` with tmp + rename. Which files a run may replace was settled before it started
    (`musictx.commands.train`): a resumed run rewrites its own ``best-*.ckpt``."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path, "checkpoint", replace=True) as tmp:
            super().save_checkpoint(checkpoint, tmp, storage_options)
