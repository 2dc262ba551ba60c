"""The hooks' retuning table of docs/two-sample-2026-11.md: for each sampler setting, the listener's tells
from a ``mode=two_sample`` run and the scorecard's seed and texture figures from a ``mode=continuation`` run
on the same split, beside the real continuation.

Each setting is a name and two run folders (``musictx-evaluate ... output_dir=``): ``NAME=TWO_SAMPLE_DIR``
or ``NAME=TWO_SAMPLE_DIR,SCORECARD_DIR``. The AUC without the annotated chords is re-tested from the saved
per-song features (`musictx.evaluation.two_sample.cv_auc`, 5 folds grouped by song, 3 repeats).

    python scripts/hook_table.py shipped=outputs/ts_shipped,outputs/sc_shipped new=outputs/ts_new,outputs/sc_new
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pretty_midi

from musictx.evaluation.two_sample import cv_auc

INTRO_MELODY = 0.15  # a seed whose MELODY sounds less than this share of its time counts as an intro
TELLS = (("notes sounding at once", "tex_at_once_mean"), ("melody silent", "trk_melody_silent"),
         ("BRIDGE silent", "trk_bridge_silent"), ("PIANO notes on the annotated chord tones", "har_chord_tone_piano"),
         ("lowest downbeat note = chord root", "har_bass_is_root"))
SCORECARD = (("scorecard: notes at once / the real's", "polyphony_ratio"),
             ("scorecard: top-line 4-grams found in the seed", "motif_transposed"),
             ("scorecard: melody 4-grams found in the seed's melody", "lead_motif"),
             ("scorecard: new notes in >= 8-note copies", "verbatim_share"),
             ("scorecard: pitch-class correlation with the real", "pc_correlation"),
             ("scorecard: same key as the real", "same_key"))


def seed_melody_share(row: dict) -> float:
    """The share of a two-sample row's seed during which its song's MELODY sounds."""
    pm = pretty_midi.PrettyMIDI(row["song"])
    t0, t1 = row["seed_start"], row["seed_end"]
    notes = [n for i in pm.instruments if i.name.upper() == "MELODY" for n in i.notes]
    return sum(max(0.0, min(n.end, t1) - max(n.start, t0)) for n in notes) / (t1 - t0)


def auc_without_chords(result: dict) -> str:
    rows = result["songs"]
    names = [n for n in result["features"] if not n.startswith(("har_chord", "har_bass"))]
    gen, real = (np.array([[r[side][n] for n in names] for r in rows], float) for side in ("generated", "real"))
    X, y = np.vstack([gen, real]), np.r_[np.ones(len(rows)), np.zeros(len(rows))]
    groups = np.r_[np.arange(len(rows)), np.arange(len(rows))]
    return " / ".join(f"{np.mean([cv_auc(X, y, groups, c, 5, s) for s in range(3)]):.3f}"
                      for c in ("logistic", "boosting"))


def column(two_sample: dict, scorecard: dict | None, side: str, intro: np.ndarray) -> list[str]:
    rows = two_sample["songs"]

    def mean(key, mask=slice(None)):
        return f"{np.nanmean(np.array([r[side][key] for r in rows], float)[mask]):.3f}"

    classifiers = two_sample["generated_vs_real"]["classifiers"]
    out = ([f"{classifiers['logistic']['auc']:.3f} / {classifiers['boosting']['auc']:.3f}",
            auc_without_chords(two_sample)] if side == "generated" else ["-", "-"])
    out += [mean(key) for _, key in TELLS[:2]] + [mean("trk_melody_silent", intro)]
    out += [mean(key) for _, key in TELLS[2:]]
    means = scorecard["means"]["model" if side == "generated" else "real"] if scorecard else {}
    return out + [f"{means[key]:.3f}" if key in means else "-" for _, key in SCORECARD]


def main(specs: list[str]) -> None:
    runs = {}
    for spec in specs:
        name, _, dirs = spec.partition("=")
        paths = [Path(d) / "metrics.json" for d in dirs.split(",")]
        runs[name] = [json.loads(p.read_text()) for p in paths]
    first = next(iter(runs.values()))[0]["two_sample"]
    intro = np.array([seed_melody_share(r) < INTRO_MELODY for r in first["songs"]])
    labels = (["AUC, all features (logistic / boosting)", "AUC without the annotated chords"]
              + [label for label, _ in TELLS[:2]] + [f"melody silent, the {intro.sum()} seeds without a melody"]
              + [label for label, _ in TELLS[2:]] + [label for label, _ in SCORECARD])
    cols = {name: column(r[0]["two_sample"], r[1]["scorecard"] if len(r) > 1 else None, "generated", intro)
            for name, r in runs.items()}
    scored = next((r for r in runs.values() if len(r) > 1), next(iter(runs.values())))  # the real's scorecard
    cols["real"] = column(scored[0]["two_sample"], scored[1]["scorecard"] if len(scored) > 1 else None, "real", intro)
    print("| measure | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
    for k, label in enumerate(labels):
        print(f"| {label} | " + " | ".join(c[k] for c in cols.values()) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
