"""The job behind ``musictx-train``: resume or start, seed, fit, report the checkpoints, evaluate if asked.

The command (`musictx.commands.train`) composes the config, `musictx.commands.train_objects` builds the
DataModule, the LightningModule and the Trainer from it, and this module runs them from a `TrainPlan`, with
no Hydra in sight. Checkpoints land in ``plan.ckpt_dir`` (``last.ckpt`` and the best by ``val/loss``);
`musictx.checkpoints.model_store` rebuilds the net and tokenizer from one.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_only
from lightning.pytorch.utilities.exceptions import SIGTERMException

from musictx.evaluation.run import check_training_evaluation, evaluate, evaluation_options
from musictx.listed import listed
from musictx.training.finetune import InitFromError
from musictx.training.options import TrainOptionError, check_accelerator, check_window_fits, precision_note
from musictx.training.orphans import sweep_orphans
from musictx.training.resume import check_resume_fits, check_resume_tokenizer, resolve_resume_path
from musictx.training.run_folder import held_checkpoints

# The run's own lines (model, resume, warnings, checkpoints) for <run>/train.log; the command gives it Hydra's
# file handler. They are printed as well, so a run outside Hydra (tests, notebooks) still shows them.
RUN_LOG = logging.getLogger("musictx.train.run")
RUN_LOG.propagate = False


def report(line: str, stream=None) -> None:
    """Print ``line`` (to stdout, or ``stream``) and keep it in the run's train.log."""
    print(line, file=stream or sys.stdout)
    RUN_LOG.info(line)


def log_to_run_file() -> None:
    """Hydra writes the root logger's records to <run>/train.log, but Lightning's loggers stop at their own
    console handler and the run's lines are plain prints, so the file stayed empty. Give both this run's
    file (a multirun's earlier job keeps its own). A log line the full disk refuses is dropped: logging's own
    report is a traceback per line, and the run's next write ends it with one line naming the file and disk."""
    logging.raiseExceptions = False
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    RUN_LOG.setLevel(logging.INFO)
    for logger in (RUN_LOG, logging.getLogger("lightning.pytorch"), logging.getLogger("lightning.fabric")):
        if not logger.propagate:  # else the root logger's file has its records already
            logger.handlers = [h for h in logger.handlers if not isinstance(h, logging.FileHandler)] + files


@dataclass
class TrainPlan:
    """What a run does besides building its objects (keys of conf/train.yaml)."""

    seed: int
    ckpt_dir: str                    # where this run's checkpoints go (the SIGTERM line names it)
    resume_dir: str                  # where ``ckpt_path=last`` / ``best`` look
    output_dir: str                  # the run folder (metrics.json of ``evaluate``)
    data_dir: str
    ckpt_path: str | None = None     # resume from: a file, ``last`` or ``best``
    init_from: str | None = None     # start from saved weights (the command builds the net)
    threads: int | None = None
    warmup_steps: int | None = None  # schedule.warmup_steps and trainer.max_steps: the short-run warning
    max_steps: int | None = None
    evaluate: dict | None = None     # ``evaluate: {...}``: score the best checkpoint after training
    overwrite: bool = False          # a new run replaces the run in its folder: the old checkpoints go
    accelerator: str | None = None   # trainer.accelerator and trainer.precision: checked and said (`check_built`)
    precision: str | int | None = None

    # Each field's key in conf/train.yaml, in one place (the command reads them with these keys).
    CONFIG_KEYS = {"seed": "seed", "ckpt_dir": "paths.ckpt_dir", "resume_dir": "callbacks.last_checkpoint.dirpath",
                   "output_dir": "paths.output_dir", "data_dir": "data.dir", "ckpt_path": "ckpt_path",
                   "init_from": "init_from", "threads": "threads", "warmup_steps": "schedule.warmup_steps",
                   "max_steps": "trainer.max_steps", "evaluate": "evaluate",
                   "overwrite": "overwrite", "accelerator": "trainer.accelerator", "precision": "trainer.precision"}

    # The least each whole-number field may be: max_steps -1 is Lightning's "no limit"; threads 0 was silently
    # torch's default (every core) and -1 a raw RuntimeError; a negative warm-up trained on without a word.
    LOWEST = {"threads": 1, "warmup_steps": 0, "max_steps": -1}

    def __post_init__(self):
        for name in ("seed", "threads", "warmup_steps", "max_steps"):  # before Lightning or the schedule compare them
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TrainOptionError(f"{self.CONFIG_KEYS[name]} must be a whole number, got {value!r}")
            if value is not None and value < self.LOWEST.get(name, value):
                raise TrainOptionError(f"{self.CONFIG_KEYS[name]} must be a whole number >= {self.LOWEST[name]}, "
                                       f"got {value!r}")
        if self.evaluate is not None and not isinstance(self.evaluate, dict):  # the shell's brace expansion of
            # an unquoted evaluate={a:1,b:2} gives evaluate=b:2, a string that failed after training in a TypeError
            raise TrainOptionError(f"evaluate must be a block of conf/evaluate.yaml's keys, got {self.evaluate!r}; "
                                   "quote it for the shell: 'evaluate={split:test,mode:nll}'")

    @classmethod
    def from_values(cls, values: dict) -> TrainPlan:
        """The plan of ``{field: value}`` read at `CONFIG_KEYS` (missing or None: the field's default);
        ``resume_dir`` falls back to ``ckpt_dir`` when no last-checkpoint callback names its folder."""
        given = {k: v for k, v in values.items() if v is not None}
        given.setdefault("resume_dir", given.get("ckpt_dir"))
        return cls(**given)


