"""A folder as a few files of bounded size, and back: how a GPU call's trained models travel home.

The device tool brings back at most 8 files of at most 16 MiB each. `write_bundle` packs a run's exported
folder (config.json, the fp16 shards, train.json) into an uncompressed tar cut into parts ``NAME.tar.K-of-N``
under ``max_part_mb`` each, so three runs side by side fit in 7 files. Each part opens with one line,
``MUSICTX-BUNDLE 1 {json}``: the export's identity (the sha256 of the whole tar), K, N and the manifest (size
and sha256 of every part's data); no extra file travels. `read_bundle` refuses, in one line and before
anything is written, parts of two exports (a write killed between its renames), a missing, cut or changed
part, and any member but a regular file or folder with a plain relative name: it does not trust tarfile's
filter (bypassed on Python 3.11.7, CVE-2025-4517), but writes each file itself into a hidden folder beside
the destination, renamed into place when whole.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

PART = re.compile(r"^(?P<name>.+)\.tar\.(?P<k>\d+)-of-(?P<n>\d+)$")
MAGIC = b"MUSICTX-BUNDLE 1 "
MAX_HEADER = 2**20  # a header line longer than this is no header of ours (it lists ~10,000 parts)
FILE_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE)  # not CONTTYPE or sparse: plain bytes only
KINDS = {tarfile.SYMTYPE: "a symbolic link", tarfile.LNKTYPE: "a hard link", tarfile.CHRTYPE: "a device",
         tarfile.BLKTYPE: "a device", tarfile.FIFOTYPE: "a FIFO"}


class BundleError(ValueError):
    """A bundle refused: one line naming the folder or part and what is wrong."""


def write_bundle(folder: Path, target: Path, max_part_mb: float) -> list[Path]:
    """Pack ``folder``'s regular files into ``target.tar.K-of-N`` parts (`write_parts`)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in Path(folder).rglob("*") if p.is_file() and not p.is_symlink()):
            tar.add(path, arcname=path.relative_to(folder).as_posix())
    return write_parts(buf.getvalue(), target, max_part_mb)


