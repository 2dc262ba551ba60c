"""Splits asked for that came out of the prep without a piece, filled after tokenizing.

The split hash sends each piece to train, validation or test by its key alone, so a small folder often
leaves a split empty: 12 files at validation=0.2 leave validation empty about one time in 15 (0.8 ** 12),
and the files the hash did send there may all turn out unusable. Training refuses a dataset without a
validation split, long after the prep said nothing. So once every file is tokenized, each split asked for
(fraction > 0) that holds no piece gets the usable train piece whose hash lies nearest to it (with
``group_by=parent``, that piece's whole folder; with it, its byte-identical copies), as long as train keeps
one; ``musictx-prep`` refuses the splits that stay empty, with the numbers. The other splits lie below
train's range of hash positions, so the nearest is the lowest: the choice is stable, and no other piece
leaves the split its hash gave it. The versions of a moved POP909 song go nowhere (`move_pieces`): the prep
lists them as not used, with why. Only small datasets ever lose a split, so rewriting train.bin without the
moved pieces costs little.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from data_prep.sources import hash_position
from musictx.io.token_store import SplitWriter, TokenArrays


@dataclass(frozen=True)
class Piece:
    """One tokenized file as the prep wrote it."""

    split: str
    name: str  # path relative to the input folder
    tokens: int
    notes: int
    seconds: float


def choose_moves(pieces: list[Piece], fractions: dict[str, float], key: Callable[[str], str],
                 train_only: frozenset[str] = frozenset()) -> dict[str, str]:
    """{split key: split} for each split of ``fractions`` (split -> fraction) asked for and left empty;
    ``key`` gives a piece's split key (`data_prep.sources.split_key`). Only a key with a piece that may leave
    train (not one of ``train_only``, POP909's versions) can move: a song's versions alone would not fill it."""
    filled = {p.split for p in pieces}
    moves: dict[str, str] = {}
    for split, fraction in fractions.items():
        train = {key(p.name) for p in pieces if p.split == "train"} - moves.keys()
        movable = {key(p.name) for p in pieces if p.split == "train" and p.name not in train_only} - moves.keys()
        if fraction > 0 and split not in filled and len(train) > 1 and movable:
            moves[min(movable, key=hash_position)] = split
    return moves


def move_pieces(out_dir: Path, pieces: list[Piece], moves: dict[str, str], key: Callable[[str], str],
                train_only: frozenset[str] = frozenset()) -> tuple[list[Piece], list[Piece]]:
    """Write the moved train pieces into their splits (empty until now) and train.bin again without them;
    returns (``pieces`` with their new splits, the pieces left out). A piece of ``train_only`` (a POP909
    version) whose key moves is left out: in validation or test it would change what they measure, in train
    it would leak its song, now held out, into training."""
    if not moves:
        return pieces, []
    train = TokenArrays(out_dir, "train")
    staging = out_dir / ".train-refill"
    staging.mkdir()
    writers = {"train": SplitWriter(staging, "train"), **{s: SplitWriter(out_dir, s) for s in set(moves.values())}}
    for i, name in enumerate(train.files):
        split = moves.get(key(name), "train")
        if split == "train" or name not in train_only:
            writers[split].add(train.piece(i), name)
    for writer in writers.values():
        writer.close()
    del train  # the memory map of the old train.bin
    for suffix in (".bin", ".idx.npy", ".files.txt"):
        os.replace(staging / f"train{suffix}", out_dir / f"train{suffix}")
    staging.rmdir()
    kept, left_out = [], []
    for p in pieces:
        split = moves.get(key(p.name), p.split) if p.split == "train" else p.split
        (left_out if split != p.split and p.name in train_only else kept).append(replace(p, split=split))
    return kept, left_out
