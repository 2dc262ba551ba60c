"""Does a song that has just played its phrase twice play it a third time, and does `pop`? The check behind the
`phrase_return` hook (docs/pop.md, "Phrase return"), on POP909's validation songs.

Each bar line of a song where the last 2P bars restate a P-bar phrase (`restated_period`: 2 <= P <= 4, each bar
pair sharing >= 0.6 of its notes) is a point; at most ``--per-song`` points a song, the first ones at least 2P
bars apart. From each, the song's last 8 bars are the seed and ``pop`` writes the next P bars once per arm (the
shipped settings, `hooks.phrase_return.strength` set by the arm). Printed per arm, and for the song's own next
P bars: the mean share of notes a new bar has in common with the phrase's bar (`shared_notes`), and the share of
points where every new bar restates its phrase bar (>= 0.6).

    python scripts/phrase_return_check.py --strengths 0 3 4 [--per-song 2]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from data_prep.sources import hash_split
from musictx.checkpoints.model_store import load_model
from musictx.decoding import SamplingOptions
from musictx.decoding.cursor import RemiCursor
from musictx.decoding.hooks.phrase_return import MATCH, restated_period, shared_notes
from musictx.tasks import metrical_seed, sample_bars

POP = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pop" / "POP909"
SEED_BARS = 8


def bars_of(tok, ids: np.ndarray) -> list[dict]:
    """The bars (`Bar.by_position`) of REMI ids that start on a Bar id, the last one whole."""
    cursor = RemiCursor(tok)
    cursor.start(torch.as_tensor(np.append(ids, tok.bar_id))[None])
    return [bar.by_position() for bar in cursor.bars[0][:-1]]


def points(bars: list[dict], per_song: int) -> list[tuple[int, int]]:
    """(bar index, P) where the bars before restate a P-bar phrase and P more bars follow."""
    found, last = [], -10**9
    for i in range(SEED_BARS, len(bars) - 4):
        period = restated_period(bars[i - SEED_BARS:i])
        if period and i - last >= 2 * period and len(found) < per_song:
            found.append((i, period))
            last = i
    return found


def restating(new: list[dict], phrase: list[dict]) -> tuple[float, bool]:
    shares = [shared_notes(a, b) for a, b in zip(new, phrase, strict=False)] + [0.0] * (len(phrase) - len(new))
    return float(np.mean(shares)), all(s >= MATCH for s in shares)


def song_rows(net, tok, song: Path, strengths: list[float], per_song: int) -> dict[str, list[tuple[float, bool]]]:
    """Per arm ("real" and each strength), the (notes in common, every bar restated) of the song's points."""
    whole = metrical_seed(tok, song)
    bar_at = np.flatnonzero(whole.ids == tok.bar_id)
    bars = bars_of(tok, whole.ids)
    rows: dict[str, list[tuple[float, bool]]] = {"real": [], **{f"strength {s:g}": [] for s in strengths}}
    for k, (i, period) in enumerate(points(bars, per_song)):
        phrase = bars[i - period:i]
        rows["real"].append(restating(bars[i:i + period], phrase))
        seed = replace(whole, ids=whole.ids[bar_at[i - SEED_BARS]:bar_at[i]],
                       first_bar=whole.first_bar + i - SEED_BARS, bars=SEED_BARS)
        for strength in strengths:
            sampling = SamplingOptions(seed=k, hooks={"phrase_return": {"strength": strength}})
            new = sample_bars(net, tok, seed, sampling, num_samples=1, bars=period)[0]
            written = bars_of(tok, np.append(seed.ids, new))[SEED_BARS:]
            rows[f"strength {strength:g}"].append(restating(written, phrase))
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strengths", type=float, nargs="+", default=[0.0, 4.0])
    p.add_argument("--per-song", type=int, default=2)
    args = p.parse_args(argv)
    net, tok, _ = load_model("pop")
    songs = [s for s in sorted(POP.glob("[0-9][0-9][0-9]/[0-9][0-9][0-9].mid"))
             if hash_split(f"{s.parent.name}/{s.name}", 0.1, 0.1) == "validation"]
    rows: dict[str, list[tuple[float, bool]]] = {}
    for song in songs:
        for name, values in song_rows(net, tok, song, args.strengths, args.per_song).items():
            rows.setdefault(name, []).extend(values)
    print(f"{len(songs)} validation songs, {len(rows['real'])} points where the seed plays its phrase twice; the "
          "next bars against the phrase's:")
    for name, values in rows.items():
        shares, whole_bars = zip(*values, strict=True) if values else ((), ())
        print(f"  {name:<14} notes in common {np.mean(shares):.3f}; every bar restated {np.mean(whole_bars):.3f}")


if __name__ == "__main__":
    main()
