"""The one output policy of every musictx command (prep, train, generate, evaluate, export, attention, app).

Reading was already safe; writing was not: export replaced the shipped model, a new training run in an old
run folder destroyed it, a full disk left truncated files. So every command writes through this module:

- `check_target` refuses, before any work, a target inside the installed package or the source tree's
  ``musictx/`` (its models and configs are lost on reinstall, or packaged with a wheel), ``/``, the home
  folder itself, the system's folders (``/etc``, ``/usr``, ``/var`` but its tmp ..., `SYSTEM_DIRS`), links
  followed, and an input's own folder where writing there would replace the input;
- `claim` refuses to replace a file this run did not create, unless the user said ``overwrite=true``;
- `atomic_path` writes each file under a temporary name in its folder and renames it into place, so a
  failure leaves the whole file or none, and a full disk becomes one `OutputError` naming the file and the
  free space.

Tests stand a temporary tree in for the package: `PROTECTED_ENV` names more roots to protect (os.pathsep
between them), so the refusal is tried without touching the real package.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from musictx.paths import PACKAGE_DIR

PROTECTED_ENV = "MUSICTX_PROTECTED_ROOTS"
FULL_DISK = (errno.ENOSPC, errno.EDQUOT)
OVERWRITE_HINT = "pass {flag} to replace it"


class OutputError(OSError):
    """A write the policy refuses, or one the disk refused; the message is one line naming the file and what
    to do. An OSError, so that callers catching write failures catch it too."""

    def __str__(self) -> str:
        return " ".join(str(self.args[0]).split()) if self.args else "output refused"


class _Run:
    """What the current command run may replace: the files it created itself, everything with ``overwrite``."""

    def __init__(self, overwrite: bool = False, flag: str = "overwrite=true"):
        self.overwrite, self.flag = overwrite, flag  # flag: how the command's user says "overwrite"
        self.created: set[str] = set()
        self.swept: set[Path] = set()  # the folders `sweep_leftovers` cleared


# Outside a command (the library in a script or a notebook) the caller decides what it replaces; a command
# runs inside `command_run`, where only its own files may be replaced.
_run = _Run(overwrite=True)


@contextmanager
def command_run(overwrite: bool = False, flag: str = "overwrite=true") -> Iterator[None]:
    """A command's run: inside it, `claim` refuses to replace a file the run did not create (unless
    ``overwrite``, which the command's user gives as ``flag``: its refusals say so); the files earlier runs of
    this process created do not count (tests run many)."""
    global _run
    before, _run = _run, _Run(bool(overwrite), flag)
    try:
        yield
    finally:
        _run = before


def overwrite_allowed() -> bool:
    return _run.overwrite


def mark_created(path: str | os.PathLike) -> None:
    """``path`` was made by this run (claimed empty with O_EXCL, say): it may be written again."""
    _run.created.add(os.path.realpath(path))


def protected_roots() -> list[Path]:
    """The folders no command writes into: the package, the source tree's ``musictx/`` when the working folder
    is a checkout, and those `PROTECTED_ENV` names."""
    roots = [PACKAGE_DIR]
    checkout = Path.cwd() / "musictx"
    if (checkout / "__init__.py").is_file() and (checkout.parent / "pyproject.toml").is_file():
        roots.append(checkout.resolve())
    roots += [Path(p).resolve() for p in os.environ.get(PROTECTED_ENV, "").split(os.pathsep) if p]
    return roots


# The system's own folders: no output belongs there (checked after links are followed: a link to /etc is /etc)
SYSTEM_DIRS = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev", "/proc",
               "/sys", "/var", "/System", "/Library", "/private/etc", "/private/var")
SYSTEM_TEMP = ("/var/tmp", "/var/folders", "/private/var/tmp", "/private/var/folders")  # temporary: allowed


def system_folder(real: Path) -> str | None:
    """The system folder ``real`` (links followed) is in or is, or None (a temporary folder under /var is not)."""
    if any(real == Path(t) or Path(t) in real.parents for t in SYSTEM_TEMP):
        return None
    for folder in SYSTEM_DIRS:
        root = Path(folder)
        if real == root or root in real.parents:
            return folder
    return None


def _real(path: str | os.PathLike) -> Path:
    return Path(os.path.realpath(os.path.abspath(path)))  # a symlink loop is no error here


def target_problem(path: str | os.PathLike, inputs: dict[str, str | os.PathLike | None] | None = None) -> str | None:
    """Why writing into the folder ``path`` is refused, or None. ``inputs``: option name -> an input folder
    that this output may not be (writing there would replace or mix with the input)."""
    real = _real(path)
    if real == Path(real.anchor):
        return "the root of the file system; choose a folder of your own"
    if real == _real(Path.home()):
        return "your home folder itself; choose a folder inside it"
    system = system_folder(real)
    if system:
        where = f" ({real})" if str(real) != os.path.abspath(path) else ""
        return f"inside the system folder {system}{where}; choose a folder of your own"
    for root in protected_roots():
        if real == root or root in real.parents:
            return f"inside the installed musictx package ({root}); choose a folder of your own"
    for name, folder in (inputs or {}).items():
        if folder is not None and Path(folder).exists() and real == _real(folder):
            return f"the folder of the input {name}={folder}, which this would replace; choose another folder"
    return None


def check_target(path: str | os.PathLike, key: str, inputs: dict | None = None) -> Path:
    """``path`` as a Path, or OutputError ``<key>=<path>: <why>`` (see `target_problem`)."""
    problem = target_problem(path, inputs)
    if problem:
        raise OutputError(f"{key}={path}: {problem}")
    return Path(path)


def claim(path: str | os.PathLike, key: str = "output") -> Path:
    """``path``, to be written by this run: OutputError when it exists and this run did not create it (and
    ``overwrite`` was not given), or when it is a folder."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path} is a folder, not a file this run may write; choose another {key}")
    if os.path.lexists(path) and not _run.overwrite and os.path.realpath(path) not in _run.created:
        hint = OVERWRITE_HINT.format(flag=_run.flag)
        raise OutputError(f"{path} already exists and this run did not write it; {hint}, or choose another {key}")
    return path


