"""Piano rolls of the first three test songs for the README: the seed (10 s from 25 s, at bar lines), then
the real next 30 s above and `pop`'s continuation at the shipped settings below, on one time axis, each track
in its own colour.

The songs are the first three of the prepared test split, not picked; sample k uses seed k, as the scorecard.

    python scripts/pop_rolls.py data/pop     # -> docs/pop_test_song_K.png
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pretty_midi
import torch

from musictx.evaluation.run import split_songs
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.midi_io import Notes
from musictx.io.piano_roll import plot_roll_panels

DOCS = Path(__file__).resolve().parents[1] / "docs"
SEED_FROM, SEED_SECONDS, NEW_SECONDS = 25, 10, 30


def tracks(pm: pretty_midi.PrettyMIDI, t0: float, t1: float) -> list[tuple[str, Notes]]:
    """Each instrument's notes struck in [t0, t1), moved to start at 0."""
    parts = []
    for inst in pm.instruments:
        kept = [n for n in inst.notes if t0 <= n.start < t1]
        parts.append((inst.name, Notes(np.array([n.start - t0 for n in kept]), np.array([n.end - t0 for n in kept]),
                                       np.array([n.pitch for n in kept], dtype=np.int64),
                                       np.array([n.velocity for n in kept], dtype=np.int64))))
    return parts


def main(data_dir: str) -> None:
    torch.set_num_threads(1)
    for k, path in enumerate(split_songs(data_dir, "test")[:3]):
        with tempfile.TemporaryDirectory() as out:
            record = run(GenerateOptions(checkpoint="pop", seed_midi=str(path), seed_from=SEED_FROM,
                                         seed_seconds=SEED_SECONDS, length_seconds=NEW_SECONDS, num_samples=1, seed=k,
                                         audio=False, output_dir=out, progress_every_s=None))
            made = pretty_midi.PrettyMIDI(str(Path(out) / record["samples"][0]["midi"]))
            about = json.loads((Path(out) / "generation.json").read_text())
        seed_seconds, start = about["seed"]["seconds"], about["seed"]["starts_at_seconds"]  # at bar lines
        end = seed_seconds + NEW_SECONDS
        png = plot_roll_panels([("real song", tracks(pretty_midi.PrettyMIDI(str(path)), start, start + end)),
                                ("pop (shipped settings)", tracks(made, 0, end))],
                               DOCS / f"pop_test_song_{k}.png", takeover=seed_seconds,
                               title=f"POP909 {path.name}, test split: seed, then {NEW_SECONDS} s")
        print(png)


if __name__ == "__main__":
    main(sys.argv[1])
