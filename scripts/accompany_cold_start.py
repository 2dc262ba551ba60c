"""A melody with nothing before it: how much accompaniment does `task=accompany` write, and on which chord tones?

The accompaniment evaluation (`musictx-evaluate mode=accompany`) starts at the bar where a POP909 song's melody
enters, with the song's own bars before it (the intro, accompaniment and all) in the prompt. A user's melody, or the
bundled motif, has nothing before its first bar. This cuts each song's melody at the downbeat before its entry
(a file of the melody alone, 4/4, from that bar), accompanies its first ``--bars`` bars, and counts the written
notes against the real accompaniment of the same bars, and the strong-beat notes on the annotated chord's tones
(docs/infill.md, "A tune alone", has the figures before and after the prompt's rule for such a melody):

    python scripts/accompany_cold_start.py data/pop --split validation --songs 20 [--first 9]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pretty_midi
import yaml

from musictx.app.core import Continuer
from musictx.app.infill_tab import Filler
from musictx.app.messages import task_request
from musictx.evaluation.chords import Harmony

ROLES = ("BRIDGE", "PIANO")


def melody_from_entry(song: Path, out: Path, bars: int, skip: int = 0) -> tuple[float, dict[str, int]]:
    """The song's melody from the downbeat before its first note, alone, as ``out``; (that downbeat's time,
    the real BRIDGE's and PIANO's notes in the ``bars`` bars from ``skip`` bars after it)."""
    pm = pretty_midi.PrettyMIDI(str(song))
    beats = np.loadtxt(song.parent / "beat_midi.txt", ndmin=2)
    downbeats = beats[beats[:, 2] == 1, 0]
    melody = next(i for i in pm.instruments if i.name.upper() == "MELODY")
    entry = min(n.start for n in melody.notes)
    k = int(np.flatnonzero(downbeats <= entry + 0.05).max())
    start = downbeats[k]
    first, end = downbeats[min(k + skip, len(downbeats) - 1)], downbeats[min(k + skip + bars, len(downbeats) - 1)]
    alone = pretty_midi.PrettyMIDI(initial_tempo=float(pm.get_tempo_changes()[1][0]))
    track = pretty_midi.Instrument(80, name="MELODY")
    track.notes = [pretty_midi.Note(n.velocity, n.pitch, n.start - start, n.end - start)
                   for n in melody.notes if n.start >= start]
    alone.instruments.append(track)
    alone.time_signature_changes = [pretty_midi.TimeSignature(4, 4, 0)]
    alone.write(str(out))
    real = {r: sum(first <= n.start < end for i in pm.instruments if i.name.upper() == r for n in i.notes)
            for r in ROLES}
    return float(start), real


def summary(args: argparse.Namespace, rows: list[tuple], written: int, under: int, real_bridge: int) -> str:
    """One line: the written notes against the real's (all, and by track), the chord tones, and where BRIDGE
    strikes."""
    ratio, share, *by_role = np.array(rows).T
    by_track = ", ".join(f"{r} {np.median(x):.2f}" for r, x in zip(ROLES, by_role, strict=True))
    return (f"bars {args.first}-{args.first + args.bars - 1}, {len(rows)} songs: accompaniment notes / the real's: "
            f"median {np.median(ratio):.2f}, songs under 0.5x {np.mean(ratio < 0.5):.2f}; strong-beat notes on chord "
            f"tones {np.nanmean(share):.3f}; by track, median: {by_track}; BRIDGE notes {written} "
            f"(real {real_bridge}), {under / max(written, 1):.2f} of them struck while a melody note sounds "
            "(POP909's train split: 0.41)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", type=Path, help="a prepared pop folder (its SPLIT.files.txt names the songs)")
    p.add_argument("--split", default="validation")
    p.add_argument("--songs", type=int, default=16)
    p.add_argument("--bars", type=int, default=8)
    p.add_argument("--first", type=int, default=1, help="the first bar accompanied (the melody alone before it)")
    p.add_argument("--hook", action="append", default=[], metavar="NAME.FIELD=VALUE",
                   help="a hook's option other than its default, e.g. counter_rest.strength=2 (repeatable)")
    p.add_argument("--pop909", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/pop/POP909")
    args = p.parse_args(argv)
    names = [line.strip().strip('"') for line in (args.data / f"{args.split}.files.txt").read_text().splitlines()]
    work = Path(tempfile.mkdtemp())
    cont = Continuer(workdir=work / "app")
    for item in args.hook:
        (name, field), value = item.split("=")[0].split("."), yaml.safe_load(item.split("=", 1)[1])
        cont.base = cont.base.with_hook(name, **{field: value})
    filler = Filler(cont)
    rows, under, written, real_bridge = [], 0, 0, 0
    for name in names[: args.songs]:
        song = args.pop909 / name
        cut, real = melody_from_entry(song, work / f"{song.stem}.mid", args.bars, args.first - 1)
        harmony = Harmony.read(song.parent / "chord_midi.txt", song.parent / "beat_midi.txt")
        take, message = task_request(lambda s=song: filler.accompany(work / f"{s.stem}.mid", first=args.first,
                                                                    last=args.first + args.bars - 1), "accompany")
        if take is None:
            print(f"{name}: {message}")
            continue
        tracks = {i.name: i.notes for i in pretty_midi.PrettyMIDI(str(take.midi)).instruments}
        notes = [n for r in ROLES for n in tracks.get(r, [])]
        onsets, pitches = np.array([n.start + cut for n in notes]), np.array([n.pitch for n in notes])
        share, _ = harmony.chord_tone_share(onsets, pitches)
        rows.append((len(notes) / max(sum(real.values()), 1), share,
                     *(len(tracks.get(r, [])) / max(real[r], 1) for r in ROLES)))
        melody = tracks["MELODY"]
        bridge = [n.start for n in tracks.get("BRIDGE", [])]
        under += sum(any(m.start <= t < m.end for m in melody) for t in bridge)
        written += len(bridge)
        real_bridge += real["BRIDGE"]
    print(summary(args, rows, written, under, real_bridge))

if __name__ == "__main__":
    main()
