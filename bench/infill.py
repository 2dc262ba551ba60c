"""Speed of the two new tasks: ``python -m bench infill --checkpoint PATH [--songs 5] [--threads 2]``;
``--distances`` measures the format instead (no model): how far back a span bar's given notes are.

Times ``musictx-generate``'s own code for each of the first ``--songs`` songs of POP909's validation split (as
``data/pop_infill`` lists it; any songs given with ``--song`` instead): an infill of 4 bars (every track,
bars 17-20) and the accompaniment (BRIDGE and PIANO) of the bars that cover 30 s from the melody's entry.
Reports seconds of music made per second of wall time (the issue's target: >= 10x on 2 CPU cores), the
median and the slowest song; the infill is timed with the copy cache (shipped) and without, one after the
other on each song. ``--samples N`` (N > 1) times the accompaniment of N samples instead, drawn as one batch
(as ``musictx-generate num_samples=N`` draws them) and one at a time, in turn on each song, and reports the
music made per second per sample. OMP_WAIT_POLICY=PASSIVE unless the environment sets it.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from musictx.console.args import COUNT, OneLineParser

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is loaded (imports below are inside)


def time_song(net, tok, path: Path, folder: Path) -> dict:
    from musictx.decoding.sampling_options import SamplingOptions
    from musictx.evaluation.accompany_card import accompany_range, melody_file
    from musictx.evaluation.infill_scorecard import bar_seconds
    from musictx.tasks.accompany import accompany_song
    from musictx.tasks.infill import infill_song
    from musictx.tasks.song_bars import melody_song, read_song

    song = read_song(tok, path)
    s = min(16, song.n_bars - 5)
    t0, t1 = bar_seconds(song, [s, s + 4])
    infill = {}
    for copy in (1.0, 0.0):  # the shipped copy cache, then the network alone, one after the other
        start = time.perf_counter()
        infill_song(net, tok, song, s, s + 4, None, SamplingOptions(hooks={"copy_cache": {"strength": copy}}))
        infill[copy] = (t1 - t0) / (time.perf_counter() - start)
    melody_path = melody_file(path, folder)
    melody = melody_song(tok, melody_path)
    a, e, lines = accompany_range(melody, melody_path, 30.0, "melody")  # as the scorecard: from the melody's entry
    start = time.perf_counter()
    accompany_song(net, tok, melody, ["BRIDGE", "PIANO"], a, e, SamplingOptions())
    return {"song": path.name, "infill_x": infill[1.0], "infill_no_copy_x": infill[0.0],
            "accompany_x": (lines[e] - lines[a]) / (time.perf_counter() - start),
            "accompany_s": float(lines[e] - lines[a])}


def time_samples(net, tok, path: Path, folder: Path, samples: int, batch_first: bool) -> dict:
    """Seconds of accompaniment made per second, per sample, for ``samples`` samples drawn as one batch and
    one at a time (``batch_first``: which goes first on this song)."""
    from musictx.decoding.sampling_options import SamplingOptions
    from musictx.evaluation.accompany_card import accompany_range, melody_file
    from musictx.tasks.accompany import accompany_songs
    from musictx.tasks.song_bars import melody_song

    melody_path = melody_file(path, folder)
    melody = melody_song(tok, melody_path)
    a, e, lines = accompany_range(melody, melody_path, 30.0, "melody")
    music = float(lines[e] - lines[a]) * samples
    out = {}
    for batch in (batch_first, not batch_first):
        start = time.perf_counter()
        if batch:
            accompany_songs(net, tok, melody, ["BRIDGE", "PIANO"], a, e, SamplingOptions(), samples=samples)
        else:
            for k in range(samples):
                accompany_songs(net, tok, melody, ["BRIDGE", "PIANO"], a, e, SamplingOptions(seed=k))
        out["batch_x" if batch else "one_by_one_x"] = music / (time.perf_counter() - start)
    return out


def format_distances(tok, songs: list[Path]) -> None:
    """Per task, the ids from each span bar's given notes (bars 17-20) to where its middle bar begins, in the
    infill format and with the given tracks first in each bar instead; the share past 512 (the model's
    relative reach)."""
    import numpy as np

    from musictx.io.infill_format import BarSplitter, InfillIds
    from musictx.tasks.infill import infill_prompt
    from musictx.tasks.song_bars import read_song

    splitter, fill = BarSplitter(tok), InfillIds.of(tok).fill
    print("| task (bars 17-20) | median distance, this format | share beyond 512 | median, given tracks first |")
    print("|---|---|---|---|")
    for task, taken, right in (("accompany (no right edge)", {81, 0}, False),
                               ("infill tracks=bridge,piano (right edge in view)", {81, 0}, True),
                               ("infill, every track", None, True)):
        fim, interleaved = [], []
        for path in songs:
            song = read_song(tok, path)
            s = min(16, song.n_bars - 5)
            prompt, _ = infill_prompt(tok, song, s, s + 4, taken, 1024, right)
            fills, at = np.flatnonzero(prompt == fill), len(prompt)
            for j, b in enumerate(range(s, s + 4)):
                given, took = splitter.split(song.bar_ids(b), taken)
                fim.append(at - (fills[j] - len(given)))
                interleaved.append(len(given))
                at += len(took)
        fim = np.asarray(fim)
        print(f"| {task} | {np.median(fim):.0f} | {np.mean(fim > 512):.2f} | {np.median(interleaved):.0f} |")


def main(argv=None) -> None:
    parser = OneLineParser(prog="python -m bench infill", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="a model fine-tuned with experiment=pop_infill")
    parser.add_argument("--distances", action="store_true", help="measure the format, not a model")
    parser.add_argument("--data", default="data/pop_infill", help="prepared POP909 folder (its validation split)")
    parser.add_argument("--song", action="append", default=[], help="a POP909 song file (repeatable)")
    parser.add_argument("--songs", type=COUNT, default=5)
    parser.add_argument("--threads", type=COUNT, default=2)
    parser.add_argument("--samples", type=COUNT, default=1, help="> 1: accompaniment, N samples batched vs one by one")
    args = parser.parse_args(argv)
    import numpy as np
    import torch

    from musictx.checkpoints.model_store import load_model
    from musictx.evaluation.run import split_songs

    torch.set_num_threads(args.threads)
    if args.distances:
        from musictx.io.metrical_tokenizer import MetricalTokenizer

        return format_distances(MetricalTokenizer(infill=True), [Path(p) for p in args.song] or
                                split_songs(args.data, "validation"))
    if not args.checkpoint:
        parser.error("--checkpoint is required (or --distances)")
    net, tok, _ = load_model(args.checkpoint)
    songs = [Path(p) for p in args.song] or split_songs(args.data, "validation")[: args.songs]
    if args.samples > 1:
        with tempfile.TemporaryDirectory() as tmp:
            rows = [time_samples(net, tok, p, Path(tmp), args.samples, k % 2 == 0) for k, p in enumerate(songs)]
        batch, one = (np.array([r[k] for r in rows]) for k in ("batch_x", "one_by_one_x"))
        print(f"accompaniment, {args.samples} samples, x real time per sample (median of {len(rows)} songs): "
              f"one batch {np.median(batch):.1f}, one at a time {np.median(one):.1f}; batch / one at a time "
              f"{np.median(batch / one):.2f}x ({torch.get_num_threads()} threads)")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        rows = [time_song(net, tok, p, Path(tmp)) for p in songs]
    print(f"| song | infill 4 bars (x real time) | the same, copy_cache=0 | accompaniment of "
          f"{rows[0]['accompany_s']:.0f} s (x real time) |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['song']} | {r['infill_x']:.1f} | {r['infill_no_copy_x']:.1f} | {r['accompany_x']:.1f} |")
    for key, label in (("infill_x", "infill"), ("infill_no_copy_x", "infill, copy_cache=0"),
                       ("accompany_x", "accompaniment")):
        values = [r[key] for r in rows]
        print(f"{label}: median {np.median(values):.1f}x real time, slowest {min(values):.1f}x "
              f"({args.threads} threads, {torch.get_num_threads()} used)")


if __name__ == "__main__":
    main()