def check_new(paths, key: str = "output") -> None:
    """`claim` each of ``paths`` before any work: a run that would replace a file stops before it starts."""
    for path in paths:
        claim(path, key)


def free_space(folder: str | os.PathLike) -> str:
    """The free space of the disk holding ``folder``, as people read it (``3.2 MB``)."""
    for place in (Path(folder), *Path(os.path.abspath(folder)).parents):
        try:
            return size_text(shutil.disk_usage(place).free)
        except OSError:
            continue
    return "unknown space"


def size_text(size: int) -> str:
    """A number of bytes as people read it (``3.2 MB``)."""
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("kB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def full_disk_error(path: str | os.PathLike, err: OSError) -> OutputError:
    """The one line a full disk (or quota) becomes."""
    return OutputError(f"cannot write {path}: the disk is full ({free_space(Path(path).parent)} free); the "
                       "files finished before it are kept; free some space or choose another output folder")


def temp_path(path: Path) -> Path:
    """The hidden name ``path`` is written under before it is renamed into place (same folder: same disk)."""
    # the suffix is kept: writers that pick the format by it (matplotlib, symusic, wave) still do
    return path.with_name(f".{path.stem}.tmp-{socket.gethostname()}-{os.getpid()}{path.suffix}")


def claim_path(path: Path) -> Path:
    """The hidden name that reserves ``path`` for one run until it is written (`claim_name`)."""
    return path.with_name(f".{path.name}.claim")


def claim_name(path: str | os.PathLike) -> bool:
    """Reserve ``path`` for this process: its hidden claim (`claim_path`, holding this host and process id)
    is created exclusively, and ``path`` itself must not exist. False when either is taken. Nothing visible is
    made: a run killed at any moment leaves no empty ``path``, and its claim is swept by the next run there
    (`sweep_leftovers`). Release with `release_name`."""
    path = Path(path)
    marker = claim_path(path)
    if os.path.lexists(path):
        return False
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"{socket.gethostname()} {os.getpid()}\n")
    except OSError as err:  # a full disk takes the (empty) name but not its text: an empty claim nobody sweeps
        marker.unlink(missing_ok=True)
        raise full_disk_error(path, err) if err.errno in FULL_DISK else err from None
    if os.path.lexists(path):  # written whole by another run between the check and the claim
        marker.unlink(missing_ok=True)
        return False
    return True


NameFamily = tuple[Callable[[int], str], Callable[[list[str]], int], int]  # name_of(n), start(names), count


def claim_numbered(folder: str | os.PathLike, *families: NameFamily) -> list[list[int]]:
    """For each family (``name_of``, ``start``, ``count``) of numbered names in ``folder``, the first ``count``
    numbers from ``start(the folder's names)`` whose name ``name_of(n)`` is free, each reserved
    (`claim_name`). What a killed run left in ``folder`` (`sweep_leftovers`) goes first."""
    folder = Path(folder)
    _run.swept.add(folder)
    sweep_leftovers(folder)
    names, claimed = os.listdir(folder), []
    try:
        for name_of, start, count in families:
            number, mine = start(names), []
            claimed.append(mine)
            while len(mine) < count:
                if claim_name(folder / name_of(number)):
                    mine.append(number)
                number += 1
    except BaseException:  # a full disk at the k-th claim: the earlier ones go too, not at this process's end
        for (name_of, _, _), mine in zip(families, claimed, strict=False):
            for number in mine:
                release_name(folder / name_of(number))
        raise
    return claimed


def release_name(path: str | os.PathLike) -> None:
    claim_path(Path(path)).unlink(missing_ok=True)


# .name.tmp-HOST-PID.suffix (temp_path) and .name.claim (claim_path, its text "HOST PID")
_TEMP = re.compile(r"^\..+\.tmp-(?P<host>.+)-(?P<pid>\d+)(\.[^.]*)?$")


