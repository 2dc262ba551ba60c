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
- "The number of training batches (4) is smaller than the logging interval Trainer(log_every_n_steps=50). Set a
  lower value ... if you want to see logs for the training epoch", at every start on a small dataset (40 files
  make epochs of a few batches): it is wrong for a run that ends at max_steps (max_epochs null, the default), as
  the interval counts steps across epochs and metrics.csv gets its train rows every log_every_n_steps steps;
  a run of a few short epochs (trainer.max_epochs) keeps it;
- "`Trainer(limit_val_batches=1.0)` was configured so 100% of the batches will be used..", at every start with
  conf/trainer/default.yaml, which writes the 1.0 out to show the option: it says the default.

Every other Lightning line stays as it is.
"""

from __future__ import annotations

import logging
import warnings

MUTED_STARTS = ("💡 Tip:", "`weights_only` was not set",  # how the muted log lines start
                "`Trainer(limit_val_batches=1.0)` was configured so 100%")
MUTED_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero",
                 "lightning.pytorch.trainer.connectors.checkpoint_connector")


class _Mute(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(MUTED_STARTS)


def mute_lightning_noise(ends_at_max_steps: bool = True) -> None:
    """Mute the lines above (idempotent: a sweep's next job calls it again); the log interval's warning only for a
    run that ``ends_at_max_steps``."""
    for name in MUTED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Mute) for f in logger.filters):
            logger.addFilter(_Mute())
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    warnings.filterwarnings("ignore", message=r"The dirpath has changed from .* won't be reloaded")
    warnings.filterwarnings("ignore", message=r"You passed `Trainer\(accelerator='cpu', precision='16-mixed'\)`")
    if ends_at_max_steps:
        warnings.filterwarnings("ignore", message=r"The number of training batches \(\d+\) is smaller than the logging")
