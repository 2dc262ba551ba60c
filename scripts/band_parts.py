"""How a band's bass and keys go on under `pop`, which learnt POP909's MELODY, BRIDGE and PIANO only.

Each POP909 song of a split becomes a band: its melody named "vocal", its counter-melody "counter", and its piano
cut in two, the lowest note of each onset at or below G3 a bass (program 33) and the rest keys (program 4), two
parts `pop` never learnt. The band's seed (``--seed-seconds`` from ``--seed-from``) is continued with the shipped
settings (one draw: ``best_of=1``) and the new bars' bass and keys are compared with the song's own next bars, cut
the same way. Before `musictx.tasks.played_as` the bass and the keys got no new note.

    python scripts/band_parts.py --split validation --songs 20
    python scripts/band_parts.py --task infill --bars 9-12      # every track of bars 9-12 filled anew
    python scripts/band_parts.py --task accompany --bars 9-16   # the vocal and the bass: BRIDGE and PIANO written

``--task infill``: the band's bars refilled by `pop_infill` (the copy cache off, so that the bars are the network's,
not the song's own again), compared with the song's own bars. ``--task accompany``: the band without its counter-melody
and keys, BRIDGE and PIANO written by `pop` for the vocal and the bass; its pitch classes compared with the song's own
counter-melody and keys in those bars.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pretty_midi

from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.score_prep import BASS_CEILING
from musictx.io.token_store import read_file_names

PARTS = {"bass": 33, "keys": 4}


def band_of(song: Path, out: Path) -> Path:
    """The band version of a POP909 song, beside a copy of its beat file (the same bars)."""
    pm = pretty_midi.PrettyMIDI(str(song))
    band = pretty_midi.PrettyMIDI(initial_tempo=pm.get_tempo_changes()[1][0])
    band.time_signature_changes = pm.time_signature_changes
    by_name = {i.name.upper(): i for i in pm.instruments}
    for name, new in (("MELODY", "vocal"), ("BRIDGE", "counter")):
        if name in by_name:
            band.instruments.append(pretty_midi.Instrument(0, name=new))
            band.instruments[-1].notes = list(by_name[name].notes)
    bass, keys = (pretty_midi.Instrument(p, name=n) for n, p in PARTS.items())
    onsets: dict[float, list] = {}
    for note in by_name["PIANO"].notes:
        onsets.setdefault(round(note.start, 3), []).append(note)
    for notes in onsets.values():
        low = min(notes, key=lambda n: n.pitch)
        for note in notes:
            (bass if note is low and note.pitch <= BASS_CEILING else keys).notes.append(note)
    band.instruments += [bass, keys]
    out.mkdir(parents=True, exist_ok=True)
    band.write(str(out / song.name))
    shutil.copy(song.with_name("beat_midi.txt"), out / "beat_midi.txt")
    return out / song.name


def part_figures(pm: pretty_midi.PrettyMIDI, start: float, end: float) -> dict[str, dict[str, float]]:
    """Notes a second, median pitch and share of onsets struck alone, of the bass, the keys and the vocal in
    [start, end); and the pitch-class histograms there of every track's notes ("all") and the vocal's and
    counter-melody's ("lines")."""
    def pcs(names=None) -> list[int]:
        return np.bincount([n.pitch % 12 for i in pm.instruments if not i.is_drum and (names is None or i.name in names)
                            for n in i.notes if start <= n.start < end], minlength=12).tolist()

    out = {"all": {"pcs": pcs()}, "lines": {"pcs": pcs(("vocal", "counter"))}}
    for inst in pm.instruments:
        if inst.name not in (*PARTS, "vocal"):
            continue
        notes = [n for n in inst.notes if start <= n.start < end]
        starts = np.round([n.start for n in notes], 3)
        alone = np.mean(np.unique(starts, return_counts=True)[1] == 1) if notes else np.nan
        out[inst.name] = {"per_s": len(notes) / (end - start), "median": float(np.median([n.pitch for n in notes]))
                          if notes else np.nan, "alone": float(alone)}
    return out


def seed_notes_moved(band: pretty_midi.PrettyMIDI, made: pretty_midi.PrettyMIDI, start: float, seconds: float) -> int:
    """How many of the seed's notes, by pitch track by track, are not on their own track in the output. A note
    within 0.1 s of the seed's last bar line is left out: the token grid may move it onto the line, into the new
    bars, on both sides."""
    def pitches(pm, t0):
        return {i.name: Counter(n.pitch for n in i.notes if t0 - 0.01 <= n.start < t0 + seconds - 0.1)
                for i in pm.instruments}

    ours, theirs = pitches(band, start), pitches(made, 0.0)
    return sum(sum((ours[name] - theirs.get(name, Counter())).values()) for name in ours)


