"""The memorization index: hashes of every 8 consecutive (pitch, position in bar) notes of a train split,
built by musictx-prep for metrical tokenizers (``ngram_index.npy``), read by the continuation scorecard to
say how much of a continuation's music occurs in the training songs. No torch.
"""

from __future__ import annotations

import os

import numpy as np

INDEX_FILE = "ngram_index.npy"


_HASH_BASE = np.uint64(0x100000001B3)  # the 64-bit FNV prime: odd, so multiplying by it is a bijection


def position_ngrams(pitches: np.ndarray, positions: np.ndarray, n: int = 8) -> np.ndarray:
    """(max(N - n + 1, 0),) uint64 hash of each run of n consecutive (pitch, position-in-bar) pairs. The
    position (an int such as the 16th-note index in the bar) ties a melody to its rhythm, so a phrase found
    in the training index was recited, not rediscovered. A polynomial hash in wrapping uint64 arithmetic:
    deterministic across processes, unlike Python's hash()."""
    pitches = np.asarray(pitches, dtype=np.int64)  # (N,)
    positions = np.asarray(positions, dtype=np.int64)  # (N,)
    if len(pitches) < n:
        return np.zeros(0, dtype=np.uint64)
    symbol = ((pitches << 32) ^ (positions & 0xFFFFFFFF)).view(np.uint64) + np.uint64(1)  # (N,) 0 never used
    powers = np.cumprod(np.full(n, _HASH_BASE, dtype=np.uint64))[::-1]  # (n,) B^n .. B^1, wraps mod 2^64
    windows = np.lib.stride_tricks.sliding_window_view(symbol, n)  # (N - n + 1, n)
    with np.errstate(over="ignore"):
        return (windows * powers).sum(axis=1, dtype=np.uint64)


def build_index(hash_arrays: list[np.ndarray]) -> np.ndarray:
    """(H,) sorted unique uint64: the n-grams of a whole training split, for share_in_index."""
    if not hash_arrays:
        return np.zeros(0, dtype=np.uint64)
    return np.unique(np.concatenate([np.asarray(h, dtype=np.uint64) for h in hash_arrays]))


def share_in_index(hashes: np.ndarray, index: np.ndarray) -> float:
    """Share of hashes present in a sorted unique uint64 index (from build_index); nan for no hashes."""
    hashes = np.asarray(hashes, dtype=np.uint64)  # (K,)
    if len(hashes) == 0:
        return float("nan")
    if len(index) == 0:
        return 0.0
    at = np.clip(np.searchsorted(index, hashes), 0, len(index) - 1)  # (K,)
    return float(np.mean(index[at] == hashes))


def save_index(index: np.ndarray, path: str | os.PathLike) -> None:
    with open(path, "wb") as f:
        np.save(f, np.asarray(index, dtype=np.uint64))


def load_index(path: str | os.PathLike) -> np.ndarray:
    return np.load(path)