def warn_short_run(plan: TrainPlan) -> None:
    """One line on stderr when the run ends inside its learning-rate warm-up."""
    warmup, max_steps = plan.warmup_steps, plan.max_steps
    if warmup and max_steps and 0 < max_steps <= warmup:
        report(f"musictx-train: warning: schedule.warmup_steps={warmup} >= trainer.max_steps={max_steps}: the run "
               f"ends inside its warm-up, the learning rate reaching {max_steps / warmup:.0%} of its peak; lower "
               "schedule.warmup_steps", sys.stderr)


def train(plan: TrainPlan, build: Callable[[], tuple]) -> dict[str, float]:
    """Seed, ``build()`` (the DataModule, LightningModule and Trainer), fit, resuming from ``plan.ckpt_path``
    if set; return the final logged metrics."""
    ckpt_path, resumed = resume_of(plan)
    finished = nothing_to_train(plan, ckpt_path, resumed) if resumed is not None else None
    # before the data, the net and the Trainer (Lightning would build them all to train no step), and before the
    # sweep: a resume that trains nothing leaves the run folder as it was; the next run that trains sweeps it
    if finished:
        if rank_zero_only.rank == 0:
            report(finished)
        return {}
    if rank_zero_only.rank == 0:  # before anything writes there: what killed runs left, said in one line
        sweep_orphans(run_folders(plan), say=report)
    if resumed is not None and ckpt_path != str(plan.ckpt_path):
        report(f"ckpt_path={plan.ckpt_path}: resuming from {ckpt_path} at step {resumed.get('global_step')}")
    warn_short_run(plan)
    check_accelerator(plan.accelerator)  # before the data and the net are built: it needs neither
    if plan.threads:
        torch.set_num_threads(plan.threads)
    L.seed_everything(plan.seed, workers=True)
    datamodule, module, trainer = build()
    check_built(plan, datamodule, module, trainer)
    if resumed is not None:
        check_resume_tokenizer(datamodule.tokenizer, resumed, ckpt_path, datamodule.dir)
        check_resume_fits(module.net, resumed, ckpt_path)
        del resumed  # the weights are read again by Lightning; do not hold two copies while training
    if plan.evaluate:  # its options on this net, before the fit: they were found bad only after it
        check_training_evaluation(plan.evaluate, module.net, datamodule.seq_len, plan.data_dir)
    if plan.overwrite and not plan.ckpt_path and trainer.is_global_zero:
        remove_old_run(Path(plan.ckpt_dir))
    if trainer.is_global_zero:
        report(f"model: {type(module.net).__name__}, {sum(p.numel() for p in module.net.parameters()):,} parameters,"
               f" vocab {datamodule.vocab_size}, windows of {datamodule.seq_len} from {datamodule.dir}")
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    except SIGTERMException:
        raise SystemExit(f"musictx-train: stopped by SIGTERM at step {trainer.global_step}; resume with "
                         f"ckpt_path={plan.ckpt_dir}/last.ckpt") from None
    best = report_checkpoints(trainer) if trainer.is_global_zero else None
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    if plan.evaluate and best:
        evaluate_after_training(plan, best)
    return metrics


