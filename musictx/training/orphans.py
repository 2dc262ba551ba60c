"""What stopped training runs left behind, swept when the next run starts, and said in one line.

A run killed during a save (``kill -9``, the OOM killer, a power cut) leaves the hidden temporary it was
writing: one as large as a checkpoint in the checkpoint folder, one of ``metrics.csv`` or ``hparams.yaml`` in
``csv/``. Their names say which process of which host wrote them (`musictx.safe_output.temp_path`; older runs'
last.ckpt writer used ``.<name>.ckpt.tmp-<pid>``), so those of a process of this host that is gone are removed;
those of live processes and other hosts are kept.

Versions before checkpoints were staged beside their file (`musictx.training.checkpoint_io`) wrote each one to
``$TMPDIR/tmpXXXXXXXX`` first (fsspec's ``mkstemp``), and a kill there left a checkpoint-sized file each time.
Such a name is no proof of ownership, so one is removed only when it is also this user's, untouched for
`STALE_S` (a live save moves its file within seconds) and holds a musictx Lightning checkpoint.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from musictx.safe_output import process_gone, size_text, sweep_leftovers

OLD_LAST = re.compile(r"\..+\.ckpt\.tmp-(?P<pid>\d+)")  # the last.ckpt writer's names before they held the host
MKSTEMP = re.compile(r"tmp[a-z0-9_]{8}")  # tempfile.mkstemp()'s names
STALE_S = 600
# torch.save's zip archive starts with its pickle, stored uncompressed: a Lightning checkpoint's keys are in it
ZIP_MAGIC, MARKS, HEAD_BYTES = b"PK\x03\x04", (b"pytorch-lightning_version", b"musictx"), 1 << 20


def old_leftovers(folder: str | os.PathLike) -> list[Path]:
    """The ``.<name>.ckpt.tmp-<pid>`` files of gone processes in ``folder``: older runs' last.ckpt writer."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found = [(Path(folder) / n, OLD_LAST.fullmatch(n)) for n in names]
    return [path for path, old in found if old and process_gone(int(old["pid"])) and path.is_file()]


def _sizes(folder: str | os.PathLike) -> dict[str, int]:
    """The size of each hidden file in ``folder`` (what `sweep_leftovers` may remove, weighed before it does)."""
    try:
        return {e.name: e.stat(follow_symlinks=False).st_size for e in os.scandir(folder) if e.name.startswith(".")}
    except OSError:
        return {}


def _remove(paths: list[Path]) -> list[tuple[Path, int]]:
    removed = []
    for path in paths:
        try:
            size = path.lstat().st_size
            path.unlink()
        except OSError:
            continue
        removed.append((path, size))
    return removed


def is_staged_checkpoint(path: Path, now: float | None = None) -> bool:
    """Whether ``path`` is a checkpoint an older musictx left in ``$TMPDIR`` (see the module's docstring)."""
    if not MKSTEMP.fullmatch(path.name):
        return False
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return False
        if (now or time.time()) - info.st_mtime < STALE_S:
            return False
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return False
    return head.startswith(ZIP_MAGIC) and all(mark in head for mark in MARKS)


def tmpdir_leftovers(tmpdir: str | os.PathLike | None = None) -> list[Path]:
    folder = Path(tmpdir or tempfile.gettempdir())
    try:
        names = sorted(n for n in os.listdir(folder) if MKSTEMP.fullmatch(n))
    except OSError:
        return []
    now = time.time()
    return [folder / n for n in names if is_staged_checkpoint(folder / n, now)]


def sweep_orphans(folders: Iterable[str | os.PathLike], tmpdir: bool = True, say=print) -> list[Path]:
    """Remove what stopped runs left in ``folders`` (and, with ``tmpdir``, in ``$TMPDIR``) and say in one line
    how many files and how many bytes went, and where; returns the files removed."""
    seen, removed = set(), []
    for folder in folders:
        if os.path.realpath(folder) in seen:
            continue
        seen.add(os.path.realpath(folder))
        sizes = _sizes(folder)  # the hidden temporaries and claims of gone processes (`musictx.safe_output`)
        removed += [(Path(folder) / n, sizes.get(n, 0)) for n in sweep_leftovers(folder, say=lambda line: None)]
        removed += _remove(old_leftovers(folder))
    if tmpdir:
        removed += _remove(tmpdir_leftovers())
    if removed:
        shown = ", ".join(str(p) for p, _ in removed[:3]) + (", ..." if len(removed) > 3 else "")
        say(f"removed {len(removed)} unfinished file(s) that stopped runs left "
            f"({size_text(sum(size for _, size in removed))} in all): {shown}")
    return [p for p, _ in removed]
