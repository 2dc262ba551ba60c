"""Does the bundled motif's figure come back? Issue 65's check of the README's first command: for each sample
of a ``musictx-generate seed_midi=musictx/assets/motif.mid`` run, the share of the top line's interval 4-grams
in the first 10 s of new music that are found in the seed's top line (`motif_reuse`, "transposed").

    musictx-generate seed_midi=musictx/assets/motif.mid length_seconds=20 num_samples=4 seed=7 output_dir=OUT
    python scripts/bundled_motif.py OUT [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pretty_midi

from musictx.listening.note_span import Span
from musictx.listening.scorecard_metrics import motif_reuse, top_line


def figure_share(sample: Path, seed_end: float, seconds: float) -> float:
    """The share of the first ``seconds`` of new music's top-line interval 4-grams found in the seed's."""
    music = Span.from_pretty_midi(pretty_midi.PrettyMIDI(str(sample)))
    seed, new = music.window(0.0, seed_end), music.window(seed_end, seed_end + seconds)
    return motif_reuse(top_line(new)[1], top_line(seed)[1])["transposed"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, help="a musictx-generate output folder (its generation.json)")
    p.add_argument("--seconds", type=float, default=10.0, help="new music measured from the seed's end")
    args = p.parse_args(argv)
    run = json.loads((args.folder / "generation.json").read_text())
    seed_end = run["seed"]["seconds"]
    shares = [figure_share(args.folder / s["midi"], seed_end, args.seconds) for s in run["samples"]]
    print(f"{args.folder}: {run['checkpoint']}, seed {run['seed']['midi']} ({seed_end:g} s); the first "
          f"{args.seconds:g} s's top-line interval 4-grams found in the seed, by sample: "
          + ", ".join(f"{s:.2f}" for s in shares))


if __name__ == "__main__":
    main()