def check_built(plan: TrainPlan, datamodule, module, trainer: L.Trainer) -> None:
    """What needs the built objects, before the fit: windows that fit the net, and a line when the precision that
    runs is not quite the one asked for (`precision_note`; the CPU's bf16 kernels as musictx.models.lstm asks)."""
    check_window_fits(datamodule.seq_len, module.net)
    on_cpu = trainer.strategy.root_device.type == "cpu"
    note = precision_note(plan.precision, trainer.precision, on_cpu, torch.ops.mkldnn._is_mkldnn_bf16_supported())
    if note and trainer.is_global_zero:
        report(note, sys.stderr)


def remove_old_run(ckpt_dir: Path) -> None:
    """``overwrite=true``: the checkpoints of the run this one replaces, removed once the new run is built (a bad
    config leaves them), said in one line. Kept, an old best-*.ckpt stood beside the new run's: ``ckpt_path=best``
    then refused the folder, or resumed the old run's weights."""
    old = held_checkpoints(ckpt_dir)
    for path in old:
        path.unlink(missing_ok=True)
    if old:
        report(f"overwrite=true: removed the old run's checkpoints in {ckpt_dir} ({listed([p.name for p in old])})")


def resume_of(plan: TrainPlan) -> tuple[str | None, dict | None]:
    """The checked file ``plan.ckpt_path`` resumes from and its contents (`resolve_resume_path`); (None, None)
    for a run that starts afresh. Reads and writes nothing else: a refused resume leaves every folder as it was."""
    if plan.ckpt_path and plan.init_from:
        raise InitFromError("ckpt_path resumes a run with its own weights; init_from starts a new one: set only one")
    return resolve_resume_path(plan.ckpt_path, plan.resume_dir)


def finished_resume(plan: TrainPlan) -> str | None:
    """The `nothing_to_train` line of ``plan``'s resume, or None (no resume, or steps left to train). The command
    asks before Hydra starts: Hydra's own files (.hydra/, train.log) would change a run this resume leaves alone."""
    ckpt_path, resumed = resume_of(plan)
    return nothing_to_train(plan, ckpt_path, resumed) if resumed is not None else None


def nothing_to_train(plan: TrainPlan, ckpt_path: str, resumed: dict) -> str | None:
    """The line that says so when the checkpoint resumed from is at or past ``trainer.max_steps``."""
    step = resumed.get("global_step")
    if plan.max_steps is None or plan.max_steps < 0 or not isinstance(step, int) or step < plan.max_steps:
        return None
    which = ckpt_path if ckpt_path == str(plan.ckpt_path) else f"{plan.ckpt_path} ({ckpt_path})"
    return (f"musictx-train: nothing to train: ckpt_path={which} is at step {step}, and trainer.max_steps="
            f"{plan.max_steps}; to train on, raise trainer.max_steps above {step} and resume it again")


def report_checkpoints(trainer: L.Trainer) -> str | None:
    """Say where the run's checkpoints are; return the one to evaluate: the best by val/loss, else last.ckpt.
    The first ModelCheckpoint, not ``trainer.checkpoint_callback``: `TopKOnResume` is a checkpoint callback too."""
    saver = next((c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)), None)
    if saver is None:
        return None
    score = "-" if saver.best_model_score is None else f"{float(saver.best_model_score):.4f}"
    report(f"checkpoints in {saver.dirpath}: last.ckpt, best {saver.best_model_path or '-'} (val/loss {score})")
    return saver.best_model_path or f"{saver.dirpath}/last.ckpt"


def run_folders(plan: TrainPlan) -> list[Path]:
    """The folders a run writes into: its checkpoints', its run folder and the run folder's own folders (csv/)."""
    out = Path(plan.output_dir)
    inner = sorted(p for p in out.iterdir() if p.is_dir() and not p.is_symlink()) if out.is_dir() else []
    return [Path(plan.ckpt_dir), Path(plan.resume_dir), out, *inner]


def evaluate_after_training(plan: TrainPlan, checkpoint: str) -> None:
    """``evaluate: {...}`` in the config (e.g. experiment=compare): score the best checkpoint on a split
    and write ``metrics.json`` in the run dir, as ``musictx-evaluate`` would."""
    opts = evaluation_options(**plan.evaluate)
    opts.checkpoint, opts.data["dir"], opts.output_dir = checkpoint, plan.data_dir, plan.output_dir
    evaluate(opts)
