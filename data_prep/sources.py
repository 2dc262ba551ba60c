"""Where the MIDI files come from, and which split each goes to.

Every source yields `SourceFile`s sorted by their relative path, so a re-run sees the same order.
Splits are by piece, never by window: MAESTRO's CSV decides when present; otherwise a stable hash
of the piece key (the file, or its parent folder with ``group_by=parent`` for layouts such as ASAP
where one folder holds several performances of one work).
"""

from __future__ import annotations

import csv
import errno
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

MIDI_SUFFIXES = (".mid", ".midi")
SPLIT_NAMES = {"train": "train", "validation": "validation", "valid": "validation", "val": "validation",
               "test": "test"}
DIR_LINK = "symlink to a folder: not followed"
# POP909's extra arrangements: <song>/versions/<song>-v<K>.mid beside <song>/<song>.mid (data_prep.pop_versions)
_VERSION = re.compile(r"^(?P<folder>(?:.*/)?)versions/(?P<song>[^/]+)-v\d+(?P<ext>\.midi?)$", re.I)


@dataclass(frozen=True)
class SourceFile:
    path: str  # absolute path to read
    rel: str  # path relative to the input folder (stored in the dataset)
    split: str | None  # fixed by the source (MAESTRO), else chosen by hash


def hash_split(key: str, val_fraction: float, test_fraction: float) -> str:
    """Deterministic split of a piece key: the same key always lands in the same split."""
    if not (0 <= val_fraction and 0 <= test_fraction and val_fraction + test_fraction < 1):
        raise ValueError(f"split fractions must be >= 0 and sum below 1, got validation={val_fraction}, "
                         f"test={test_fraction}")
    u = hash_position(key)
    if u < test_fraction:
        return "test"
    if u < test_fraction + val_fraction:
        return "validation"
    return "train"


