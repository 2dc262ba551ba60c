"""Data-prep throughput: ``python -m bench prep`` (outside the installed package, with the other benches;
musictx's library never imports data_prep, only its ``musictx-prep`` command does).

Prepares a folder (default ``../shared/data/piano``) end to end (read, sustain, tokenize, write) with 1
and 2 worker processes, and compares with a plain single-process pretty_midi read-and-encode of the same
files, all in one run so the ratios are fair on a noisy machine. Workers run one thread each and
OMP_WAIT_POLICY=PASSIVE is set, so spinning OpenMP threads cannot distort the comparison.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

# Before torch is imported (by the modules below): spinning OpenMP threads would distort the comparison.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from data_prep.options import prep_options  # noqa: E402
from data_prep.prepare import write_dataset  # noqa: E402
from data_prep.sources import list_folder  # noqa: E402
from musictx.io.midi_io import MidiReadError  # noqa: E402
from musictx.io.tokenizer import EventTokenizer  # noqa: E402


def _prep_once(input_dir: str, workers: int, out_root: str) -> tuple[float, dict]:
    # prepare.yaml's settings read without Hydra (data_prep never imports it), as `musictx-prep` would get them
    opts = prep_options(source="folder", input_dir=input_dir, output_dir=f"{out_root}/w{workers}", num_workers=workers)
    res = write_dataset(opts, progress=False)
    totals = {"files": sum(s.files for s in res.stats.values()), "notes": sum(s.notes for s in res.stats.values()),
              "tokens": sum(s.tokens for s in res.stats.values())}
    return res.wall_s, totals


def _pretty_midi_reference(input_dir: str, limit: int | None) -> tuple[float, dict]:
    tok = EventTokenizer()
    files = list_folder(input_dir)[:limit]
    totals = {"files": 0, "notes": 0, "tokens": 0}
    t0 = time.perf_counter()
    for f in files:
        try:
            notes = tok.read(f.path, reader="pretty_midi")
        except MidiReadError:
            continue
        totals["files"] += 1
        totals["notes"] += len(notes)
        totals["tokens"] += len(tok.encode_notes(notes)) + 1  # + EOS, as the prep writes
    return time.perf_counter() - t0, totals


def _row(name: str, wall: float, totals: dict, ref_wall_per_file: float) -> str:
    per_file = wall / max(totals["files"], 1)
    return (f"| {name} | {totals['files']} | {wall:.2f} | {totals['files'] / wall:,.0f} | "
            f"{totals['notes'] / wall:,.0f} | {totals['tokens'] / wall:,.0f} | {ref_wall_per_file / per_file:.1f}x |")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench prep", description=__doc__.splitlines()[0])
    p.add_argument("--input-dir", default="../shared/data/piano")
    p.add_argument("--repeats", type=int, default=3, help="runs per worker count (median reported)")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--reference-limit", type=int, default=None,
                   help="pretty_midi reference on only the first N files (rates stay comparable)")
    args = p.parse_args(argv)
    if not Path(args.input_dir).is_dir():
        raise SystemExit(f"{args.input_dir} is not a folder (the shared data lives in ../shared/data)")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for w in args.workers:
            runs = [_prep_once(args.input_dir, w, tmp) for _ in range(args.repeats)]
            rows[w] = (statistics.median(r[0] for r in runs), runs[0][1])
    ref_wall, ref_totals = _pretty_midi_reference(args.input_dir, args.reference_limit)
    ref_per_file = ref_wall / max(ref_totals["files"], 1)
    print(f"\nData prep of {args.input_dir} (symusic reader, full write; median of {args.repeats}; "
          f"{os.cpu_count()} cores; 1 thread per worker, OMP_WAIT_POLICY=PASSIVE)\n")
    print("| pipeline | files | wall s | files/s | notes/s | tokens/s | speed-up vs pretty_midi |")
    print("|---|---|---|---|---|---|---|")
    for w, (wall, totals) in rows.items():
        print(_row(f"musictx-prep, {w} worker{'s' if w > 1 else ''}", wall, totals, ref_per_file))
    print(_row("pretty_midi read + encode, 1 process", ref_wall, ref_totals, ref_per_file))


if __name__ == "__main__":
    main()
