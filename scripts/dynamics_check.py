"""Does a continuation keep its seed's dynamics? Validation files played softer and louder (every pitched
velocity times a factor, as the same music played pp or ff), continued as ``musictx-generate`` does (10 s seed
from 20 s, 10 s new, two samples): per factor, the median velocity of the seed, of the real next 10 s and of the
new notes, and how far the new notes' median is from the real's. Prints a table. A factor written ``=V`` sets every
pitched velocity to V instead (a file written at one velocity, as notation programs export).

    python scripts/dynamics_check.py --model piano --data data/piano --files 16 [--set soft_seed_velocity=null]
    python scripts/dynamics_check.py --factors 1,1.5,=100,=127 [--set loud_seed_ratio=null]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

SOURCES = {"piano": Path("../shared/data/piano"), "pop": Path("../shared/data/pop/POP909")}
SEED_FROM, SEED_SECONDS, NEW_SECONDS = 20.0, 10.0, 10.0


def scaled(path: Path, factor: str, out: Path) -> Path:
    """``path`` with every pitched velocity times ``factor`` (1..127; `musictx.io.dynamics.scale_score`), or set to
    V where it reads ``=V``; its beat and chord files beside it, as POP909's."""
    from symusic import Score

    from musictx.io.dynamics import scale_score

    score = Score(str(path))
    if factor.startswith("="):
        for track in (t for t in score.tracks if not t.is_drum):
            for note in track.notes:
                note.velocity = int(factor[1:])
    else:
        score = scale_score(score, float(factor))
    out.mkdir(parents=True, exist_ok=True)
    for side in ("beat_midi.txt", "chord_midi.txt"):
        if (path.parent / side).is_file():
            (out / side).write_bytes((path.parent / side).read_bytes())
    target = out / path.name
    score.dump_midi(str(target))
    return target


def real_next(path: Path, start: float) -> float:
    """Median velocity of the notes struck in the 10 s after ``start`` (s) in ``path``."""
    import pretty_midi

    notes = [n for i in pretty_midi.PrettyMIDI(str(path)).instruments if not i.is_drum for n in i.notes]
    v = [n.velocity for n in notes if start <= n.start < start + NEW_SECONDS]
    return float(np.median(v)) if v else np.nan


def continued(path: Path, model: str, out: Path, settings: dict) -> list[tuple[float, float, float]]:
    """(seed median velocity, new notes' median velocity, where the seed ends in the file) of each sample."""
    import pretty_midi

    from musictx.generation.continue_midi import run
    from musictx.generation.generate_options import GenerateOptions

    record = run(GenerateOptions(seed_midi=str(path), checkpoint=model, seed_seconds=SEED_SECONDS, seed_from=SEED_FROM,
                                 length_seconds=NEW_SECONDS, num_samples=2, audio=False, output_dir=str(out),
                                 progress_every_s=None, **settings))
    rows = []
    for sample in record["samples"]:
        seed_end = sample["total_seconds"] - sample["new_seconds"]
        notes = [n for i in pretty_midi.PrettyMIDI(str(out / sample["midi"])).instruments if not i.is_drum
                 for n in i.notes]
        seed = [n.velocity for n in notes if n.start < seed_end - 0.01]
        new = [n.velocity for n in notes if n.start >= seed_end - 0.01]
        rows.append((float(np.median(seed)), float(np.median(new)) if new else np.nan, seed_end))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="piano")
    p.add_argument("--data", default="data/piano")
    p.add_argument("--split", default="validation")
    p.add_argument("--files", type=int, default=16)
    p.add_argument("--factors", default="0.35,0.6,1,1.5")
    p.add_argument("--set", action="append", default=[], help="NAME=VALUE of GenerateOptions (hooks as a mapping)")
    args = p.parse_args()

    import contextlib
    import io

    import torch
    import yaml

    torch.set_num_threads(1)
    settings: dict = {}
    for item in args.set:
        name, _, value = item.partition("=")
        *parents, last = name.split(".")
        place = settings
        for part in parents:
            place = place.setdefault(part, {})
        place[last] = yaml.safe_load(value)
    kind = "piano" if "piano" in args.data else "pop"
    names = json.loads("[" + ",".join(Path(args.data, f"{args.split}.files.txt").read_text().split()) + "]")
    print(f"model {args.model}, {args.split} {args.files} files, {args.set or 'shipped settings'}")
    print("| velocities x | seed median | real next 10 s | new notes | new - real (mean abs) | new / seed |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for factor in args.factors.split(","):
            seeds, reals, news = [], [], []
            for k, name in enumerate(names[: args.files]):
                path = scaled(SOURCES[kind] / name, factor, Path(tmp, f"{factor}", str(k)))
                with contextlib.redirect_stdout(io.StringIO()):
                    rows = continued(path, args.model, Path(tmp, f"{factor}", f"out{k}"), settings)
                for seed, new, seed_end in rows:
                    seeds.append(seed)
                    news.append(new)
                    reals.append(real_next(path, SEED_FROM + seed_end))
            s, r, n = (np.array(x) for x in (seeds, reals, news))
            ok = ~np.isnan(r) & ~np.isnan(n)
            print(f"| {factor} | {np.mean(s):.1f} | {np.nanmean(r):.1f} | {np.nanmean(n):.1f} | "
                  f"{np.mean(np.abs(n[ok] - r[ok])):.1f} | {np.nanmean(n / s):.2f} |", flush=True)


if __name__ == "__main__":
    main()
