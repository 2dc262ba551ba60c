"""Where the MIDI files come from, and which split each goes to.

Every source yields `SourceFile`s sorted by their relative path, so a re-run sees the same order.
Splits are by piece, never by window: MAESTRO's CSV decides when present; otherwise a stable hash
of the piece key (the file, or its parent folder with ``group_by=parent`` for layouts such as ASAP
where one folder holds several performances of one work).
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

MIDI_SUFFIXES = (".mid", ".midi")
SPLIT_NAMES = {"train": "train", "validation": "validation", "valid": "validation", "val": "validation",
               "test": "test"}


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
    digest = hashlib.sha1(key.encode("utf-8")).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64  # uniform in [0, 1)
    if u < test_fraction:
        return "test"
    if u < test_fraction + val_fraction:
        return "validation"
    return "train"


def piece_key(rel: str, group_by: str) -> str:
    if group_by == "file":
        return rel
    if group_by == "parent":
        return str(Path(rel).parent)
    raise ValueError(f"split.group_by must be 'file' or 'parent', got {group_by!r}")


def list_folder(input_dir: str | Path) -> list[SourceFile]:
    """All .mid/.midi files under ``input_dir`` (recursive, suffix case-insensitive)."""
    root = Path(input_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"input_dir {root} is not a folder")
    found = [p for p in root.rglob("*") if p.suffix.lower() in MIDI_SUFFIXES and p.is_file()]
    files = [SourceFile(str(p), p.relative_to(root).as_posix(), None) for p in found]
    return sorted(files, key=lambda f: f.rel)


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
                missing.append((rel, f"listed in {csv_path.name} but missing"))
            else:
                files.append(SourceFile(str(root / rel), rel, split))
    return sorted(files, key=lambda s: s.rel), missing


def assign_splits(files: list[SourceFile], val_fraction: float, test_fraction: float,
                  group_by: str = "file") -> list[SourceFile]:
    """Fill in the split of files whose source did not fix one."""
    return [f if f.split else SourceFile(f.path, f.rel, hash_split(piece_key(f.rel, group_by), val_fraction,
                                                                    test_fraction)) for f in files]
