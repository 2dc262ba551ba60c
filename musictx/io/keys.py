"""Which key music is in, from its pitch-class histogram: the Krumhansl-Kessler key-finder. No torch.

The scorecard compares a continuation's key with the real music's (`musictx.listening.scorecard_metrics`), and a
continuation asked to end closes in its key (`musictx.decoding.hooks.cadence`): both read it here.
"""

from __future__ import annotations

import numpy as np

# Krumhansl-Kessler key profiles (probe-tone ratings), index 0 = the tonic.
KK_MAJOR = np.array([6.35, 2.23, 3.48, 2.33, 4.38, 4.09, 2.52, 5.19, 2.39, 3.66, 2.29, 2.88])
KK_MINOR = np.array([6.33, 2.68, 3.52, 5.38, 2.60, 3.53, 2.54, 4.75, 3.98, 2.69, 3.34, 3.17])
NO_KEY = (-1, "none")  # the key of a histogram with no variation: none can be read from it
# pitch classes above the tonic of a cadence's chords: subdominant, dominant seventh, tonic triad
CADENCE = {"major": ((5, 9, 0), (7, 11, 2, 5), (0, 4, 7)), "minor": ((5, 8, 0), (7, 11, 2, 5), (0, 3, 7))}


def is_flat(hist: np.ndarray) -> bool:
    """A histogram with (to rounding) no variation: empty, or every pitch class alike; no correlation."""
    return bool(np.ptp(hist) < 1e-12)


def key_of_histogram(hist: np.ndarray) -> tuple[int, str]:
    """(tonic pitch class 0-11, "major" | "minor"): the profile, rotated to each of the 12 tonics, that correlates
    best with ``hist`` (12,), a duration-weighted pitch-class histogram; `NO_KEY` for a flat one."""
    if is_flat(hist):
        return NO_KEY
    best, key = -np.inf, NO_KEY
    for mode, profile in (("major", KK_MAJOR), ("minor", KK_MINOR)):
        for tonic in range(12):
            r = np.corrcoef(hist, np.roll(profile, tonic))[0, 1]  # profile[0] lands on the tonic
            if r > best:
                best, key = r, (tonic, mode)
    return key


def cadence_chords(key: tuple[int, str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(12,) bool each: the pitch classes of the subdominant, the dominant seventh and the tonic triad of ``key``."""
    tonic, mode = key
    out = []
    for steps in CADENCE[mode]:
        chord = np.zeros(12, dtype=bool)
        chord[[(tonic + s) % 12 for s in steps]] = True
        out.append(chord)
    return tuple(out)