def song_task_row(task: str, name: str, band: Path, bars: str, out: Path) -> dict:
    """One band song's bars filled (``task`` infill) or accompanied (the counter-melody and keys taken out first):
    the parts' figures there, the output's and the song's own."""
    from musictx.checkpoints.model_store import load_pretrained
    from musictx.tasks.song_bars import read_song

    real_pm = pretty_midi.PrettyMIDI(str(band))
    if task == "accompany":
        pm = pretty_midi.PrettyMIDI(str(band))
        pm.instruments = [i for i in pm.instruments if i.name in ("vocal", "bass")]
        band = band.with_name("accompany_" + band.name)
        pm.write(str(band))
    tok = load_pretrained("pop")[1]
    song = read_song(tok, band)
    first, last = (int(x) for x in bars.split("-"))
    start, end = (float(x) for x in song.line_seconds([first - 1, last]))
    opts = GenerateOptions(task=task, checkpoint="pop_infill" if task == "infill" else "pop", seed_midi=str(band),
                           bars=bars, num_samples=1, audio=False, output_dir=str(out), seed=0)
    with contextlib.redirect_stdout(io.StringIO()):  # one line a song: the table says it
        run(opts.with_hook("copy_cache", strength=0.0) if task == "infill" else opts)
    made = pretty_midi.PrettyMIDI(str(out / "sample_00.mid"))
    if task == "accompany":  # the written tracks stand in for the song's own counter-melody and keys
        for inst in made.instruments:
            inst.name = {"BRIDGE": "counter", "PIANO": "keys"}.get(inst.name, inst.name)
    return {"song": name, "generated": part_figures(made, start, end), "real": part_figures(real_pm, start, end)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="data/pop", help="a prepared POP909 folder: its <split>.files.txt")
    p.add_argument("--pop909", default="../shared/data/pop/POP909")
    p.add_argument("--split", default="validation")
    p.add_argument("--songs", type=int, default=20)
    p.add_argument("--seed-from", type=float, default=25.0)
    p.add_argument("--seed-seconds", type=float, default=10.0)
    p.add_argument("--length-seconds", type=float, default=20.0)
    p.add_argument("--task", default="continue", choices=("continue", "infill", "accompany"))
    p.add_argument("--bars", default="9-12", help="infill, accompany: the bars written (1-based, inclusive)")
    args = p.parse_args()
    names = read_file_names(Path(args.data, f"{args.split}.files.txt"))[: args.songs]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            band = band_of(Path(args.pop909) / name, Path(tmp) / Path(name).parent)
            out = Path(tmp) / "out" / Path(name).stem
            if args.task != "continue":
                rows.append(song_task_row(args.task, name, band, args.bars, out))
                continue
            record = run(GenerateOptions(checkpoint="pop", seed_midi=str(band), seed_from=args.seed_from,
                                         seed_seconds=args.seed_seconds, length_seconds=args.length_seconds,
                                         num_samples=1, best_of=1, audio=False, output_dir=str(out), seed=0))
            seed, sample = record["seed"], record["samples"][0]
            made = pretty_midi.PrettyMIDI(str(out / sample["midi"]))
            new = (seed["seconds"], seed["seconds"] + sample["new_seconds"])
            real_start = seed["starts_at_seconds"] + seed["seconds"]  # on the band file's clock
            real = part_figures(pretty_midi.PrettyMIDI(str(band)), real_start, real_start + sample["new_seconds"])
            rows.append({"song": name, "generated": part_figures(made, *new), "real": real,
                         "seed_notes_moved": seed_notes_moved(pretty_midi.PrettyMIDI(str(band)), made,
                                                              seed["starts_at_seconds"], seed["seconds"])})
    print(f"{len(rows)} songs of {args.split}, " + (f"{args.seed_seconds:g} s seed from {args.seed_from:g} s, "
          f"{args.length_seconds:g} s new" if args.task == "continue" else f"task={args.task} bars={args.bars}")
          + ", one draw each")
    print("| part | figure | generated | real |\n|---|---|---:|---:|")
    for what in ("all", "lines"):
        corr = [np.corrcoef(r["generated"][what]["pcs"], r["real"][what]["pcs"])[0, 1] for r in rows]
        print(f"| {what} | pitch-class correlation with the real | {np.nanmean(corr):.3f} | 1 |")
    for part in (*PARTS, "vocal"):
        for figure in ("per_s", "median", "alone"):
            g = np.nanmean([r["generated"].get(part, {}).get(figure, np.nan) for r in rows])
            r = np.nanmean([r["real"].get(part, {}).get(figure, np.nan) for r in rows])
            print(f"| {part} | {figure} | {g:.2f} | {r:.2f} |")
    if args.task == "continue":
        moved = sum(r["seed_notes_moved"] for r in rows)
        print(f"seed notes written on another track than their own: {moved}")
    silent = sum(r["generated"].get("bass", {}).get("per_s", 0) == 0 for r in rows)
    print(f"songs whose bass played no new note: {silent} of {len(rows)} (before played_as: all)")
    Path("outputs").mkdir(exist_ok=True)
    Path(f"outputs/band_parts_{args.task}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
