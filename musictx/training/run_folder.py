"""The run folder of ``musictx-train``: refused when the output policy says so, or when it holds a run that a new
run would replace (its checkpoints and metrics). ``ckpt_path`` resumes that run; ``overwrite=true`` replaces it.
"""

from __future__ import annotations

from pathlib import Path

from musictx.safe_output import OutputError, check_target


def run_files(run_dir: Path, ckpt_dir: Path) -> list[str]:
    """What marks ``run_dir`` as holding a run: its checkpoints and metrics (names relative to it)."""
    found = sorted(ckpt_dir.glob("*.ckpt")) + sorted(run_dir.glob("csv/metrics.csv"))
    return [str(p.relative_to(run_dir)) if p.is_relative_to(run_dir) else str(p) for p in found]


def check_run_folder(cfg) -> None:
    """OutputError when the run folder is refused (`musictx.safe_output.check_target`) or holds a run that
    this one does not resume (``ckpt_path``) and ``overwrite`` is not set."""
    run_dir = Path(cfg.paths.output_dir)
    check_target(run_dir, "hydra.run.dir")
    ckpt_dir = Path(cfg.paths.ckpt_dir)
    check_target(ckpt_dir, "paths.ckpt_dir")
    held = run_files(run_dir, ckpt_dir)
    if not held or cfg.get("overwrite"):
        return
    ckpt = cfg.get("ckpt_path")
    if ckpt and (str(ckpt) in ("last", "best") or Path(str(ckpt)).resolve().is_relative_to(run_dir.resolve())):
        return  # resumes this folder's own run
    shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
    raise OutputError(f"hydra.run.dir={run_dir} already holds a run ({shown}), which a new run would replace; "
                      f"resume it with hydra.run.dir={run_dir} ckpt_path=last, start a fresh run in a new folder "
                      "(leave hydra.run.dir out: outputs/train/<date>/<time>), or pass overwrite=true")
