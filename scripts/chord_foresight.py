"""How much of a POP909 song's next 30 s of harmony could a continuation know from its 10 s seed?

The two-sample test's strongest tell is ``har_chord_tone_piano``: the share of the continuation's PIANO notes
that are tones of the chord the song's annotation (``chord_midi.txt``) has at that moment. A continuation sees
only its seed. This script scores the song's *real* PIANO notes of the next 30 s against chords that a
continuation could have, as a ceiling on what any continuation can reach on that measure:

- ``annotated``: the song's own chords at each note (what the real continuation gets; the measure's top);
- ``seed repeated``: the seed's annotated chords, its last P bars played again and again (P = 2, 4, or the
  period that best repeats inside the seed), half bar by half bar from the seed's end;
- ``seed, chords from its notes``: the same with the seed's chords found from its notes (the best major or
  minor triad of each half bar), as a continuation of a file without a chord file must;
- ``the song, P bars earlier``: an oracle that knows the real song up to P bars before each note (P = 4, 8):
  the chords of P bars before, whose first bars lie in the continuation itself;
- ``seed's tonic triad``: the triad the seed's notes fit best as a whole (a player who stays home).

The seed and the new music are the scorecard's: 10 s from 25 s, snapped to the annotation's downbeats,
30 s new. Decide on validation songs; the test split is looked at once.

    python scripts/chord_foresight.py data/pop_large validation
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pretty_midi

from musictx.io.chord_labels import Chords

SEED_FROM, SEED_SECONDS, NEW_SECONDS = 25.0, 10.0, 30.0
LOOKUP_AFTER_S = 0.03  # as the two-sample features: a note on a chord change belongs to the new chord
TRIADS = np.array([np.isin(np.arange(12), [r, (r + third) % 12, (r + 7) % 12])
                   for r in range(12) for third in (3, 4)], dtype=float)  # (24, 12)


@dataclass
class Song:
    downbeats: np.ndarray  # (D,) s, from beat_midi.txt
    chords: Chords
    notes: list  # every track's pretty_midi notes
    piano: list  # the PIANO track's


def read_song(midi: Path) -> Song:
    rows = np.loadtxt(midi.with_name("beat_midi.txt"), ndmin=2)
    pm = pretty_midi.PrettyMIDI(str(midi))
    return Song(rows[rows[:, 2] == 1, 0], Chords.read(midi.with_name("chord_midi.txt"), strict=False),
                [n for i in pm.instruments for n in i.notes],
                [n for i in pm.instruments if i.name.upper() == "PIANO" for n in i.notes])


def half_bars(song: Song, bar: int) -> list[tuple[float, float]]:
    a = song.downbeats[bar]
    z = song.downbeats[bar + 1] if bar + 1 < len(song.downbeats) else a + np.median(np.diff(song.downbeats))
    return [(a, (a + z) / 2), ((a + z) / 2, z)]


def best_triad(notes: list, lo: float, hi: float) -> frozenset[int]:
    """The major or minor triad the notes sounding in [lo, hi) fit best, by time sounding; empty if none."""
    weight = np.zeros(12)
    for n in notes:
        weight[n.pitch % 12] += max(0.0, min(n.end, hi) - max(n.start, lo))
    if not weight.any():
        return frozenset()
    score = TRIADS @ weight - 0.5 * (1 - TRIADS) @ weight  # tones in, minus half the time off the triad
    return frozenset(np.flatnonzero(TRIADS[int(np.argmax(score))]).tolist())


def repeating_period(chords: list, candidates=(1, 2, 4, 8)) -> int:
    """The period in bars that best repeats the seed's own half-bar chords (the longer on a tie)."""
    bars = len(chords) // 2
    scored = [(np.mean([chords[h] == chords[h - 2 * p] for h in range(2 * p, len(chords))]), p)
              for p in candidates if p < bars]
    return max(scored)[1] if scored else max(1, bars)


def share(notes: list, chord_at) -> float:
    """The share of ``notes`` whose pitch class is in ``chord_at(note)`` (notes under no chord left out)."""
    judged = [n.pitch % 12 in chord for n in notes if (chord := chord_at(n))]
    return float(np.mean(judged)) if judged else float("nan")


def song_rates(song: Song) -> dict[str, float] | None:
    first = int(np.searchsorted(song.downbeats, SEED_FROM))
    end = int(np.searchsorted(song.downbeats, SEED_FROM + SEED_SECONDS))  # the first new bar
    if end - first < 2 or end + 1 >= len(song.downbeats):
        return None
    start = song.downbeats[end]
    new = [n for n in song.piano if start <= n.start < start + NEW_SECONDS]
    if not new:
        return None
    seed_halves = [h for bar in range(first, end) for h in half_bars(song, bar)]
    labelled = [song.chords.at(lo + LOOKUP_AFTER_S) for lo, _ in seed_halves]
    heard = [best_triad(song.notes, lo, hi) for lo, hi in seed_halves]

    def place(n) -> tuple[int, int, float]:  # (bar, half, fraction of the bar) of a note
        bar = int(np.searchsorted(song.downbeats, n.start, side="right")) - 1
        (a, mid), (_, z) = half_bars(song, bar)
        return bar, int(n.start >= mid), (n.start - a) / (z - a)

    def repeated(seq: list, period: int):
        period = min(period, end - first)
        return lambda n: seq[2 * (end - first - period + (place(n)[0] - end) % period) + place(n)[1]]

    def earlier(bars: int):
        def chord(n):
            bar, _, frac = place(n)
            if bar - bars < 0:
                return frozenset()
            (a, _), (_, z) = half_bars(song, bar - bars)
            return song.chords.at(a + frac * (z - a) + LOOKUP_AFTER_S)
        return chord

    home = best_triad(song.notes, song.downbeats[first], start)
    return {
        "annotated": share(new, lambda n: song.chords.at(n.start + LOOKUP_AFTER_S)),
        "seed repeated, P = 2": share(new, repeated(labelled, 2)),
        "seed repeated, P = 4": share(new, repeated(labelled, 4)),
        "seed repeated, its own period": share(new, repeated(labelled, repeating_period(labelled))),
        "seed, chords from its notes, its own period": share(new, repeated(heard, repeating_period(heard))),
        "the song, 4 bars earlier (oracle)": share(new, earlier(4)),
        "the song, 8 bars earlier (oracle)": share(new, earlier(8)),
        "seed's tonic triad throughout": share(new, lambda n: home),
    }


def main(data_dir: str, split: str) -> None:
    data = Path(data_dir)
    root = (data / json.loads((data / "manifest.json").read_text())["input_dir"]).resolve()
    if not root.is_dir():
        root = Path(json.loads((data / "manifest.json").read_text())["input_dir"]).resolve()
    files = [json.loads(line) for line in (data / f"{split}.files.txt").read_text().splitlines() if line]
    rates = [r for f in files if (root / f).with_name("chord_midi.txt").is_file()
             and (r := song_rates(read_song(root / f))) is not None]
    print(f"{len(rates)} of {len(files)} {split} songs: the real next {NEW_SECONDS:.0f} s of PIANO notes on the "
          f"chord tones of ...")
    print("| chords the notes are scored against | mean | median |\n|---|---:|---:|")
    for key in rates[0]:
        values = np.array([r[key] for r in rates])
        print(f"| {key} | {np.nanmean(values):.3f} | {np.nanmedian(values):.3f} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
