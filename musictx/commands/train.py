"""``musictx-train``: train a net on a prepared dataset. Configs in ``conf/train.yaml`` and its groups.

The data's ``tokenizer.json`` sets the net's ``vocab_size`` (data prep writes the vocabulary; training
reads it). Checkpoints land in ``<hydra run dir>/checkpoints`` (``last.ckpt`` and the best by
``val/loss``); `musictx.training.lit_module.load_checkpoint` rebuilds the net and tokenizer from one.
"""

from __future__ import annotations

import logging
import sys

import hydra
import lightning as L
import torch
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf, open_dict

from musictx.commands.config_help import with_key_help
from musictx.paths import CONF_DIR
from musictx.training.callbacks import ValidateAtEnd
from musictx.training.data import MusicDataModule
from musictx.training.lit_module import MusicLitModule
from musictx.training.resume import check_resume_fits, resolve_resume_path

# The run's own lines (model, resume, warnings, checkpoints) for <run>/train.log; `main` gives it Hydra's
# file handler. They are printed as well, so a run outside Hydra (tests, notebooks) still shows them.
RUN_LOG = logging.getLogger("musictx.commands.train.run")
RUN_LOG.propagate = False


def report(line: str, stream=None) -> None:
    """Print ``line`` (to stdout, or ``stream``) and keep it in the run's train.log."""
    print(line, file=stream or sys.stdout)
    RUN_LOG.info(line)


def log_to_run_file() -> None:
    """Hydra writes the root logger's records to <run>/train.log, but Lightning's loggers stop at their own
    console handler and the run's lines are plain prints, so the file stayed empty. Give both this run's
    file (a multirun's earlier job keeps its own)."""
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    RUN_LOG.setLevel(logging.INFO)
    for logger in (RUN_LOG, logging.getLogger("lightning.pytorch"), logging.getLogger("lightning.fabric")):
        if not logger.propagate:  # else the root logger's file has its records already
            logger.handlers = [h for h in logger.handlers if not isinstance(h, logging.FileHandler)] + files


def instantiate_dict(cfg: DictConfig | None) -> list:
    """Objects of a dict of configs (callbacks, loggers); null entries are skipped."""
    return [hydra.utils.instantiate(c) for c in (cfg or {}).values() if c is not None]


def build(cfg: DictConfig, overrides: list[str] | None = None) -> tuple[MusicDataModule, MusicLitModule, L.Trainer]:
    """The DataModule, the LightningModule around the net, and the Trainer of a composed config.
    Sets ``cfg.model.net.vocab_size`` from the data's tokenizer.json. With ``init_from`` the net starts
    from saved weights (`musictx.training.finetune`); ``overrides`` are the command line's, to tell an asked-for
    shape change from a default."""
    datamodule: MusicDataModule = hydra.utils.instantiate(cfg.data)
    with open_dict(cfg):
        cfg.model.net.vocab_size = datamodule.vocab_size
    extra = {}
    if cfg.get("init_from"):
        extra["net"] = pretrained_net(cfg, datamodule, overrides or [])
    module: MusicLitModule = hydra.utils.instantiate(cfg.model, tokenizer=datamodule.tokenizer.to_dict(), **extra)
    loggers = instantiate_dict(cfg.get("logger"))
    callbacks = [ValidateAtEnd(), *instantiate_dict(cfg.get("callbacks"))]
    trainer: L.Trainer = hydra.utils.instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
    return datamodule, module, trainer


def pretrained_net(cfg: DictConfig, datamodule: MusicDataModule, overrides: list[str]):
    from musictx.models import MODELS
    from musictx.training.finetune import init_net_from, overridden_fields

    net_cfg = OmegaConf.to_container(cfg.model.net, resolve=True)
    target = net_cfg.pop("_target_", "")
    name = next((k for k, c in MODELS.items() if target.endswith(c.__name__)), None)
    net, meta = init_net_from(cfg.init_from, net_cfg, datamodule.tokenizer, overridden_fields(overrides), name)
    report(f"init_from={cfg.init_from}: {meta['source']} weights from {meta['path']}")
    return net


def resume_dir(cfg: DictConfig) -> str:
    """Where this run's LastCheckpoint writes (``ckpt_path=last`` and ``best`` look there)."""
    return OmegaConf.select(cfg, "callbacks.last_checkpoint.dirpath", default=None) or cfg.paths.ckpt_dir


def warn_short_run(cfg: DictConfig) -> None:
    """One line on stderr when the run ends inside its learning-rate warm-up."""
    warmup = OmegaConf.select(cfg, "schedule.warmup_steps", default=None)
    max_steps = OmegaConf.select(cfg, "trainer.max_steps", default=None)
    if warmup and max_steps and 0 < max_steps <= warmup:
        report(f"musictx-train: warning: schedule.warmup_steps={warmup} >= trainer.max_steps={max_steps}: the run "
               f"ends inside its warm-up, the learning rate reaching {max_steps / warmup:.0%} of its peak; lower "
               "schedule.warmup_steps", sys.stderr)


def train(cfg: DictConfig, overrides: list[str] | None = None) -> dict[str, float]:
    """Seed, build, fit (resuming from ``cfg.ckpt_path`` if set); return the final logged metrics."""
    if cfg.get("ckpt_path") and cfg.get("init_from"):
        from musictx.training.finetune import InitFromError

        raise InitFromError("ckpt_path resumes a run with its own weights; init_from starts a new one: set only one")
    ckpt_path, resumed = resolve_resume_path(cfg.get("ckpt_path"), resume_dir(cfg))
    if resumed is not None and ckpt_path != str(cfg.ckpt_path):
        report(f"ckpt_path={cfg.ckpt_path}: resuming from {ckpt_path} at step {resumed.get('global_step')}")
    warn_short_run(cfg)
    if cfg.get("threads"):
        torch.set_num_threads(cfg.threads)
    L.seed_everything(cfg.seed, workers=True)
    datamodule, module, trainer = build(cfg, overrides)
    if resumed is not None:
        check_resume_fits(module.net, resumed, ckpt_path)
        del resumed  # the weights are read again by Lightning; do not hold two copies while training
    if trainer.is_global_zero:
        report(f"model: {type(module.net).__name__}, {sum(p.numel() for p in module.net.parameters()):,} parameters,"
               f" vocab {datamodule.vocab_size}, windows of {datamodule.seq_len} from {datamodule.dir}")
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    except SIGTERMException:
        raise SystemExit(f"musictx-train: stopped by SIGTERM at step {trainer.global_step}; resume with "
                         f"ckpt_path={cfg.paths.ckpt_dir}/last.ckpt") from None
    ckpt = trainer.checkpoint_callback
    if ckpt is not None and trainer.is_global_zero:
        score = "-" if ckpt.best_model_score is None else f"{float(ckpt.best_model_score):.4f}"
        report(f"checkpoints in {ckpt.dirpath}: last.ckpt, best {ckpt.best_model_path or '-'} (val/loss {score})")
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    if cfg.get("evaluate") and trainer.is_global_zero:
        evaluate_after_training(cfg, ckpt.best_model_path or f"{ckpt.dirpath}/last.ckpt")
    return metrics


def evaluate_after_training(cfg: DictConfig, checkpoint: str) -> None:
    """``evaluate: {...}`` in the config (e.g. experiment=compare): score the best checkpoint on a split
    and write ``metrics.json`` in the run dir, as ``musictx-evaluate`` would."""
    from musictx.commands.evaluate import evaluation_config, format_table, run_evaluation, write_result

    ev = evaluation_config(**OmegaConf.to_container(cfg.evaluate, resolve=True))
    ev.checkpoint, ev.data.dir, ev.output_dir = checkpoint, cfg.data.dir, cfg.paths.output_dir
    result = run_evaluation(ev)
    path = write_result(result, ev.output_dir)
    print(format_table(result) + f"\nwrote {path}")


# An absolute config path: a relative one is read as a module path when run as a console script.
@with_key_help("train", "musictx-train")
@hydra.main(config_path=CONF_DIR, config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    """Entry point; returns val/loss so that sweepers (``-m``) can optimise it."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.errors import InstantiationException

    from musictx.checkpoints.model_store import ModelLoadError
    from musictx.io.token_store import DatasetFormatError
    from musictx.io.tokenizer import TokenizerMismatchError
    from musictx.training.finetune import InitFromError

    log_to_run_file()
    try:
        return train(cfg, list(HydraConfig.get().overrides.task)).get("val/loss")
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
