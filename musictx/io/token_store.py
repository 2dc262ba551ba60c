"""The on-disk format of a prepared dataset (no torch), written by data_prep and read by training.

A prepared directory holds::

    tokenizer.json        the tokenizer's save() (its "kind" and settings): the vocabulary training must match
    manifest.json         counts per split (files, notes, tokens, seconds) and the tokenizer config
    skipped.tsv           every input file not used, with the reason
    <split>.bin           flat uint16 token ids of all pieces of the split, each piece ending in EOS
    <split>.idx.npy       int64 (n_pieces + 1,) start offsets of the pieces in <split>.bin; last = total
    <split>.files.txt     source path of each piece (relative to the input folder), one JSON string per
                          line (ASCII: a name with a line break or bytes that are not UTF-8 stays on
                          its line); older datasets have the bare names, which are still read

Splits are ``train``, ``validation`` and ``test``. ``<split>.bin`` is memory-mapped, so a dataset
larger than RAM trains.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from musictx.io.tokenizers import Tokenizer, load_tokenizer_file

SPLITS = ("train", "validation", "test")
TOKEN_DTYPE = np.uint16


class DatasetFormatError(Exception):
    """A prepared directory is missing pieces or is inconsistent; the message says what and where."""


class TokenArrays:
    """One split of a prepared dataset: memory-mapped tokens plus piece offsets."""

    def __init__(self, data_dir: str | os.PathLike, split: str):
        self.dir = Path(data_dir)
        self.split = split
        bin_path, idx_path = self.dir / f"{split}.bin", self.dir / f"{split}.idx.npy"
        for p in (bin_path, idx_path):
            if not p.exists():
                raise DatasetFormatError(f"{p}: missing; is {self.dir} a directory written by musictx-prep?")
        self.offsets = np.load(idx_path)
        size = bin_path.stat().st_size // np.dtype(TOKEN_DTYPE).itemsize
        if len(self.offsets) == 0 or self.offsets[-1] != size:
            raise DatasetFormatError(f"{idx_path}: offsets end at {self.offsets[-1] if len(self.offsets) else None}"
                                     f" but {bin_path} holds {size} tokens")
        # np.memmap refuses empty files; an empty split is a zero-length array.
        self.tokens = np.memmap(bin_path, dtype=TOKEN_DTYPE, mode="r") if size else np.zeros(0, TOKEN_DTYPE)
        files_path = self.dir / f"{split}.files.txt"
        self.files = read_file_names(files_path) if files_path.exists() else []

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1])

    def piece(self, i: int) -> np.ndarray:
        """Token ids of piece ``i`` (a read-only memmap view)."""
        return self.tokens[self.offsets[i]:self.offsets[i + 1]]


def folder_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` is no folder to read a dataset from ("a file, not a folder", "no such folder"), or None: said
    before ``<path>/tokenizer.json: missing``, a file's name with the folder's inside it."""
    path = Path(path)
    if path.is_dir():
        return None
    return "a file, not a folder" if path.exists() else "no such folder"


def load_tokenizer(data_dir: str | os.PathLike) -> Tokenizer:
    path = Path(data_dir) / "tokenizer.json"
    if not path.exists():
        raise DatasetFormatError(f"{path}: missing; prepare the data with musictx-prep first")
    try:
        return load_tokenizer_file(path)
    except (ValueError, KeyError, TypeError, OSError) as err:  # json.JSONDecodeError is a ValueError
        raise DatasetFormatError(f"{path}: not a tokenizer musictx-prep wrote ({' '.join(str(err).split())})") from None


def load_manifest(data_dir: str | os.PathLike) -> dict:
    path = Path(data_dir) / "manifest.json"
    if not path.exists():
        raise DatasetFormatError(f"{path}: missing; prepare the data with musictx-prep first")
    try:
        manifest = json.loads(path.read_text())
    except (ValueError, OSError) as err:
        raise DatasetFormatError(f"{path}: not a manifest musictx-prep wrote ({' '.join(str(err).split())})") from None
    if not isinstance(manifest, dict):
        raise DatasetFormatError(f"{path}: not a manifest musictx-prep wrote (not a JSON object)")
    return manifest


def read_file_names(path: str | os.PathLike) -> list[str]:
    """The piece names of a ``<split>.files.txt``: JSON strings, one per line, or (datasets written before
    that format) bare names, one per ``\\n``-ended line."""
    # Bytes, not text mode: universal newlines would turn a "\\r" inside a bare name into a line break.
    text = Path(path).read_bytes().decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if text.startswith('"'):
        try:
            names = [json.loads(line) for line in lines]
        except ValueError:
            names = []
        if len(names) == len(lines) and all(isinstance(n, str) for n in names):
            return names
    return lines


def write_file_names(path: str | os.PathLike, names: list[str]) -> None:
    """Write names as ``read_file_names`` reads them: ASCII JSON strings (``\\u2028``, ``\\udcff`` escaped)."""
    Path(path).write_bytes("".join(json.dumps(n) + "\n" for n in names).encode("ascii"))


class SplitWriter:
    """Streams the pieces of one split to disk in order (the data prep never holds a split in RAM)."""

    def __init__(self, out_dir: str | os.PathLike, split: str):
        self.dir, self.split = Path(out_dir), split
        self._bin = open(self.dir / f"{split}.bin", "wb")
        self.offsets, self.files = [0], []

    def add(self, ids: np.ndarray, name: str) -> None:
        if len(ids) and int(np.max(ids)) > np.iinfo(TOKEN_DTYPE).max:
            raise ValueError(f"{name}: token id {int(np.max(ids))} does not fit in {np.dtype(TOKEN_DTYPE).name}")
        self._bin.write(np.asarray(ids, dtype=TOKEN_DTYPE).tobytes())
        self.offsets.append(self.offsets[-1] + len(ids))
        self.files.append(name)

    def close(self) -> None:
        self._bin.close()
        # Opened as a file object so that the name is kept exactly (np.save would add .npy).
        with open(self.dir / f"{self.split}.idx.npy", "wb") as f:
            np.save(f, np.asarray(self.offsets, dtype=np.int64))
        write_file_names(self.dir / f"{self.split}.files.txt", self.files)


def write_split(out_dir: str | os.PathLike, split: str, pieces: list[np.ndarray], files: list[str]) -> None:
    """Write one whole split at once (tests and small tools)."""
    writer = SplitWriter(out_dir, split)
    for ids, name in zip(pieces, files, strict=True):
        writer.add(ids, name)
    writer.close()
