"""Two accompany scorecards of the same songs and seeds, compared song by song: each figure's mean in both, the
real accompaniment's, and the mean of the paired differences (B - A) with its 95% bootstrap interval over the songs
(10,000 resamples, percentile). Beside the scorecard's own figures, how far each song's accompaniment is from the
real one's: density as |log(notes / the real's)|, register as |mean pitch - the real's|, and so on (lower is closer).

    musictx-evaluate checkpoint=pop data.dir=data/pop split=validation mode=accompany infill.accompany_song=true \\
        infill.accompany_from=first_bar infill.accompany_context=melody output_dir=out/melody   # and =song: out/song
    python scripts/accompany_paired.py out/melody/metrics.json out/song/metrics.json --names melody song
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

RESAMPLES = 10_000
FIGURES = (  # key, label: the scorecard's own figures (its model column)
    ("chord_tone_share", "strong-beat onsets on a chord tone"),
    ("pitch_classes", "pitch classes per half bar"),
    ("repeat_overlap", "repeated melody bar: pitches shared with its first time"),
    ("density_ratio", "notes a second / the real's"),
    ("mean_pitch", "mean pitch (MIDI)"),
    ("pitch_spread", "pitch spread (semitones)"),
    ("pc_correlation", "pitch-class correlation with the real"),
    ("bridge_share", "share of notes BRIDGE plays"),
    ("seam_in", "top-line interval into the first bar (semitones)"),
    ("seam_out", "top-line interval out of the last bar (semitones)"),
)
DISTANCES = (  # label, key, how far the model's figure is from the real's (per song)
    ("density: abs. log ratio to the real", "density_ratio", lambda m, r: abs(np.log(m / r)) if m > 0 else np.nan),
    ("register: abs. mean-pitch difference", "mean_pitch", lambda m, r: abs(m - r)),
    ("spread: abs. difference", "pitch_spread", lambda m, r: abs(m - r)),
    ("chord fullness: abs. difference", "pitch_classes", lambda m, r: abs(m - r)),
    ("BRIDGE's share: abs. difference", "bridge_share", lambda m, r: abs(m - r)),
    ("repeated bar's shared pitches: abs. difference", "repeat_overlap", lambda m, r: abs(m - r)),
)


def per_song(path: Path) -> dict[str, dict]:
    """{song: its card} of a metrics.json of ``musictx-evaluate mode=accompany``."""
    cards = json.loads(path.read_text())["task_scorecard"]["songs"]
    return {c["song"]: c for c in cards}


def interval(diff: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean of paired differences (one per song)."""
    picks = rng.integers(0, len(diff), size=(RESAMPLES, len(diff)))
    means = diff[picks].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _value(x) -> float:
    return np.nan if x is None else float(x)


def rows(a: dict[str, dict], b: dict[str, dict]) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """(label, A's values, B's values, the real's values) of each figure and distance, over the songs both scored."""
    songs = sorted(set(a) & set(b))
    out = []
    for key, label in FIGURES:
        va = np.array([_value(a[s]["model"].get(key)) for s in songs])
        vb = np.array([_value(b[s]["model"].get(key)) for s in songs])
        out.append((label, va, vb, np.array([_value(a[s]["real"].get(key)) for s in songs])))
    for label, key, far in DISTANCES:
        real = [_value(a[s]["real"].get(key)) for s in songs]
        va = np.array([far(_value(a[s]["model"].get(key)), r) for s, r in zip(songs, real, strict=True)])
        vb = np.array([far(_value(b[s]["model"].get(key)), r) for s, r in zip(songs, real, strict=True)])
        out.append((label, va, vb, np.full(len(songs), np.nan)))  # a distance: no real column
    return out


def table(a_path: Path, b_path: Path, names: tuple[str, str]) -> str:
    rng = np.random.default_rng(0)
    a, b = per_song(a_path), per_song(b_path)
    lines = [f"{len(set(a) & set(b))} songs in both | {names[0]} | {names[1]} | real | {names[1]} - {names[0]} "
             "(95% CI) | songs", "|---|---:|---:|---:|---|---:|"]
    for label, va, vb, real in rows(a, b):
        both = np.isfinite(va) & np.isfinite(vb)
        if not both.any():
            continue
        d = vb[both] - va[both]
        lo, hi = interval(d, rng)
        real_cell = f"{np.nanmean(real[both]):.3f}" if np.isfinite(real[both]).any() else "-"
        lines.append(f"| {label} | {va[both].mean():.3f} | {vb[both].mean():.3f} | {real_cell} | "
                     f"{d.mean():+.3f} ({lo:+.3f} to {hi:+.3f}) | {int(both.sum())} |")
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=Path, help="metrics.json of the first arm")
    p.add_argument("b", type=Path, help="metrics.json of the second arm (the same songs and seeds)")
    p.add_argument("--names", nargs=2, default=("A", "B"))
    args = p.parse_args()
    try:
        print(table(args.a, args.b, tuple(args.names)))
    except (OSError, KeyError, ValueError) as err:
        p.exit(1, f"accompany_paired.py: error: {err}\n")