def _dead(host: str, pid: int) -> bool:
    """Whether process ``pid`` of ``host`` is gone (only this host's can be told; another's is kept)."""
    if (host, pid) == ("", -1):  # an abandoned empty claim (`_empty_claim_owner`)
        return True
    return host == socket.gethostname() and process_gone(pid)


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` of this host is gone (not this one; another user's is alive)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError, ValueError):  # gone, or no possible pid
        return True
    except OSError:  # another user's process: alive
        return False
    return False


def _owner(folder: Path, name: str) -> tuple[str, int] | None:
    found = _TEMP.match(name)
    if found:
        return found["host"], int(found["pid"])
    if name.startswith(".") and name.endswith(".claim"):
        try:
            host, pid = (folder / name).read_text().split()[:2]
            return host, int(pid)
        except (OSError, ValueError):
            return _empty_claim_owner(folder / name)
    return None


EMPTY_CLAIM_S = 60.0  # a claim's text follows its creation at once: one still empty after this was abandoned


def _empty_claim_owner(path: Path) -> tuple[str, int] | None:
    """A stand-in owner, gone, for an empty claim left long enough ago (`EMPTY_CLAIM_S`): a run killed between
    creating the claim and writing its text, or an older musictx whose write met a full disk. It held the
    number from the next run, which numbered its samples after it in a folder that looked empty."""
    try:
        info = path.stat()
    except OSError:
        return None
    if info.st_size == 0 and time.time() - info.st_mtime > EMPTY_CLAIM_S:
        return "", -1  # `_dead` reads this as a process that is gone
    return None


def sweep_leftovers(folder: str | os.PathLike, say=print) -> list[str]:
    """Remove the hidden temporaries and claims a killed run (``kill -9``, a power cut) left in ``folder``: those
    of a process of this host that is gone. Says what it removed in one line; returns the names."""
    folder = Path(folder)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    gone = []
    for name in names:
        owner = _owner(folder, name) if name.startswith(".") else None
        if owner and _dead(*owner) and (folder / name).is_file():
            (folder / name).unlink(missing_ok=True)
            gone.append(name)
    if gone:
        say(f"{folder}: removed {len(gone)} unfinished file(s) a stopped run left there ({', '.join(gone[:3])}"
            f"{' ...' if len(gone) > 3 else ''})")
    return gone


@contextmanager
def atomic_path(path: str | os.PathLike, key: str = "output", replace: bool = False) -> Iterator[Path]:
    """Yield a temporary name beside ``path`` to write; when the block ends well it replaces ``path`` (one
    rename), else it is removed and ``path`` is left as it was. A full disk raises `full_disk_error`. An
    existing ``path`` must be this run's (`claim`) unless ``replace`` (the caller settled it before)."""
    path = Path(path) if replace else claim(path, key)
    _sweep_once(path.parent)  # a killed run's temporaries go before this run writes beside them
    tmp = temp_path(path)
    try:
        yield tmp
        if not tmp.exists():
            raise OutputError(f"cannot write {path}: nothing was written")
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        if err.errno in FULL_DISK:
            raise full_disk_error(path, err) from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    mark_created(path)


@contextmanager
def atomic_paths(paths, key: str = "output") -> Iterator[list[Path]]:
    """`atomic_path` for several files written together: a temporary name for each; when the block ends well
    each replaces its path, else none is made (the files of one result appear together or not at all)."""
    with ExitStack() as stack:
        yield [stack.enter_context(atomic_path(path, key)) for path in paths]


def _sweep_once(folder: Path) -> None:
    """`sweep_leftovers` of ``folder``, the first time this run writes there."""
    if folder not in _run.swept:
        _run.swept.add(folder)
        sweep_leftovers(folder)


def write_bytes(path: str | os.PathLike, data: bytes, key: str = "output", replace: bool = False) -> Path:
    with atomic_path(path, key, replace) as tmp, open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())  # the data is on disk before the rename makes it the file
    return Path(path)


def write_text(path: str | os.PathLike, text: str, key: str = "output", replace: bool = False) -> Path:
    return write_bytes(path, text.encode("utf-8"), key, replace)


def writable_problem(path: str | os.PathLike) -> str | None:
    """Why the folder ``path`` cannot be made or written into, or None: the nearest of it and its parents that
    exists is a file, or is read-only. Checked before Hydra makes a run folder: its own error was a traceback."""
    path = Path(os.path.abspath(path))
    for place in (path, *path.parents):
        if not os.path.lexists(place):
            continue
        if not place.is_dir():
            if place != path:
                return f"{place} is {'a file' if place.is_file() else 'not a folder'}, so no folder can be made in it"
            return f"{place} is {'a file, not a folder' if place.is_file() else 'not a folder'}"
        if os.access(place, os.W_OK | os.X_OK):
            return None
        try:
            read_only = bool(os.statvfs(place).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        why = "is on a read-only file system" if read_only else "is not writable by you"
        return f"{place} {why}" + ("" if place == path else ", so no folder can be made in it")
    return None


def check_writable(path: str | os.PathLike, key: str) -> Path:
    """``path`` as a Path, or OutputError ``<key>=<path>: <why>`` (see `writable_problem`)."""
    problem = writable_problem(path)
    if problem:
        raise OutputError(f"{key}={path}: {problem}; choose another folder")
    return Path(path)
