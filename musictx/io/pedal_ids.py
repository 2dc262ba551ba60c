"""The sustain pedal as ids (``TokenizerConfig.pedal_events``): PEDAL_DOWN and PEDAL_UP on the tokenizer's
grid, over notes that keep their key lengths. No torch.

Why: folded into note lengths (``sustain: true``, the shipped piano's encoding) a pedal lift is a run of
NOTE_OFFs the model must write one id at a time, one per note the pedal held; a note it forgets sounds on to
the sampler's note cap (docs/generation.md, "Stuck notes"). As an event, a lift is one id, and every note the
pedal held ends with it. What a listener hears, the notes with the pedal applied, is what `sounding` gives
and what the tokenizer's `decode_notes` returns, so every measure compares sounding notes on both sides.
"""

from __future__ import annotations

import numpy as np

from musictx.io.midi_io import Notes, apply_sustain, pedal_changes


def pedal_steps(pedal: np.ndarray | None, time_step: float) -> tuple[np.ndarray, np.ndarray]:
    """(steps, down) of `Notes.pedal` rows on the grid: of several changes on one step the last holds, and
    only changes of state are kept, from the first press on."""
    pedal = np.zeros((0, 2)) if pedal is None else pedal
    return grid_changes(np.maximum(np.floor(pedal[:, 0] / time_step + 0.5), 0).astype(np.int64), pedal[:, 1] > 0)


def grid_changes(steps: np.ndarray, down: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(steps, down) of pedal events already on the grid (int steps, in the order they came), reduced to
    `pedal_steps`'s changes of state."""
    if len(steps) == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    order = np.argsort(steps, kind="stable")
    steps, down = steps[order], down[order]
    last = np.concatenate([steps[1:] != steps[:-1], [True]])
    at, down = pedal_changes(steps[last], down[last])
    return at.astype(np.int64), down


def sounding(notes: Notes, steps: np.ndarray, down: np.ndarray, time_step: float) -> Notes:
    """``notes`` (key lengths, seconds) as they sound with the pedal changes ``steps``/``down``: a key released
    while the pedal is down sounds until it comes up (or, never lifted, to the last event)."""
    return apply_sustain(notes, steps * time_step, np.where(down, 127, 0))


def pedal_after(pedal: np.ndarray | None, seconds: float) -> np.ndarray | None:
    """`Notes.pedal` rows from ``seconds`` on, with a press at ``seconds`` if the pedal is down then: the
    pedal of a piece cut there."""
    if pedal is None:
        return None
    before = pedal[pedal[:, 0] < seconds]
    held = len(before) and before[-1, 1] > 0
    rows = pedal[pedal[:, 0] >= seconds]
    return np.concatenate([[[seconds, 1.0]], rows]) if held else rows
