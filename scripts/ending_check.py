"""How a continuation ends, with and without ``ending=true`` (docs/pop.md, "An ending"), against how POP909's
own songs end: validation songs, a 10 s seed from 25 s, 8 new bars, one sample each (the shipped settings).

For the last bar: the share of its notes struck on its downbeat, of its notes (by count) in the key's tonic triad,
whether its lowest note is the tonic and whether its notes hold to the bar's end; for the bar before, the share of
its notes in the dominant seventh. The key is POP909's annotation (``key_audio.txt``: the one sounding at the
seed's start, else the longest; for a real song's last bar, the last). Also how often the Krumhansl-Kessler
key-finder reads that key from the seed alone and from the seed with the new bars before the cadence (what the
hook could read). Prints markdown tables.

    python scripts/ending_check.py --data data/pop --songs 40 [--split validation]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def notes_by_bar(tok, ids) -> list[list[tuple[int, int, int, float]]]:
    """Per bar of ``ids`` (a Bar id opens each): its pitched notes as (position, program, pitch, beats)."""
    pos_of, prog_of, pitch_of, beats = (tok.numbers_of("Position"), tok.numbers_of("Program"),
                                        tok.numbers_of("Pitch"), tok.duration_beats())
    bars, pos, prog = [], 0, -1
    for i in map(int, ids):
        if i == tok.bar_id:
            bars.append([])
            pos = 0
        elif pos_of[i] >= 0:
            pos = int(pos_of[i])
        elif prog_of[i] >= 0 or tok.type_of[i] == "Program":
            prog = int(prog_of[i])
        elif pitch_of[i] >= 0 and bars and prog >= 0:
            bars[-1].append([pos, prog, int(pitch_of[i]), np.nan])
        elif np.isfinite(beats[i]) and bars and bars[-1] and np.isnan(bars[-1][-1][3]):
            bars[-1][-1][3] = float(beats[i])
    return [[tuple(n) for n in bar] for bar in bars]


NAMES = {"C": 0, "Db": 1, "C#": 1, "D": 2, "Eb": 3, "D#": 3, "E": 4, "F": 5, "Gb": 6, "F#": 6, "G": 7, "Ab": 8,
         "G#": 8, "A": 9, "Bb": 10, "A#": 10, "B": 11}


def annotated_key(folder: Path, at: float | None) -> tuple[int, str]:
    """POP909's key (key_audio.txt) sounding at ``at`` seconds, else the longest; ``at`` None: the last."""
    spans = []
    for line in (folder / "key_audio.txt").read_text().split("\n"):
        if line.strip():
            start, end, label = line.split()
            name, quality = label.split(":")
            spans.append((float(start), float(end), (NAMES[name], "major" if quality == "maj" else "minor")))
    if at is None:
        return spans[-1][2]
    return next((k for a, z, k in spans if a <= at < z), max(spans, key=lambda s: s[1] - s[0])[2])


def read_key(bars) -> tuple[int, str]:
    from musictx.io.keys import key_of_histogram

    hist = np.zeros(12)
    for bar in bars:
        for _, _, pitch, beats in bar:
            hist[pitch % 12] += beats if np.isfinite(beats) else 1.0
    return key_of_histogram(hist)


def measure(bars, bar_beats: float, key: tuple[int, str]) -> dict | None:
    """The last bar's and the bar before's figures (module docstring) in ``key``; None where the last bar is
    silent."""
    bars = list(bars)
    while bars and not bars[-1]:
        bars.pop()  # a real song's trailing empty bars
    if len(bars) < 3:
        return None
    tonic, mode = key
    triad = {(tonic + s) % 12 for s in ((0, 4, 7) if mode == "major" else (0, 3, 7))}
    dominant = {(tonic + s) % 12 for s in (7, 11, 2, 5)}
    last, before = bars[-1], bars[-2]
    return {"downbeat": np.mean([n[0] == 0 for n in last]),
            "triad": np.mean([n[2] % 12 in triad for n in last]),
            "root_low": float(min(last, key=lambda n: n[2])[2] % 12 == tonic),
            "held": np.mean([n[0] == 0 and n[3] >= bar_beats - 1e-6 for n in last]),
            "dominant": np.mean([n[2] % 12 in dominant for n in before]) if before else np.nan}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="data/pop")
    p.add_argument("--split", default="validation")
    p.add_argument("--songs", type=int, default=40)
    p.add_argument("--bars", type=int, default=8)
    p.add_argument("--out", default="outputs/ending_check.json")
    args = p.parse_args()

    import torch

    from musictx.checkpoints.model_store import load_pretrained
    from musictx.generation import GenerateOptions
    from musictx.tasks import sample_bars, seed_of

    torch.set_num_threads(1)
    net, tok = load_pretrained("pop")
    learnt = net.learnt_programs
    songs = json.loads("[" + ",".join(Path(args.data, f"{args.split}.files.txt").read_text().split()) + "]")
    root = Path("../shared/data/pop/POP909")
    rows = {"ending=false": [], "ending=true": [], "POP909's own last bars": []}
    reads = {"seed alone": [], "seed and the new bars before the cadence": []}
    t0 = time.time()
    for k, name in enumerate(songs[:args.songs]):
        path = root / name
        opts = GenerateOptions(seed_midi=str(path), seed_seconds=10, seed_from=25, num_samples=1, seed=k)
        seed = seed_of(tok, opts, learnt)
        key = annotated_key(path.parent, 25.0)
        bar_beats = 4.0  # POP909 is 4/4
        for ending in (False, True):
            new = sample_bars(net, tok, seed, opts, num_samples=1, bars=args.bars, ending=ending)[0]
            bars = notes_by_bar(tok, np.concatenate([seed.ids, new]))
            if m := measure(bars, bar_beats, key):
                rows[f"ending={str(ending).lower()}"].append(m)
            if not ending:
                seed_bars = len(notes_by_bar(tok, seed.ids))
                reads["seed alone"].append(read_key(bars[:seed_bars]) == key)
                reads["seed and the new bars before the cadence"].append(read_key(bars[:-2]) == key)
        whole = seed_of(tok, GenerateOptions(seed_midi=str(path)), learnt)
        if m := measure(notes_by_bar(tok, whole.ids), bar_beats, annotated_key(path.parent, None)):
            rows["POP909's own last bars"].append(m)
        print(f"{k + 1}/{args.songs} {name} {time.time() - t0:.0f} s", flush=True)
    cols = ("downbeat", "triad", "root_low", "held", "dominant")
    print("\n| | songs | last bar: notes on its downbeat | in the tonic triad | lowest note the tonic "
          "| held to its end | bar before: notes in V7 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for arm, ms in rows.items():
        print(f"| {arm} | {len(ms)} | " + " | ".join(f"{np.nanmean([m[c] for m in ms]):.2f}" for c in cols) + " |")
    print("\n| the key-finder reads the annotated key from | share |\n|---|---:|")
    for name, hits in reads.items():
        print(f"| {name} | {np.mean(hits):.2f} ({sum(hits)} of {len(hits)}) |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({a: [{c: float(m[c]) for c in cols} for m in ms] for a, ms in rows.items()}))


if __name__ == "__main__":
    main()
