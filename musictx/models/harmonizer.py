"""Guessing, from a melody alone, which pitch classes its accompaniment's chord holds, half bar by half bar.

The accompaniment's harmony lean (`musictx.decoding.hooks.given_notes.HarmonyLean`) needs a target. The melody's
own pitch classes are a poor one: a melody passes through non-chord tones, and a chord holds tones the
melody never sings. A lead sheet's chords are the best one (``chords=``), when the user has them. Between
the two, this small network reads the melody around each half bar (what sounds in it, the note struck on
its first beat, the half bars on either side, the melody's key profile over the whole song, whether it
opens a bar) and gives each of the 12 pitch classes the probability that the chord there holds it.

It is transposition-equivariant by construction: the same weights score every pitch class, each time on the
melody's features rotated so that the candidate is pitch class 0. Trained on POP909's training songs
against their annotated chords (``chord_midi.txt``) with ``python -m musictx.commands.harmonizer``; the
weights ship in ``musictx/pretrained/harmonizer/weights.npz``. numpy only: the forward pass is three small matrix
products.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

WEIGHTS = Path(__file__).resolve().parent.parent / "pretrained" / "harmonizer" / "weights.npz"
NEIGHBOURS = (-2, -1, 1, 2)  # the half bars around the one scored, whose melody it also reads
N_FEATURES = 12 * (2 + len(NEIGHBOURS) + 1) + 1  # sounding, first note, neighbours, key; opens a bar


def half_bar_lines(lines: np.ndarray) -> np.ndarray:
    """(2 * n_bars + 1,) the ticks where each half bar starts, and the last bar line."""
    lines = np.asarray(lines, dtype=np.float64)
    mids = (lines[:-1] + lines[1:]) / 2
    return np.append(np.stack([lines[:-1], mids], axis=1).reshape(-1), lines[-1])


def sounding_shares(onsets: np.ndarray, ends: np.ndarray, pitches: np.ndarray, edges: np.ndarray,
                    block: int = 256) -> np.ndarray:
    """(H, 12) the share of each pitch class in the melody's sounding time in each span between ``edges``.
    ``block`` spans at a time, with only the notes that sound in them: memory stays small for a 2-hour
    melody (the whole (H, N) overlap was 1.9 GB for 7200 half bars of 14400 notes)."""
    out = np.zeros((len(edges) - 1, 12))
    for a in range(0, len(out), block):
        z = min(a + block, len(out))
        lo, hi = edges[a:z][:, None], edges[a + 1:z + 1][:, None]  # (h, 1)
        near = np.flatnonzero((onsets < hi[-1, 0]) & (ends > lo[0, 0]))
        overlap = np.clip(np.minimum(ends[near][None], hi) - np.maximum(onsets[near][None], lo), 0, None)  # (h, n)
        classes = pitches[near] % 12
        for pc in range(12):
            out[a:z, pc] = overlap[:, classes == pc].sum(axis=1)
    return out / np.maximum(out.sum(axis=1, keepdims=True), 1e-9)


def half_bar_features(onsets: np.ndarray, ends: np.ndarray, pitches: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """(H, 12, F) for each half bar of the bars between ``lines`` (ticks) and each candidate pitch class c, the
    melody's features rotated so that c is pitch class 0 (``onsets``, ``ends``, ``pitches``: (N,) its notes)."""
    onsets, ends, pitches = (np.asarray(a, dtype=np.int64) for a in (onsets, ends, pitches))
    edges = half_bar_lines(lines)
    shares = sounding_shares(onsets, ends, pitches, edges)  # (H, 12)
    first = np.zeros_like(shares)
    for h, start in enumerate(edges[:-1]):
        struck = np.flatnonzero((onsets <= start) & (ends > start))
        if len(struck):
            first[h, pitches[struck[np.argmax(onsets[struck])]] % 12] = 1.0
    n = len(shares)
    key = shares.sum(axis=0) / max(shares.sum(), 1e-9)
    blocks = [shares, first]
    for d in NEIGHBOURS:
        moved = np.zeros_like(shares)
        lo, hi = max(0, -d), min(n, n - d)
        moved[lo:hi] = shares[lo + d:hi + d]
        blocks.append(moved)
    blocks.append(np.repeat(key[None], n, axis=0))
    stacked = np.stack(blocks, axis=1)  # (H, n_blocks, 12)
    out = np.zeros((n, 12, N_FEATURES), dtype=np.float32)
    for c in range(12):
        out[:, c, :-1] = np.roll(stacked, -c, axis=2).reshape(n, -1)
    out[:, :, -1] = (np.arange(n) % 2 == 0)[:, None]
    return out


class Harmonizer:
    """The network: features (H, 12, F) -> (H, 12) the probability that each pitch class is a chord tone."""

    def __init__(self, weights: dict[str, np.ndarray]):
        self.layers = [(weights[f"w{k}"], weights[f"b{k}"]) for k in range(3)]
        if self.layers[0][0].shape[0] != N_FEATURES:
            raise ValueError(f"harmonizer weights take {self.layers[0][0].shape[0]} features, not {N_FEATURES}")

    @classmethod
    def load(cls, path: str | Path = WEIGHTS) -> Harmonizer:
        """The harmonizer of the weights at ``path``; the shipped ones are read once per process (every
        accompaniment of a run, and of the app's session, uses them)."""
        if Path(path).resolve() == WEIGHTS:
            return _shipped()
        with np.load(path) as data:
            return cls({k: data[k] for k in data.files})

    def chord_tone_probs(self, features: np.ndarray) -> np.ndarray:
        x = features.astype(np.float64)
        for k, (w, b) in enumerate(self.layers):
            x = x @ w + b
            if k < len(self.layers) - 1:
                x = np.maximum(x, 0.0)
        return 1.0 / (1.0 + np.exp(-x[..., 0]))  # (H, 12)


@functools.cache
def _shipped() -> Harmonizer:
    with np.load(WEIGHTS) as data:
        return Harmonizer({k: data[k] for k in data.files})
