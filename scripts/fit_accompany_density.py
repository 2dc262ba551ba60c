"""How busy POP909's accompaniments are for a melody of a given density: the fit behind the accompaniment's
density lean (`musictx.tasks.accompany.TYPICAL_DENSITY`, docs/infill.md "How busy").

For each song of a split, over its melody's span (first to last melody onset): the MELODY's, BRIDGE's and
PIANO's onsets per quarter note. Fits log(track per quarter) = a + b * log(melody per quarter) by least squares
and prints a, b, the residual's mean absolute value (in log units; 0.30 is 1.35x either way), and the same for a
constant (the median), so the fit's worth is plain.

    python scripts/fit_accompany_density.py --data data/pop --split train
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from symusic import Score

from musictx.io.score_prep import ROLE_PROGRAMS

TRACKS = ("MELODY", "BRIDGE", "PIANO")


def per_quarter(path: Path) -> np.ndarray | None:
    """(3,) MELODY, BRIDGE, PIANO onsets per quarter note over the melody's span; None without a melody."""
    score = Score(str(path))
    by_name = {t.name.upper(): t.notes.numpy()["time"] for t in score.tracks}
    melody = by_name.get("MELODY")
    if melody is None or len(melody) < 8:
        return None
    a, z = melody.min(), melody.max()
    quarters = (z - a) / score.ticks_per_quarter
    return np.array([((by_name.get(n, np.zeros(0)) >= a) & (by_name.get(n, np.zeros(0)) <= z)).sum() / quarters
                     for n in TRACKS])


def fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(a, b, mean |residual|) of log y = a + b log x, over the songs where y > 0."""
    keep = y > 0
    lx, ly = np.log(x[keep]), np.log(y[keep])
    b, a = np.polyfit(lx, ly, 1)
    return float(a), float(b), float(np.mean(np.abs(ly - (a + b * lx))))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data/pop", help="a musictx-prep output folder (its manifest names the files)")
    p.add_argument("--split", default="train")
    args = p.parse_args()
    root = Path(json.loads((Path(args.data) / "manifest.json").read_text())["input_dir"])
    names = [json.loads(line) for line in (Path(args.data) / f"{args.split}.files.txt").read_text().splitlines()]
    rates = [r for r in (per_quarter(root / n) for n in names) if r is not None]
    rates = np.array(rates)  # (songs, 3)
    print(f"{len(rates)} songs of {args.split}; onsets per quarter note over each melody's span")
    for k, name in enumerate(TRACKS[1:], start=1):
        a, b, res = fit(rates[:, 0], rates[:, k])
        y = rates[rates[:, k] > 0, k]
        flat = float(np.mean(np.abs(np.log(y / np.median(y)))))
        print(f"{name} ({ROLE_PROGRAMS[name]}): log = {a:.3f} + {b:.3f} log(MELODY); mean |residual| {res:.3f} "
              f"(the median {np.median(y):.3f} alone: {flat:.3f}); silent in {np.mean(rates[:, k] == 0):.0%}")


if __name__ == "__main__":
    main()
