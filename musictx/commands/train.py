"""``musictx-train``: train a net on a prepared dataset (``conf/train.yaml`` and its groups).

Hydra composes the config; `musictx.commands.train_objects` builds the DataModule, the LightningModule and
the Trainer it names, and `musictx.training.run.train` runs them. Errors a user can fix are one line.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from omegaconf import DictConfig

from musictx.checkpoints.model_store import ModelLoadError
from musictx.commands.config_help import with_key_help
from musictx.commands.train_objects import train_config
from musictx.io.token_store import DatasetFormatError
from musictx.io.tokenizer import TokenizerMismatchError
from musictx.paths import CONF_DIR
from musictx.training.finetune import InitFromError
from musictx.training.run import RUN_LOG, log_to_run_file

USER_ERRORS = (InitFromError, ModelLoadError, TokenizerMismatchError, DatasetFormatError)


# An absolute config path: a relative one is read as a module path when run as a console script.
@with_key_help("train", "musictx-train")
@hydra.main(config_path=CONF_DIR, config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    """Entry point; returns val/loss so that sweepers (``-m``) can optimise it."""
    log_to_run_file()
    try:
        return train_config(cfg, list(HydraConfig.get().overrides.task)).get("val/loss")
    except USER_ERRORS as err:
        error = err
    except InstantiationException as err:  # a config value refused by the class it builds (data.seq_len=0)
        if not isinstance(err.__cause__, (ValueError, DatasetFormatError)):
            raise
        error = err.__cause__
    RUN_LOG.error(f"musictx-train: error: {error}")
    raise SystemExit(f"musictx-train: error: {error}")


if __name__ == "__main__":
    main()
