"""Hydra's side of ``musictx-train``: the objects conf/train.yaml names, built from the composed config.

The DataModule first (the net's ``vocab_size`` comes from the data's ``tokenizer.json``), then the
LightningModule around the net (with ``init_from``, its weights from a saved model), the Trainer with its
callbacks and loggers. Tests build runs with `build` too, so it lives apart from the console script.
"""

from __future__ import annotations

import hydra
import lightning as L
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf, open_dict

from musictx.console.guard import one_line
from musictx.training.best_checkpoints import with_top_k_on_resume
from musictx.training.callbacks import ValidateAtEnd
from musictx.training.checkpoint_io import AtomicCheckpointIO
from musictx.training.finetune import init_net_from, overridden_fields
from musictx.training.options import TrainOptionError, check_schedule, without_hidden_progress_bar
from musictx.training.run import TrainPlan, report, train


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
        for line in (f"init_from={cfg.init_from}: {meta['source']} weights from {meta['path']}", *meta["notes"]):
            report(line)
    module = hydra.utils.instantiate(cfg.model, tokenizer=datamodule.tokenizer.to_dict(), **extra)
    loggers = instantiate_dict(cfg.get("logger"))
    trainer = build_trainer(cfg, loggers)
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
    return datamodule, module, trainer


def build_trainer(cfg: DictConfig, loggers: list) -> L.Trainer:
    """The Trainer of ``cfg.trainer`` with the run's callbacks and ``loggers``. A value Lightning refuses is one line
    naming ``trainer``: it was Hydra's "Error in call to target ..." around Lightning's own message."""
    callbacks = with_top_k_on_resume([ValidateAtEnd(), *instantiate_dict(cfg.get("callbacks"))], say=report)
    callbacks = without_hidden_progress_bar(callbacks, cfg.trainer.get("enable_progress_bar"))
    plugins = [AtomicCheckpointIO()] if cfg.trainer.get("plugins") is None else None  # checkpoints: tmp + rename
    try:
        return hydra.utils.instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False,
                                       **({"plugins": plugins} if plugins else {}))
    except InstantiationException as err:
        raise TrainOptionError(f"trainer: {one_line(err.__cause__ or err)}") from None


def plan_of(cfg: DictConfig) -> TrainPlan:
    """The run's `TrainPlan`, each field read at its key in `TrainPlan.CONFIG_KEYS`."""
    values = {}
    for name, key in TrainPlan.CONFIG_KEYS.items():
        value = OmegaConf.select(cfg, key, default=None)
        values[name] = OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value
    return TrainPlan.from_values(values)


def check_job(cfg: DictConfig) -> None:
    """The checks of a config that need no data nor net: those of a sweep's jobs, before any of them trains."""
    plan_of(cfg)
    check_schedule(OmegaConf.to_container(cfg.schedule, resolve=True))


def train_config(cfg: DictConfig, overrides: list[str] | None = None) -> dict[str, float]:
    """Train what a composed config describes (tests and notebooks call this instead of the console script)."""
    return train(plan_of(cfg), lambda: build(cfg, overrides))
