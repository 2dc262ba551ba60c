"""Splits asked for that came out of the prep without a piece, filled after tokenizing.

The split hash sends each piece to train, validation or test by its key alone, so a small folder often
leaves a split empty: 12 files at validation=0.2 leave validation empty about one time in 15 (0.8 ** 12),
and the files the hash did send there may all turn out unusable. Training refuses a dataset without a
validation split, long after the prep said nothing. So once every file is tokenized, each split asked for
(fraction > 0) that holds no piece gets the usable train piece whose hash lies nearest to it (with
``group_by=parent``, that piece's whole folder), as long as train keeps one; ``musictx-prep`` refuses the
splits that stay empty, with the numbers. The other splits lie below train's range of hash positions, so
the nearest is the lowest: the choice is stable, and no other piece leaves the split its hash gave it.
Only small datasets ever lose a split, so rewriting train.bin without the moved pieces costs little.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from data_prep.sources import hash_position, main_of, piece_key
from musictx.io.token_store import SplitWriter, TokenArrays


@dataclass(frozen=True)
class Piece:
    """One tokenized file as the prep wrote it."""

    split: str
    name: str  # path relative to the input folder
    tokens: int
    notes: int
    seconds: float


def choose_moves(pieces: list[Piece], fractions: dict[str, float], group_by: str) -> dict[str, str]:
    """{piece key: split} for each split of ``fractions`` (split -> fraction) asked for and left empty."""
    filled = {p.split for p in pieces}
    moves: dict[str, str] = {}
    for split, fraction in fractions.items():
        train = {piece_key(p.name, group_by) for p in pieces if p.split == "train"} - moves.keys()
        if fraction > 0 and split not in filled and len(train) > 1:
            moves[min(train, key=hash_position)] = split
    return moves


def move_pieces(out_dir: Path, pieces: list[Piece], moves: dict[str, str], group_by: str) -> list[Piece]:
    """Write the moved train pieces into their splits (empty until now) and train.bin again without them;
    returns ``pieces`` with their new splits."""
    if not moves:
        return pieces
    train = TokenArrays(out_dir, "train")
    staging = out_dir / ".train-refill"
    staging.mkdir()
    writers = {"train": SplitWriter(staging, "train"), **{s: SplitWriter(out_dir, s) for s in set(moves.values())}}
    for i, name in enumerate(train.files):
        split = moves.get(piece_key(name, group_by), "train")
        if split == "train" or main_of(name) is None:  # a POP909 version of a moved song is dropped: its
            writers[split].add(train.piece(i), name)     # versions are train data only
    for writer in writers.values():
        writer.close()
    del train  # the memory map of the old train.bin
    for suffix in (".bin", ".idx.npy", ".files.txt"):
        os.replace(staging / f"train{suffix}", out_dir / f"train{suffix}")
    staging.rmdir()
    dropped = {p.name for p in pieces if p.split == "train" and main_of(p.name) is not None
               and piece_key(p.name, group_by) in moves}
    return [replace(p, split=moves.get(piece_key(p.name, group_by), p.split)) if p.split == "train" else p
            for p in pieces if p.name not in dropped]
