"""The piano's close with ``ending=true`` (docs/generation.md, "An ending"): validation performances, a 10 s seed
from 20 s, 10 s new, two samples each. Per sample: did it reach its length (time never stood still for good), is
its last onset one chord of the seed key's tonic triad, all three pitch classes, the root lowest, held to the end,
and how long it holds; the approach's NOTE_ONs in the dominant seventh, with and without. Prints a table.

    python scripts/piano_ending_check.py --data data/piano --seeds 30
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def close_of(notes, key) -> dict:
    """The figures of one piece's notes (`musictx.io.midi_io.Notes`: start, end, pitch arrays)."""
    from musictx.io.keys import cadence_chords

    _, dominant, tonic = cadence_chords(key)
    end, last = notes.end.max(), notes.start.max()
    chord = notes.start >= last - 0.005
    approach = (notes.start >= last - 2.0) & ~chord
    return {"one_triad": float(set(notes.pitch[chord] % 12) == set(np.flatnonzero(tonic))),
            "root_low": float(notes.pitch[chord].min() % 12 == key[0]),
            "held": float((notes.end[chord] >= end - 0.05).all()), "hold_s": float(end - last),
            "chord_notes": int(chord.sum()),
            "dominant": float(dominant[notes.pitch[approach] % 12].mean()) if approach.any() else np.nan}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="data/piano")
    p.add_argument("--split", default="validation")
    p.add_argument("--seeds", type=int, default=30)
    args = p.parse_args()

    import torch

    from musictx.checkpoints.model_store import load_pretrained
    from musictx.generation import GenerateOptions
    from musictx.io.keys import key_of_histogram
    from musictx.tasks import sample_continuations, seed_from_midi
    from musictx.tasks.continue_seed import new_seconds

    torch.set_num_threads(1)
    net, tok = load_pretrained("piano")
    files = json.loads("[" + ",".join(Path(args.data, f"{args.split}.files.txt").read_text().split()) + "]")
    rows = {False: [], True: []}
    reached = {False: 0, True: 0}
    for k, name in enumerate(files[:args.seeds]):
        path = Path("../shared/data/piano") / name
        seed = seed_from_midi(tok, path, 10.0, 20.0)
        key = key_of_histogram(np.bincount([p % 12 for p in tok.decode_notes(seed.ids).pitch], minlength=12)
                               .astype(float))
        for ending in (False, True):
            opts = GenerateOptions(seed=k, output_dir="unused", ending=ending)
            for ids in sample_continuations(net, tok, seed, opts, num_samples=2, length_seconds=10.0,
                                            max_tokens=2000, ending=ending):
                reached[ending] += new_seconds(tok, ids) >= 10.0 - 1e-6
                rows[ending].append(close_of(tok.decode_notes(np.concatenate([seed.ids, ids])), key))
        print(f"{k + 1}/{args.seeds} {name}", flush=True)
    cols = ("one_triad", "root_low", "held", "hold_s", "chord_notes", "dominant")
    print("\n| ending | samples | reached their length | last onset: the tonic triad, all three | root lowest "
          "| held to the end | held (s) | its notes | NOTE_ONs in V7, the 2 s before |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for ending, ms in rows.items():
        print(f"| {str(ending).lower()} | {len(ms)} | {reached[ending]} | "
              + " | ".join(f"{np.nanmean([m[c] for m in ms]):.2f}" for c in cols) + " |")


if __name__ == "__main__":
    main()
