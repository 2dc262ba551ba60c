"""How the metrical tokenizer's variant and resolution were chosen: tokens per second of music and round-trip
fidelity on POP909, for REMI at 4 / 8 / 12 positions per beat, TSD (MidiTok, time shifts instead of bars)
and the Performance events. ``python -m bench tokenizers --songs 100``.

Fidelity: the share of notes that come back from ``decode(encode(song))`` with the same track, pitch, onset
(within 10 ms) and duration (within 1/8 beat), counted with the meter and pickup applied as prep applies them.
Needs ../shared/data/pop (POP909).
"""

from __future__ import annotations

import time
from pathlib import Path

import miditok
import numpy as np
from symusic import Score

from musictx.console.args import COUNT, OneLineParser
from musictx.io.metrical_tokenizer import MetricalTokenizer
from musictx.io.remi_settings import miditok_config
from musictx.io.tokenizer import EventTokenizer

POP = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "pop" / "POP909"


def _notes(score: Score) -> dict[int, np.ndarray]:
    """{program: (N, 3) onset s, pitch, duration s} sorted."""
    sec = score.to("second")
    out = {}
    for t in sec.tracks:
        a = t.notes.numpy()
        rows = np.stack([a["time"], a["pitch"], a["duration"]], axis=1) if len(a["time"]) else np.zeros((0, 3))
        out[-1 if t.is_drum else int(t.program)] = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
    return out


def _kept(before: dict, after: dict, beat_s: float) -> tuple[int, int]:
    kept = total = 0
    for prog, a in before.items():
        total += len(a)
        b = after.get(prog, np.zeros((0, 3)))
        for onset, pitch, dur in a:
            near = b[(np.abs(b[:, 0] - onset) <= 0.01) & (b[:, 1] == pitch)]
            kept += bool(len(near) and np.min(np.abs(near[:, 2] - dur)) <= beat_s / 8)
    return kept, total


def measure_metrical(name: str, make, songs: list[Path]) -> dict:
    tok = MetricalTokenizer()
    tok.miditok = make()
    tokens = seconds = kept = total = tracks_in = tracks_out = 0
    t0 = time.perf_counter()
    for path in songs:
        score = tok.read(path).score
        ids = np.asarray(tok.miditok.encode(score).ids)
        back = tok.miditok.decode([int(i) for i in ids])
        back = back.resample(score.ticks_per_quarter, min_dur=1)
        back.tempos = score.tempos
        beat_s = 60 / score.tempos[0].qpm
        k, n = _kept(_notes(score), _notes(back), beat_s)
        kept, total = kept + k, total + n
        tokens += len(ids)
        seconds += score.to("second").end()
        tracks_in += sum(len(t.notes) > 0 for t in score.tracks)
        tracks_out += sum(len(t.notes) > 0 for t in back.tracks)
    return {"tokenizer": name, "vocab": len(tok.miditok.vocab), "tokens_per_s": tokens / seconds,
            "fidelity": kept / total, "tracks": f"{tracks_in} -> {tracks_out}", "wall_s": time.perf_counter() - t0}


def measure_performance(songs: list[Path]) -> dict:
    tok = EventTokenizer()
    tokens = seconds = 0
    for path in songs:
        ids = tok.encode(str(path))
        tokens += len(ids)
        seconds += tok.read(str(path)).duration()
    return {"tokenizer": "Performance (10 ms)", "vocab": tok.vocab_size, "tokens_per_s": tokens / seconds,
            "fidelity": float("nan"), "tracks": "3 -> 1 each", "wall_s": 0.0}


def main(argv=None) -> None:
    parser = OneLineParser(prog="python -m bench tokenizers", description=__doc__)
    parser.add_argument("--songs", type=COUNT, default=100, help="POP909 songs, the first N (default 100)")
    args = parser.parse_args(argv)
    if not POP.is_dir():
        raise SystemExit(f"needs POP909 at {POP}")
    songs = [p / f"{p.name}.mid" for p in sorted(POP.iterdir())[: args.songs]]
    rows = [measure_metrical(f"REMI {k}/beat", lambda k=k: miditok.REMI(miditok_config(positions_per_beat=k)), songs)
            for k in (4, 8, 12)]
    rows.append(measure_metrical("TSD 4/beat", lambda: miditok.TSD(miditok_config(positions_per_beat=4)), songs))
    rows.append(measure_performance(songs))
    print(f"{len(songs)} POP909 songs (meter from beat_midi.txt)\n")
    print("| tokenizer | vocab | tokens / s of music | notes back exactly | tracks in -> out |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['tokenizer']} | {r['vocab']} | {r['tokens_per_s']:.1f} | {r['fidelity']:.4f} | {r['tracks']} |")


if __name__ == "__main__":
    main()
