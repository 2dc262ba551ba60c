"""Train-time data augmentation on id arrays (numpy, no torch): a random transposition, time stretch and,
optionally, dynamics shift per window, through the edits of `musictx.io.token_edits`.

Used on the train split only; the DataModule never re-tokenizes.
"""

from __future__ import annotations

import numpy as np

from musictx.io.token_edits import shift_velocity_ids, stretch_ids, transpose_ids
from musictx.io.tokenizer import EventTokenizer


def augment_ids(ids: np.ndarray, tok: EventTokenizer, rng: np.random.Generator,
                max_transpose: int = 3, stretch_range: tuple[float, float] = (0.95, 1.05),
                velocity_shift: int = 0) -> np.ndarray:
    """The paper's train-time augmentation: transpose in [-max_transpose, +max_transpose] semitones and
    stretch time by a uniform factor in ``stretch_range``; with ``velocity_shift`` > 0, also move the
    dynamics by a uniform [-velocity_shift, +velocity_shift] bins (drawn last, so that 0 leaves the
    stream of draws, and the windows, as they were)."""
    semitones = int(rng.integers(-max_transpose, max_transpose + 1)) if max_transpose else 0
    if tok.kind != "performance":  # metrical tokens: the time is in beats, so only the key moves
        return tok.transpose_ids(ids, semitones)
    lo, hi = stretch_range
    factor = float(rng.uniform(lo, hi)) if hi > lo else lo
    out = transpose_ids(ids, semitones, tok)
    out = stretch_ids(out, factor, tok) if factor != 1.0 else out
    if velocity_shift > 0:
        out = shift_velocity_ids(out, int(rng.integers(-velocity_shift, velocity_shift + 1)), tok)
    return out
