"""Write musictx/assets/motif.mid, the seed motif the README's first command continues.

Written for this project (no third-party material): eight bars at 96 bpm in C major. The right hand
states a four-note motif (up a third, up a third, down a third, then a held note) on each harmony of
I - IV - V - I, then again with a varied ending; the left hand holds the bass. A clear, repeating
motif is what relative attention should pick up and keep.
"""

import argparse
from pathlib import Path

import pretty_midi

MOTIF = [(0, 0.5), (4, 0.5), (7, 0.5), (4, 0.5), (12, 2.0)]  # (semitones above the root, beats)
ROOTS = [60, 65, 67, 60, 60, 65, 67, 60]  # C F G C | C F G C
BASS = [48, 41, 43, 48, 45, 41, 43, 36]


def build(bpm: float = 96, gate: float = 0.95) -> pretty_midi.PrettyMIDI:
    """The motif at ``bpm``; each melody note sounds ``gate`` of its slot (0.95: detached, as the bundled
    file; 1: held to the next note; above 1: overlapping it, legato as a pianist plays a broken chord)."""
    beat = 60 / bpm
    pm = pretty_midi.PrettyMIDI(initial_tempo=bpm)
    piano = pretty_midi.Instrument(program=0, name="motif")
    for bar, (root, bass) in enumerate(zip(ROOTS, BASS, strict=True)):
        t = bar * 4 * beat
        motif = MOTIF if bar % 4 != 3 else [(0, 0.5), (-1, 0.5), (2, 0.5), (-5, 0.5), (0, 2.0)]  # cadence
        for i, (step, beats) in enumerate(motif):
            velocity = 80 if i == 0 else 66 if beats < 1 else 74
            piano.notes.append(pretty_midi.Note(velocity, root + step, t, t + beats * beat * gate))
            t += beats * beat
        start = bar * 4 * beat
        piano.notes.append(pretty_midi.Note(58, bass, start, start + 4 * beat * 0.98))
    pm.instruments.append(piano)
    return pm


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="write the bundled motif (or the same motif at another tempo)")
    parser.add_argument("--bpm", type=float, default=96)
    parser.add_argument("--gate", type=float, default=0.95, help="melody note length / its slot (default 0.95)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "musictx" / "assets" / "motif.mid"))
    args = parser.parse_args()
    for name in ("bpm", "gate"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name} must be > 0, got {getattr(args, name)}")
    build(args.bpm, args.gate).write(args.out)
    print(f"wrote {args.out}")
