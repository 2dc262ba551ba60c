"""Asked against got for `hooks.density` (notes per bar per track), on POP909 validation songs.

    python scripts/density_check.py --songs 20 --out outputs/density

Each song: the shipped pop continues 10 s from 25 s for 8 bars, once with the model's own density and once
per setting; the new music's notes per bar per asked track are counted from the written MIDI. Prints, per
setting and track, the mean got / asked over the songs and the share of songs within +-20% of it. One
torch thread (set OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE when another job shares the CPU).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from data_prep.sources import hash_split
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions

POP = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pop" / "POP909"
SETTINGS = ({"piano": 6, "melody": 3}, {"piano": 12, "melody": 4}, {"piano": 20, "melody": 6})
BARS = 8


def validation_songs(n: int) -> list[Path]:
    songs = sorted(POP.glob("[0-9][0-9][0-9]/[0-9][0-9][0-9].mid"))
    return [p for p in songs if hash_split(f"{p.parent.name}/{p.name}", 0.1, 0.1) == "validation"][:n]


def per_bar(song: Path, out: Path, density: dict | None) -> dict[str, float]:
    record = run(GenerateOptions(seed_midi=str(song), seed_seconds=10, seed_from=25, length_bars=BARS,
                                 num_samples=1, audio=False, include_seed=False, seed=1, output_dir=str(out),
                                 progress_every_s=None, hooks={"density": density or {}}))
    tracks = record["samples"][0]["tracks"]
    return {name.lower(): n / BARS for name, n in tracks.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--songs", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("outputs/density"))
    args = ap.parse_args()
    songs = validation_songs(args.songs)
    rows = []
    for k, song in enumerate(songs):
        own = per_bar(song, args.out / song.stem / "own", None)
        for s, setting in enumerate(SETTINGS):
            got = per_bar(song, args.out / song.stem / f"set{s}", setting)
            rows.append({"song": song.stem, "setting": s, "own": own, "got": got})
        print(f"{k + 1}/{len(songs)} {song.stem}: own {own}", flush=True)
    (args.out / "density.json").write_text(json.dumps(rows, indent=1))
    print("| asked (notes per bar) | track | model's own | got (mean) | got / asked | songs within +-20% |")
    print("|---|---|---:|---:|---:|---:|")
    for s, setting in enumerate(SETTINGS):
        for track, want in setting.items():
            got = np.array([r["got"].get(track, 0.0) for r in rows if r["setting"] == s])
            own = np.array([r["own"].get(track, 0.0) for r in rows if r["setting"] == s])
            within = np.mean(np.abs(got / want - 1) <= 0.2)
            print(f"| {setting} | {track.upper()} | {own.mean():.1f} | {got.mean():.1f} | {got.mean() / want:.2f} "
                  f"| {within:.0%} |")


if __name__ == "__main__":
    main()
