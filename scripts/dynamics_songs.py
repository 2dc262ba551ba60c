"""Do bars filled (``task=infill``) or accompanied (``task=accompany``) in a song played softly (or loudly) come out
as softly? Validation POP909 songs with every velocity times a factor (or, written ``=V``, set to V), bars 9-12
filled anew (the copy cache off: it would copy the song's own notes) or bars 9-16 accompanied anew (the song's own
BRIDGE and PIANO left out, written again for its melody), one sample each: the median velocity of the song's own
notes in those bars and of the new ones.

    python scripts/dynamics_songs.py --task infill --files 8 [--floor null] [--factors 1.5,=127 --ratio null]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

POP909 = Path("../shared/data/pop/POP909")
BARS = {"infill": "9-12", "accompany": "9-16"}


def medians(task: str, path: Path, out: Path, floor, ratio) -> tuple[float, float]:
    """(the song's own notes in the bars, the new ones there): median velocities."""
    import pretty_midi

    from musictx.checkpoints.model_store import load_pretrained
    from musictx.generation.continue_midi import run
    from musictx.generation.generate_options import GenerateOptions
    from musictx.tasks.song_bars import read_song

    first, last = (int(x) for x in BARS[task].split("-"))
    _, tok = load_pretrained("pop")
    start, end = read_song(tok, path).line_seconds([first - 1, last])
    hooks = {"copy_cache": {"strength": 0.0}} if task == "infill" else {}
    with contextlib.redirect_stdout(io.StringIO()):
        run(GenerateOptions(seed_midi=str(path), task=task, bars=BARS[task], num_samples=1, audio=False, hooks=hooks,
                            soft_seed_velocity=floor, loud_seed_ratio=ratio, output_dir=str(out),
                            progress_every_s=None))
    written = ("BRIDGE", "PIANO") if task == "accompany" else None

    def inside(pm) -> list[int]:
        return [n.velocity for i in pm.instruments if written is None or i.name in written for n in i.notes
                if start - 0.01 <= n.start < end - 0.01]

    return (float(np.median(inside(pretty_midi.PrettyMIDI(str(path))))),
            float(np.median(inside(pretty_midi.PrettyMIDI(str(out / "sample_00.mid"))))))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=sorted(BARS), default="infill")
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--factors", default="0.35,1")
    p.add_argument("--split", default="validation")
    p.add_argument("--floor", default="50", help="soft_seed_velocity (null: heard as it is)")
    p.add_argument("--ratio", default="1.3", help="loud_seed_ratio (null: heard as it is)")
    args = p.parse_args()

    import torch
    from dynamics_check import scaled

    torch.set_num_threads(1)
    floor = None if args.floor == "null" else float(args.floor)
    ratio = None if args.ratio == "null" else float(args.ratio)
    names = json.loads("[" + ",".join(Path("data/pop", f"{args.split}.files.txt").read_text().split()) + "]")
    print(f"task={args.task} bars {BARS[args.task]}, {args.split} {args.files} songs, soft_seed_velocity={args.floor}, "
          f"loud_seed_ratio={args.ratio}")
    print("| velocities x | the song's own there | new notes | new - own (mean abs) |")
    print("|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for factor in args.factors.split(","):  # "=V": every pitched velocity set to V (`dynamics_check.scaled`)
            rows = [medians(args.task, scaled(POP909 / name, factor, Path(tmp, factor, str(k))),
                            Path(tmp, factor, f"out{k}"), floor, ratio) for k, name in enumerate(names[: args.files])]
            own, new = (np.array(c) for c in zip(*rows, strict=True))
            print(f"| {factor} | {own.mean():.1f} | {new.mean():.1f} | {np.abs(new - own).mean():.1f} |", flush=True)


if __name__ == "__main__":
    main()