def write_parts(data: bytes, target: Path, max_part_mb: float) -> list[Path]:
    """``data`` as ``target.tar.K-of-N`` parts of at most ``max_part_mb`` each, the header included; all are
    written under temporary names first, then renamed; parts of an older export with another N go."""
    size, n = int(max_part_mb * 2**20), 1
    while (chunk := size - 300 - 100 * n) > 0 and -(-len(data) // chunk) > n:  # an entry takes ~80 bytes
        n = -(-len(data) // chunk)
    if chunk <= 0:
        raise ValueError(f"max_part_mb={max_part_mb}: too small for a bundle of {n} part(s)")
    pieces = [data[k:k + chunk] for k in range(0, len(data), chunk)]
    n = len(pieces)
    manifest = [[len(p), hashlib.sha256(p).hexdigest()] for p in pieces]
    export = hashlib.sha256(data).hexdigest()
    target.parent.mkdir(parents=True, exist_ok=True)
    parts, temps = [], []
    for k, piece in enumerate(pieces, 1):
        header = {"export": export, "part": k, "of": n, "parts": manifest}
        part = target.parent / f"{target.name}.tar.{k}-of-{n}"
        tmp = part.with_name(f".{part.name}.tmp")
        tmp.write_bytes(MAGIC + json.dumps(header, separators=(",", ":")).encode() + b"\n" + piece)
        parts.append(part)
        temps.append(tmp)
    for tmp, part in zip(temps, parts, strict=True):  # the window in which a kill mixes two exports is short
        tmp.replace(part)
    for *_, old in bundle_parts(target.parent, target.name):
        if old not in parts:
            old.unlink(missing_ok=True)
    return parts


def _matches(where: Path) -> list[tuple[re.Match, Path]]:
    return [(m, p) for p in Path(where).iterdir() if (m := PART.match(p.name))] if Path(where).is_dir() else []


def bundle_parts(where: Path, name: str) -> list[tuple[int, int, Path]]:
    """(N, K, path) of every part of bundle ``name`` in ``where``, whatever its N, in order."""
    return sorted((int(m["n"]), int(m["k"]), p) for m, p in _matches(where) if m["name"] == name)


def bundle_names(where: Path) -> list[str]:
    """The bundles in ``where`` (each name once)."""
    return sorted({m["name"] for m, _ in _matches(where)})


def _header(path: Path) -> tuple[dict, int]:
    """A part's header and its length in bytes; BundleError when it has none of ours."""
    with open(path, "rb") as f:
        line = f.readline(MAX_HEADER)
    try:
        head = json.loads(line[len(MAGIC):]) if line.startswith(MAGIC) and line.endswith(b"\n") else None
        n, manifest = head["of"], head["parts"]
        if not (isinstance(head["export"], str) and isinstance(n, int) and 1 <= head["part"] <= n == len(manifest)
                and all(isinstance(s, int) and s >= 0 and isinstance(h, str) for s, h in manifest)):
            raise ValueError
    except (ValueError, TypeError, KeyError):
        raise BundleError(f"{path}: not a part of a musictx bundle (no valid header; damaged, or written by an "
                          "older musictx): export the run again") from None
    return head, len(line)


def _joined(where: Path, name: str) -> bytes:
    """The bundle's tar, after every part has been checked against the export's manifest."""
    parts = bundle_parts(where, name)
    if not parts:
        raise BundleError(f"{where}: no parts of bundle {name!r} ({name}.tar.K-of-N)")
    for *_, path in parts:  # a FIFO or a device named like a part would block or never end
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise BundleError(f"{path}: not a regular file")
    heads = {path: _header(path) for *_, path in parts}
    exports = max(len({h["export"] for h, _ in heads.values()}), len({n for n, _, _ in parts}))
    if exports > 1:
        raise BundleError(f"{where}: bundle {name!r} mixes parts of {exports} exports (a write was cut, or "
                          "two calls' files were put together): export it again")
    for n, k, path in parts:
        if (heads[path][0]["part"], heads[path][0]["of"]) != (k, n):
            raise BundleError(f"{path}: its header says part {heads[path][0]['part']} of {heads[path][0]['of']} "
                              "(renamed?)")
    n = parts[0][0]
    missing = sorted(set(range(1, n + 1)) - {k for _, k, _ in parts})
    if missing:
        raise BundleError(f"{where}: bundle {name!r} misses part(s) {', '.join(map(str, missing))} of {n} "
                          "(the call was cut?)")
    pieces = []
    for _, k, path in parts:
        (size, sha), skip = heads[path][0]["parts"][k - 1], heads[path][1]
        have = path.stat().st_size - skip
        if have != size:
            raise BundleError(f"{path}: {'cut short' if have < size else 'longer than its manifest'} ({have} of "
                              f"{size} bytes)")
        piece = path.read_bytes()[skip:]
        if hashlib.sha256(piece).hexdigest() != sha:
            raise BundleError(f"{path}: damaged (its sha256 differs from the export's manifest)")
        pieces.append(piece)
    data = b"".join(pieces)
    if hashlib.sha256(data).hexdigest() != heads[parts[0][2]][0]["export"]:
        raise BundleError(f"{where}: bundle {name!r}: the parts put together are not the export they name")
    return data


def _checked_members(tar: tarfile.TarFile, size: int, label: str) -> list[tuple[tarfile.TarInfo, PurePosixPath]]:
    """Every member with its relative name, after all are checked: only regular files and folders, plain
    names inside the folder, sizes within the bundle, no name twice or both a file and a folder."""
    members, files, folders = [], set(), set()
    for m in tar:  # each checked as it is read: a size past the end is ours to name, before tarfile trips
        rel = PurePosixPath(m.name)
        if m.type not in (*FILE_TYPES, tarfile.DIRTYPE):
            kind = KINDS.get(m.type, f"of tar type {m.type!r}")
            raise BundleError(f"{label}: member {m.name!r} is not a regular file or folder but {kind}")
        if rel.is_absolute() or ".." in rel.parts or "\\" in m.name or not rel.parts and m.type != tarfile.DIRTYPE:
            raise BundleError(f"{label}: member {m.name!r} is not a plain relative name inside the bundle")
        if m.size < 0 or m.offset_data + m.size > size:
            raise BundleError(f"{label}: member {m.name!r} claims {m.size} bytes, more than the bundle holds")
        if m.isfile() and (rel in files or rel in folders):
            raise BundleError(f"{label}: member {m.name!r} appears twice")
        (files if m.isfile() else folders).add(rel)
        folders.update(rel.parents)
        members.append((m, rel))
    if files & folders:
        raise BundleError(f"{label}: {sorted(map(str, files & folders))[0]!r} is both a file and a folder")
    return members


def _unpack(tar: tarfile.TarFile, members, into: Path) -> None:
    root = os.path.realpath(into)
    for m, rel in members:
        path = into.joinpath(*rel.parts)
        if rel.parts and not os.path.realpath(path).startswith(root + os.sep):  # never, with only files here
            raise BundleError(f"{into}: member {m.name!r} would land outside it")
        if m.type == tarfile.DIRTYPE:
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as out, tar.extractfile(m) as src:
            shutil.copyfileobj(src, out)


def read_bundle(where: Path, name: str, dest: Path, replace: bool = False) -> Path:
    """Unpack bundle ``name`` found in ``where`` into the new folder ``dest`` (an existing one is replaced
    only with ``replace``; an empty one may be taken); BundleError, and nothing written, when the set or its
    tar is refused."""
    where, dest = Path(where), Path(dest)
    if dest.exists() and not replace and not (dest.is_dir() and not any(dest.iterdir())):
        raise BundleError(f"{dest}: already exists; choose a new folder to unpack bundle {name!r} into")
    data = _joined(where, name)
    label = f"{where}: bundle {name!r}"
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
        members = _checked_members(tar, len(data), label)
    except (tarfile.TarError, EOFError) as err:
        raise BundleError(f"{label} is not a whole tar ({' '.join(str(err).split())})") from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.unpack-", dir=dest.parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp's folder is private; the unpacked one is an ordinary folder
        _unpack(tar, members, tmp)
        if dest.is_dir() and not dest.is_symlink() and not any(dest.iterdir()):
            dest.rmdir()
        elif os.path.lexists(dest):
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
            os.replace(dest, old / "x")
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest
