"""The run folder of ``musictx-train``: refused when the output policy says so, when it cannot be written, or when
it holds a run that a new run would replace. ``ckpt_path`` resumes that run; ``overwrite=true`` replaces it.

A run is what can be resumed: a checkpoint (``last.ckpt``, ``best-*.ckpt``, any visible ``*.ckpt``). A folder
that holds metrics or a logger's files but no checkpoint belongs to a run stopped before its first one (a kill,
a crash): nothing there can be resumed, so a run may start again in it, and says so in one line. The hidden
temporaries a killed save leaves are no checkpoint; the next run sweeps them (`musictx.training.orphans`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from musictx.safe_output import OutputError, check_target, check_writable


def _shown(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def _relative(paths: list[Path], run_dir: Path) -> list[str]:
    return [str(p.relative_to(run_dir)) if p.is_relative_to(run_dir) else str(p) for p in paths]


def held_checkpoints(ckpt_dir: Path) -> list[Path]:
    """The checkpoints in ``ckpt_dir`` a run could resume from (hidden temporaries are none)."""
    return sorted(p for p in ckpt_dir.glob("*.ckpt") if not p.name.startswith(".") and p.is_file())


def run_files(run_dir: Path, ckpt_dir: Path) -> list[str]:
    """What marks ``run_dir`` as holding a run: its checkpoints (names relative to it)."""
    return _relative(held_checkpoints(ckpt_dir), run_dir)


def stopped_run_files(run_dir: Path) -> list[str]:
    """The files of a run that stopped before its first checkpoint, which a new run there replaces."""
    return _relative(sorted(p for p in run_dir.glob("csv/*") if not p.name.startswith(".") and p.is_file()), run_dir)


def check_run_folder(cfg, say: Callable[[str], None] | None = None) -> None:
    """OutputError when the run folder is refused (`musictx.safe_output.check_target`), cannot be written, or holds
    a run that this one does not resume (``ckpt_path``) and ``overwrite`` is not set. ``say``: where the line
    on a run stopped before its first checkpoint goes (None: not said; the check runs twice)."""
    run_dir = Path(cfg.paths.output_dir)
    check_target(run_dir, "hydra.run.dir")
    check_writable(run_dir, "hydra.run.dir")
    ckpt_dir = Path(cfg.paths.ckpt_dir)
    check_target(ckpt_dir, "paths.ckpt_dir")
    check_writable(ckpt_dir, "paths.ckpt_dir")
    held = run_files(run_dir, ckpt_dir)
    if not held:
        stopped = stopped_run_files(run_dir)
        if stopped and say is not None and not cfg.get("ckpt_path"):
            say(f"hydra.run.dir={run_dir}: the run there stopped before its first checkpoint, so nothing can be "
                f"resumed; starting it again (its {_shown(stopped)} will be replaced)")
        return
    if cfg.get("overwrite"):
        return
    ckpt = cfg.get("ckpt_path")
    if ckpt and (str(ckpt) in ("last", "best") or Path(str(ckpt)).resolve().is_relative_to(run_dir.resolve())):
        return  # resumes this folder's own run
    raise OutputError(f"hydra.run.dir={run_dir} already holds a run ({_shown(held)}), which a new run would replace; "
                      f"resume it with hydra.run.dir={run_dir} ckpt_path=last, start a fresh run in a new folder "
                      "(leave hydra.run.dir out: outputs/train/<date>/<time>), or pass overwrite=true")
