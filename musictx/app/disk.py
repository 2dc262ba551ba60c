"""The app's disk: one work folder, bounded.

The work folder is also Gradio's cache (``musictx-app`` points ``GRADIO_TEMP_DIR`` at it before Gradio is
imported): Gradio copies a file it serves into its cache unless the file is already there, so results
written inside it are kept once, not twice, and uploads land beside them. `prune` keeps that folder under
`Limits`: the oldest results (and old previews and uploads, when bytes are over) go first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_KEEP_RESULTS = 64  # 16 requests of the page's 4 samples
DEFAULT_MAX_DISK_MB = 1024.0  # about 8 of the largest requests (4 pieces of 120 s seed + 60 s new: ~130 MB)
RUN_PREFIX = "run_"  # a request's folder of results (`Continuer` names them run_0001, run_0002...)


@dataclass(frozen=True)
class Limits:
    """How much the work folder keeps: at most ``keep_results`` continuations and ``max_disk_mb`` MB in
    all (results, seed previews, uploads). The newest request's results are kept even when they alone are
    over, so that a caller never gets files that are already gone."""

    keep_results: int = DEFAULT_KEEP_RESULTS
    max_disk_mb: float = DEFAULT_MAX_DISK_MB

    def __post_init__(self):
        if self.keep_results < 1:
            raise ValueError(f"keep_results must be >= 1, got {self.keep_results}")
        if not self.max_disk_mb > 0:
            raise ValueError(f"max_disk_mb must be > 0, got {self.max_disk_mb}")

    @property
    def max_bytes(self) -> int:
        return int(self.max_disk_mb * 2**20)

    def line(self) -> str:
        """What the page says about it."""
        return (f"This server keeps the newest {self.keep_results} results and at most {self.max_disk_mb:g} MB of "
                "files; older ones are removed first, so download what you want to keep.")


@dataclass
class Item:
    """One removable thing in the work folder: a request's results, a preview, an upload."""

    path: Path
    bytes: int
    results: int  # continuations in it (MIDI files of a run folder; 0 for anything else)
    mtime: float  # the newest file in it: a result drawn again or a seed used again counts as recent


def make_workdir() -> Path:
    """A new private folder for one app process, inside ``GRADIO_TEMP_DIR`` when that is set (the user said
    where Gradio's files may go), else in the system's temporary folder."""
    parent = os.environ.get("GRADIO_TEMP_DIR") or None
    if parent:
        Path(parent).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="musictx-app-", dir=parent))


def folder_bytes(path: Path) -> int:
    return sum(item.bytes for item in items(path)) + _top_bytes(path)


def results_count(path: Path) -> int:
    return sum(item.results for item in items(path))


def items(workdir: Path) -> list[Item]:
    """The removable things in ``workdir``, oldest first: each folder (a run, an upload's folder; the
    previews folder counts file by file). Loose top-level files (the bundled motif) are never removed."""
    paths = []
    for entry in _scan(workdir):
        if not entry.is_dir(follow_symlinks=False):
            continue
        if entry.name == "previews":
            paths += [Path(e.path) for e in _scan(entry.path) if e.is_file(follow_symlinks=False)]
        else:
            paths.append(Path(entry.path))
    found = []
    for path in paths:
        try:
            found.append(_item(path))
        except FileNotFoundError:  # removed while we looked (another thread's prune, Gradio's temporaries)
            continue
    return sorted(found, key=lambda item: item.mtime)


def prune(workdir: Path, limits: Limits, keep: set[Path]) -> list[Path]:
    """Remove the oldest items of ``workdir`` until it holds at most ``limits.keep_results`` results and
    ``limits.max_bytes`` bytes; never an item that holds or is one of ``keep``. Returns what was removed."""
    found = items(workdir)
    results = sum(item.results for item in found)
    size = sum(item.bytes for item in found) + _top_bytes(workdir)
    removed = []
    for item in found:
        over_count, over_bytes = results > limits.keep_results, size > limits.max_bytes
        if not (over_count or over_bytes):
            break
        if (not over_bytes and item.results == 0) or any(is_in(k, item.path) for k in keep):
            continue  # over on results only: previews and uploads may stay; and never what is spared
        if item.path.is_dir():
            shutil.rmtree(item.path, ignore_errors=True)
        else:
            item.path.unlink(missing_ok=True)
        results, size = results - item.results, size - item.bytes
        removed.append(item.path)
    return removed


def _item(path: Path) -> Item:
    if path.is_file():
        info = path.stat()
        return Item(path, info.st_size, 0, info.st_mtime)
    size, results, newest = 0, 0, path.stat().st_mtime
    for folder, _, names in os.walk(path):
        for name in names:
            try:
                info = os.lstat(os.path.join(folder, name))
            except FileNotFoundError:  # removed while we looked (a request's temporary file)
                continue
            size, newest = size + info.st_size, max(newest, info.st_mtime)
            results += path.name.startswith(RUN_PREFIX) and name.endswith(".mid")
    return Item(path, size, results, newest)


def _scan(folder) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except FileNotFoundError:
        return []


def _top_bytes(workdir: Path) -> int:
    """Bytes of the loose files at the top (the motif, uploads Gradio is still receiving)."""
    total = 0
    for entry in _scan(workdir):
        try:
            total += entry.stat(follow_symlinks=False).st_size if entry.is_file(follow_symlinks=False) else 0
        except FileNotFoundError:
            continue
    return total


def is_in(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or below it (by name: it need not exist)."""
    path, folder = Path(os.path.abspath(path)), Path(os.path.abspath(folder))
    return path == folder or folder in path.parents