def hash_position(key: str) -> float:
    """Where a piece key falls in [0, 1): test below ``test``, validation up to ``test + validation``."""
    # surrogateescape: a file name that is not valid UTF-8 hashes as its raw bytes (as os.fsencode gives
    # on POSIX); every valid name hashes exactly as before.
    digest = hashlib.sha1(key.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def main_of(rel: str) -> str | None:
    """The main file of a POP909 version (``NNN/versions/NNN-vK.mid`` -> ``NNN/NNN.mid``); None for any
    other path. Works on relative and absolute POSIX paths alike, and on ``versions/NNN-vK.mid`` -> ``NNN.mid``:
    ``input_dir`` given as one song's folder (its versions were split on their own, leaking the song)."""
    m = _VERSION.match(rel)
    if m is None:
        return None
    folder = m["folder"]
    song = folder.rstrip("/").rsplit("/", 1)[-1] if folder else m["song"]  # the song folder's own spelling
    if song.casefold() != m["song"].casefold():
        return None  # a versions/ folder of another song's files: not POP909's layout
    return f"{folder}{song}{m['ext']}"


def piece_key(rel: str, group_by: str) -> str:
    """The key a file's split is drawn by: itself, or its folder (``group_by=parent``). A POP909 version
    counts as its song's main file, so it always lands in its song's split."""
    rel = main_of(rel) or rel
    if group_by == "file":
        return rel
    if group_by == "parent":
        return str(Path(rel).parent)
    raise ValueError(f"split.group_by must be 'file' or 'parent', got {group_by!r}")


def list_folder(input_dir: str | Path) -> list[SourceFile]:
    """All .mid/.midi files under ``input_dir`` (recursive, suffix case-insensitive)."""
    return scan_folder(input_dir)[0]


def scan_folder(input_dir: str | Path) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """(MIDI files under ``input_dir``, (path, reason) of every input that cannot be used).

    Unusable inputs are entries with a MIDI suffix that are not regular files (a folder, a FIFO, a
    broken or looping symlink), folders that cannot be listed, and symlinks to folders, which are not
    followed (a link to an ancestor would loop, a link to a sibling would count its files twice).
    Names that are not valid UTF-8 are kept as ``os.fsdecode`` gives them (surrogate escapes).
    """
    root = Path(input_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"input_dir {root} is not a folder")
    files, skipped, todo = [], [], [root]
    while todo:
        folder = todo.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as err:
            skipped.append((_rel(folder, root) + "/", f"folder cannot be read: {err.strerror or err}"))
            continue
        for entry in entries:
            path = Path(entry.path)
            midi = path.suffix.lower() in MIDI_SUFFIXES
            kind = _entry_kind(entry)
            if kind == "dir":
                todo.append(path)
            if kind == "file" and midi:
                files.append(SourceFile(str(path), _rel(path, root), None))
            elif kind == "dir" and midi:
                skipped.append((_rel(path, root), "a folder, not a MIDI file"))
            elif kind == DIR_LINK or (midi and kind not in ("file", "dir")):
                skipped.append((_rel(path, root), kind))
    return sorted(files, key=lambda f: f.rel), sorted(skipped)


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _entry_kind(entry: os.DirEntry) -> str:
    """'file', 'dir', or why the entry cannot be read as a file (``DIR_LINK`` for a symlinked folder)."""
    try:
        if entry.is_dir(follow_symlinks=False):
            return "dir"
        if not entry.is_symlink():
            mode = entry.stat(follow_symlinks=False).st_mode
        else:
            try:
                mode = os.stat(entry.path).st_mode
            except OSError as err:
                return {errno.ENOENT: "broken symlink", errno.ELOOP: "symlink loop"}.get(
                    err.errno, f"symlink cannot be followed: {err.strerror}")
            if stat.S_ISDIR(mode):
                return DIR_LINK
    except OSError as err:
        return f"cannot be read: {err.strerror or err}"
    if stat.S_ISREG(mode):
        return "file"
    kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a device", stat.S_ISBLK: "a device"}
    what = next((name for test, name in kinds.items() if test(mode)), "a special file")
    return f"not a regular file ({what})"


def find_maestro_csv(input_dir: str | Path) -> Path | None:
    csvs = sorted(Path(input_dir).glob("maestro-v*.csv"))
    return csvs[-1] if csvs else None


def list_maestro(input_dir: str | Path) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """Files listed in MAESTRO's CSV with its split; returns (files, missing) where missing are
    (path, reason) rows for the skipped list."""
    root = Path(input_dir)
    csv_path = find_maestro_csv(root)
    if csv_path is None:
        raise FileNotFoundError(f"no maestro-v*.csv in {root}; use source=folder for a plain folder")
    files, missing = [], []
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            rel = row["midi_filename"]
            split = SPLIT_NAMES.get(row.get("split", "").strip().lower())
            if split is None:
                missing.append((rel, f"unknown split {row.get('split')!r} in {csv_path.name}"))
            elif not (root / rel).is_file():
                missing.append((rel, f"listed in {csv_path.name} but missing (or not a regular file)"))
            else:
                files.append(SourceFile(str(root / rel), rel, split))
    return sorted(files, key=lambda s: s.rel), missing


def split_key(rel: str, group_by: str, shared: dict[str, str] | None = None) -> str:
    """The key a file's split is drawn by: its piece key, or the key ``shared`` gives that piece key (the
    groups of byte-identical files, `data_prep.identical.shared_keys`)."""
    key = piece_key(rel, group_by)
    return shared.get(key, key) if shared else key


def assign_splits(files: list[SourceFile], val_fraction: float, test_fraction: float,
                  group_by: str = "file", shared: dict[str, str] | None = None) -> list[SourceFile]:
    """Fill in the split of files whose source did not fix one."""
    return [f if f.split else SourceFile(f.path, f.rel, hash_split(split_key(f.rel, group_by, shared),
                                                                    val_fraction, test_fraction)) for f in files]
