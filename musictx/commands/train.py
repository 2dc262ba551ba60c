"""``musictx-train``: train a net on a prepared dataset (``conf/train.yaml`` and its groups).

Hydra composes the config; `musictx.commands.train_objects` builds the DataModule, the LightningModule and
the Trainer it names, and `musictx.training.run.train` runs them. Errors a user can fix are one line
(`musictx.console.guard`). Before Hydra makes or writes into the run folder, `check_run_folder` refuses one
inside the package, ``/`` or the home folder, one that cannot be written, and a new run in a folder that already
holds a run (a checkpoint): it would replace that run's checkpoints and metrics. ``ckpt_path`` resumes it;
``overwrite=true`` replaces it. A run stopped before its first checkpoint starts again (`check_run_folder`). A
resume is checked there too: one already at ``trainer.max_steps`` says so and leaves every folder as it was.
"""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from omegaconf import DictConfig

from musictx.commands.train_objects import check_job, plan_of, train_config
from musictx.console.config_help import with_key_help
from musictx.console.guard import before_hydra, command_guard, compose_run_config, fail, one_line
from musictx.decoding.option_fields import check_seed
from musictx.io.token_store import DatasetFormatError
from musictx.paths import CONF_DIR
from musictx.training.lightning_noise import mute_lightning_noise
from musictx.training.run import RUN_LOG, finished_resume, log_to_run_file, report
from musictx.training.run_folder import check_run_folder
from musictx.training.sweeps import sweep_jobs

PROG = "musictx-train"


@with_key_help("train", PROG)
def main() -> None:
    """Console script: the config and the run folder are checked before Hydra starts, then Hydra runs."""
    for job in sweep_jobs(sys.argv[1:]):  # -m: every value of the sweep composed before any job trains
        with command_guard(PROG, config_name="train", overrides=job):  # its choices: its keys
            check_job(compose_run_config("train", job))
    before_hydra("train", PROG, check_before_run)
    train_main()


def check_before_run(cfg: DictConfig) -> None:
    """The seed's range (Lightning refused a seed past 32 bits only after the data loaded), the run folder, then
    the resume: a resume with nothing to train says so and exits 0 here, before Hydra writes its .hydra/ and
    train.log into the run folder (replacing the run's own config) or makes a new one."""
    check_seed("seed", cfg.get("seed"))
    check_run_folder(cfg)
    finished = finished_resume(plan_of(cfg)) if cfg.get("ckpt_path") else None
    if finished:
        print(finished)
        raise SystemExit(0)


# An absolute config path: a relative one is read as a module path when run as a console script.
@hydra.main(config_path=CONF_DIR, config_name="train", version_base="1.3")
def train_main(cfg: DictConfig) -> float | None:
    """Entry point; returns val/loss so that sweepers (``-m``) can optimise it."""
    log_to_run_file()
    mute_lightning_noise(ends_at_max_steps=cfg.trainer.get("max_epochs") is None)
    # a resumed run may replace its own files (metrics.json of evaluate: {...}); check_run_folder settled that
    resumes = bool(cfg.get("overwrite") or cfg.get("ckpt_path"))
    with command_guard(PROG, overwrite=resumes, config_name="train"):
        try:
            check_run_folder(cfg, say=report)  # again: a sweep (-m) is not checked before Hydra
            return train_config(cfg, list(HydraConfig.get().overrides.task)).get("val/loss")
        except InstantiationException as err:  # a config value refused by the class it builds (data.seq_len=0)
            if not isinstance(err.__cause__, (ValueError, DatasetFormatError)):
                raise
            RUN_LOG.error(f"{PROG}: error: {err.__cause__}")
            fail(PROG, one_line(err.__cause__))
    return None


if __name__ == "__main__":
    main()
