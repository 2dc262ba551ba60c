"""Lightning's lines that tell a musictx user nothing, muted on the console and in the run's train.log:

- an advertisement for a cloud logger at every start ("💡 Tip: ... litlogger");
- "`weights_only` was not set, defaulting to `False`." at every checkpoint Lightning writes: it reads like a
  safety warning, and is about what Lightning puts in the file (musictx reads checkpoints with
  ``weights_only=True``: `musictx.checkpoints.model_store`);
- torch's deprecation of ``isinstance(treespec, LeafSpec)``, raised inside Lightning's own code;
- "You passed `Trainer(accelerator='cpu', precision='16-mixed')` ... Using `precision='bf16-mixed'` instead", a
  warning with Lightning's file and line before it: musictx-train says it in its own line
  (`musictx.training.options.precision_note`);
- ModelCheckpoint's warning on a resume from another folder's checkpoint, which ends "Only
  `best_model_path` will be reloaded": that path is another run's file, which
  `musictx.training.best_checkpoints.TopKOnResume` leaves out, saying so in one line of its own.

Every other Lightning line stays as it is.
"""

from __future__ import annotations

import logging
import warnings

MUTED_STARTS = ("💡 Tip:", "`weights_only` was not set")  # how the muted log lines start
MUTED_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero",
                 "lightning.pytorch.trainer.connectors.checkpoint_connector")


class _Mute(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(MUTED_STARTS)


def mute_lightning_noise() -> None:
    """Mute the lines above (idempotent: a sweep's next job calls it again)."""
    for name in MUTED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Mute) for f in logger.filters):
            logger.addFilter(_Mute())
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    warnings.filterwarnings("ignore", message=r"The dirpath has changed from .* won't be reloaded")
    warnings.filterwarnings("ignore", message=r"You passed `Trainer\(accelerator='cpu', precision='16-mixed'\)`")
