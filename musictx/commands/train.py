"""``musictx-train``: train a net on a prepared dataset (`musictx.training.run`; ``conf/train.yaml`` and groups).

The command composes the config and builds what it names: the DataModule, the LightningModule around the
net (whose ``vocab_size`` comes from the data's ``tokenizer.json``; with ``init_from``, its weights from a
saved model) and the Trainer with its callbacks and loggers. `musictx.training.run.train` runs them.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf, open_dict

from musictx.checkpoints.model_store import ModelLoadError
from musictx.commands.config_help import with_key_help
from musictx.io.token_store import DatasetFormatError
from musictx.io.tokenizer import TokenizerMismatchError
from musictx.paths import CONF_DIR
from musictx.training.callbacks import ValidateAtEnd
from musictx.training.finetune import InitFromError, init_net_from, overridden_fields
from musictx.training.run import RUN_LOG, TrainPlan, log_to_run_file, report, train


def instantiate_dict(cfg: DictConfig | None) -> list:
    """Objects of a dict of configs (callbacks, loggers); null entries are skipped."""
    return [hydra.utils.instantiate(c) for c in (cfg or {}).values() if c is not None]


def build(cfg: DictConfig, overrides: list[str] | None = None) -> tuple:
    """The DataModule, the LightningModule around the net, and the Trainer of a composed config.
    ``overrides`` are the command line's, to tell an asked-for shape change from a default."""
    datamodule = hydra.utils.instantiate(cfg.data)
    with open_dict(cfg):
        cfg.model.net.vocab_size = datamodule.vocab_size
    extra = {}
    if cfg.get("init_from"):
        net_cfg = OmegaConf.to_container(cfg.model.net, resolve=True)
        fields = overridden_fields(overrides or [])
        extra["net"], meta = init_net_from(cfg.init_from, net_cfg, datamodule.tokenizer, fields)
        report(f"init_from={cfg.init_from}: {meta['source']} weights from {meta['path']}")
    module = hydra.utils.instantiate(cfg.model, tokenizer=datamodule.tokenizer.to_dict(), **extra)
    loggers = instantiate_dict(cfg.get("logger"))
    callbacks = [ValidateAtEnd(), *instantiate_dict(cfg.get("callbacks"))]
    trainer = hydra.utils.instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
    return datamodule, module, trainer


def plan_of(cfg: DictConfig) -> TrainPlan:
    last_dir = OmegaConf.select(cfg, "callbacks.last_checkpoint.dirpath", default=None)
    evaluate = cfg.get("evaluate")
    return TrainPlan(seed=cfg.seed, ckpt_dir=cfg.paths.ckpt_dir, resume_dir=last_dir or cfg.paths.ckpt_dir,
                     output_dir=cfg.paths.output_dir, data_dir=cfg.data.dir, ckpt_path=cfg.get("ckpt_path"),
                     init_from=cfg.get("init_from"), threads=cfg.get("threads"),
                     warmup_steps=OmegaConf.select(cfg, "schedule.warmup_steps", default=None),
                     max_steps=OmegaConf.select(cfg, "trainer.max_steps", default=None),
                     evaluate=OmegaConf.to_container(evaluate, resolve=True) if evaluate else None)


def train_config(cfg: DictConfig, overrides: list[str] | None = None) -> dict[str, float]:
    """Train what a composed config describes (tests and notebooks call this instead of the console script)."""
    return train(plan_of(cfg), lambda: build(cfg, overrides))


# An absolute config path: a relative one is read as a module path when run as a console script.
@with_key_help("train", "musictx-train")
@hydra.main(config_path=CONF_DIR, config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    """Entry point; returns val/loss so that sweepers (``-m``) can optimise it."""
    log_to_run_file()
    overrides = list(HydraConfig.get().overrides.task)
    try:
        return train_config(cfg, overrides).get("val/loss")
    except (InitFromError, ModelLoadError, TokenizerMismatchError, DatasetFormatError) as err:
        error = err
    except InstantiationException as err:  # a config value refused by the class it builds (data.seq_len=0)
        if not isinstance(err.__cause__, (ValueError, DatasetFormatError)):
            raise
        error = err.__cause__
    RUN_LOG.error(f"musictx-train: error: {error}")
    raise SystemExit(f"musictx-train: error: {error}")


if __name__ == "__main__":
    main()
