"""Edits of event-id arrays (numpy, no torch): transposition, time stretch and dynamics.

They work on token ids directly, so nothing is re-tokenized: the train-time augmentation
(`musictx.training.augment`), the recall curriculum's transposed repeats and the recall probes use them.
"""

from __future__ import annotations

import numpy as np

from musictx.io.tokenizer import EventTokenizer


def transpose_ids(ids: np.ndarray, semitones: int, tok: EventTokenizer) -> np.ndarray:
    """Shift every NOTE_ON/NOTE_OFF by ``semitones``; notes pushed out of the pitch range are dropped.

    VELOCITY events stay: the velocity state they set is what the following notes were encoded with.
    """
    ids = np.asarray(ids, dtype=np.int64)
    if semitones == 0:
        return ids.copy()
    lay = tok.layout
    n_pitch = lay.note_off - lay.note_on
    is_on = ids < lay.note_off
    is_off = (ids >= lay.note_off) & (ids < lay.time_shift)
    family = np.where(is_on, lay.note_on, lay.note_off)
    pitch = ids - family + semitones
    is_note = is_on | is_off
    inside = (pitch >= 0) & (pitch < n_pitch)
    out = np.where(is_note, family + pitch, ids)
    return out[~is_note | inside]


def stretch_ids(ids: np.ndarray, factor: float, tok: EventTokenizer) -> np.ndarray:
    """Scale all times by ``factor`` (rounded to the step grid) and rewrite the TIME_SHIFT runs.

    A trailing silence (shifts after the last event) is stretched too. Every note survives: events at
    different times stay at different times (which may shift dense runs by a step or so).
    """
    if factor <= 0:
        raise ValueError(f"stretch factor must be > 0, got {factor}")
    steps, events, total = tok.split_time_shifts(ids)
    # A sentinel event at the final step keeps trailing shifts; it is removed afterwards.
    steps = np.append(steps, total)
    events = np.append(events, tok.pad_id)
    rounded = np.floor(steps * factor + 0.5).astype(np.int64)
    # Events at different times must stay at different times, or compressing could land a note's OFF
    # on its ON and the note would vanish: new[i] = max(rounded[i], new[i-1] + distinct[i]), in closed
    # form with a running maximum.
    distinct = np.diff(steps, prepend=-1) > 0
    c = np.cumsum(distinct)
    new_steps = np.maximum.accumulate(rounded - c) + c
    out = tok.with_time_shifts(new_steps, events)
    return out[:-1]


def shift_velocity_ids(ids: np.ndarray, bins: int, tok: EventTokenizer) -> np.ndarray:
    """Move every VELOCITY event by ``bins`` velocity bins, clipped to the vocabulary's range: the same
    phrase played louder or softer, its accents kept (until the clip)."""
    ids = np.asarray(ids, dtype=np.int64)
    lay = tok.layout
    is_vel = (ids >= lay.velocity) & (ids < lay.pad)
    moved = np.clip(ids + bins, lay.velocity, lay.pad - 1)
    return np.where(is_vel, moved, ids)
