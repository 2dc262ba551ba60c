"""The app's disk: one work folder, bounded.

The work folder is also Gradio's cache (``musictx-app`` points ``GRADIO_TEMP_DIR`` at it before Gradio is
imported): Gradio copies a file it serves into its cache unless the file is already there, so results
written inside it are kept once, not twice, and uploads land beside them. `prune` keeps that folder under
`Limits`: the oldest results (and old previews and uploads, when bytes are over) go first.

Disk use is checked before each upload is accepted (`UploadGuard`, in front of Gradio's upload route) and
before each result is written (`room_problem`), not on a timer: a timer let 1,670 MB of uploads in within
20 s under a 50 MB cap. What does not fit once the oldest items are pruned is refused with a message.
"""

from __future__ import annotations

import json
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


def room_problem(workdir: Path, limits: Limits, incoming: int = 0) -> str | None:
    """Why ``incoming`` more bytes do not fit in ``workdir`` (after pruning), or None when they do."""
    used = folder_bytes(workdir)
    if used + incoming <= limits.max_bytes:
        return None
    return (f"the server's disk allowance is used up ({used / 2**20:.1f} of {limits.max_disk_mb:g} MB in use by "
            "recent results and uploads); try again in a while, or ask for shorter or fewer continuations")


class UploadGuard:
    """ASGI middleware in front of Gradio: an upload (a POST to ``.../upload``) is answered 413 with the
    reason, its bytes read and dropped (never stored), when ``check(content_length)`` says they do not fit."""

    def __init__(self, app, check):
        self.app, self.check = app, check

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].rstrip("/").endswith("/upload"):
            length = dict(scope.get("headers") or []).get(b"content-length", b"0")
            problem = self.check(int(length) if length.isdigit() else 0)
            if problem:
                body = json.dumps({"detail": f"Upload refused: {problem}"}).encode()
                await _drain(receive)  # first: the server closes the connection once it has answered
                await send({"type": "http.response.start", "status": 413,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


DRAIN_BYTES = 64 * 2**20  # a refused upload's body read and dropped up to this much; a larger one is cut off


async def _drain(receive) -> None:
    """Read and drop a refused request's body (nothing is stored): a client still sending when the server
    answers and closes would see a broken pipe instead of the 413 and its reason."""
    seen = 0
    while seen <= DRAIN_BYTES:
        message = await receive()
        seen += len(message.get("body", b""))
        if message.get("type") != "http.request" or not message.get("more_body"):
            return


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
