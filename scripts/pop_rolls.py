"""Piano rolls of the first three test songs for the README: the seed (10 s from 25 s, at bar lines), then
the real next 30 s above and `pop`'s continuation at the shipped settings below, on one time axis.

The songs are the first three of the prepared test split, not picked; sample k uses seed k, as the scorecard.

    python scripts/pop_rolls.py data/pop_large     # -> docs/pop_test_song_K.png
"""

from __future__ import annotations

import sys
from pathlib import Path

import pretty_midi
import torch

from musictx.checkpoints.model_store import load_model
from musictx.evaluation.note_span import Span
from musictx.evaluation.run import split_songs
from musictx.evaluation.scorecard import continue_metrical
from musictx.generation.sampling_options import SamplingOptions
from musictx.io.midi_io import Notes
from musictx.io.piano_roll import plot_roll_panels

DOCS = Path(__file__).resolve().parents[1] / "docs"
OPTS = {"seed_seconds": 10, "seed_from": 25, "length_seconds": 30, "num_samples": 1}


def notes_from(span: Span, t0: float, t1: float) -> Notes:
    """The span's notes struck in [t0, t1), moved to start at 0."""
    w = span.window(t0, t1)
    return Notes(w.start - t0, w.end - t0, w.pitch, w.velocity)


def main(data_dir: str) -> None:
    torch.set_num_threads(1)
    net, tok, _ = load_model("pop")
    for k, path in enumerate(split_songs(data_dir, "test")[:3]):
        cont = continue_metrical(net, tok, path, OPTS, SamplingOptions(seed=k))
        t0, t1 = cont.seed_start, cont.seed_end + OPTS["length_seconds"]
        real = Span.from_pretty_midi(pretty_midi.PrettyMIDI(str(path)))
        png = plot_roll_panels([("real song", notes_from(real, t0, t1)),
                                ("pop (shipped settings)", notes_from(cont.samples[0], t0, t1))],
                               DOCS / f"pop_test_song_{k}.png", takeover=cont.seed_end - t0,
                               title=f"POP909 {path.name}, test split: seed, then 30 s")
        print(png)


if __name__ == "__main__":
    main(sys.argv[1])
