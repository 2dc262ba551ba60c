"""How loud a model's training music is played: the median velocity of the notes its train split strikes, read
from the token arrays. Training records it with the weights (``net.heard_velocity``, config.json's "velocity"),
so that a seed played softly is heard at the model's own level (`musictx.io.dynamics`); a model that records
none hears it at the floor.

Every note counts once: REMI gives each note its own Velocity id; Performance events give a VELOCITY id only
where the bin changes, so each NOTE_ON takes the bin in force (a piece starts at the tokenizer's default).
"""

from __future__ import annotations

import numpy as np

CHUNK_TOKENS = 1 << 22  # pieces read a few million tokens at a time: a large split's arrays stay small


def velocity_counts(tokenizer, tokens: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the velocities the tokenizer writes (K,), how many notes of ``tokens`` strike each (K,)), for pieces
    starting at ``offsets`` (the last one the end)."""
    if getattr(tokenizer, "kind", None) == "remi":
        ids = tokenizer.velocity_ids()
        return tokenizer.numbers_of("Velocity")[ids], np.bincount(tokens, minlength=tokenizer.vocab_size)[ids]
    config = tokenizer.config
    bins = np.zeros(config.velocity_bins + 1, dtype=np.int64)  # notes per bin, 1-based
    for start, end in _chunks(offsets):
        bins += np.bincount(_note_bins(tokenizer, tokens[start:end], offsets, start), minlength=len(bins))
    return config.bin_velocity(np.arange(1, len(bins))), bins[1:]


def _chunks(offsets: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) token ranges of whole pieces, each about `CHUNK_TOKENS` long (one piece when it is longer)."""
    out, start = [], int(offsets[0]) if len(offsets) else 0
    for end in offsets[1:]:
        if end - start >= CHUNK_TOKENS or end == offsets[-1]:
            out.append((start, int(end)))
            start = int(end)
    return [(s, e) for s, e in out if e > s]


def _note_bins(tokenizer, ids: np.ndarray, offsets: np.ndarray, at: int) -> np.ndarray:
    """The velocity bin of each NOTE_ON in ``ids`` (the tokens from ``at`` on, whole pieces): the bin of the last
    VELOCITY id before it in its piece, else the default."""
    lay, n = tokenizer.layout, len(ids)
    ids = np.asarray(ids, dtype=np.int64)
    is_velocity = (ids >= lay.velocity) & (ids < lay.velocity + tokenizer.config.velocity_bins)
    bin_set = np.where(is_velocity, ids - lay.velocity + 1, 0)  # (n,) 0 where no bin is set
    starts = offsets[(offsets >= at) & (offsets < at + n)] - at
    bin_set[starts] = np.where(is_velocity[starts], bin_set[starts], tokenizer.config.default_velocity_bin)
    last_set = np.maximum.accumulate(np.where(bin_set > 0, np.arange(n), 0))  # (n,) where the bin in force was set
    return bin_set[last_set][(ids >= lay.note_on) & (ids < lay.note_off)]


def median_velocity(values: np.ndarray, counts: np.ndarray) -> float | None:
    """The median of ``values`` each taken ``counts`` times (`velocity_counts`); None where there are none."""
    total = int(counts.sum())
    if total == 0:
        return None
    order = np.argsort(values, kind="stable")
    return float(values[order][np.searchsorted(np.cumsum(counts[order]), (total + 1) / 2)])
