"""How long the web app takes from Continue to audio: ``python -m bench app [--model piano]``.

Times `musictx.app.core.Continuer.continue_file` — what the page's Continue button runs: read the seed,
generate, write each sample's MIDI, piano roll and WAV — on the bundled motif, for ``--seconds`` of new
music per sample. The page adds its own HTTP round trip and the browser's decoding of the WAV (well under a
second on this machine). Median of ``--repeats``, threads explicit, OMP_WAIT_POLICY=PASSIVE.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from musictx.console.args import COUNT, SECONDS, OneLineParser, number_list

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main(argv=None) -> None:
    p = OneLineParser(prog="python -m bench app", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="shipped name, model folder or .ckpt "
                                                    "(default: the one the app chooses for the motif)")
    p.add_argument("--threads", type=COUNT, default=2)
    p.add_argument("--seconds", type=SECONDS, default=30.0, help="seconds of new music per sample")
    p.add_argument("--samples", type=number_list(), default="1,2", help="numbers of samples per request")
    p.add_argument("--repeats", type=COUNT, default=3)
    args = p.parse_args(argv)

    import torch

    from musictx.app.core import MOTIF, Continuer, Settings

    torch.set_num_threads(args.threads)
    cont = Continuer(args.model, workdir=tempfile.mkdtemp(prefix="musictx-bench-app-"))
    model = cont.models.choose(MOTIF).model
    print(f"model {model.ref} ({model.meta['source']}), audio: {cont.audio_reason or 'on'}, "
          f"{args.seconds:g} s new per sample, threads={args.threads}, median of {args.repeats}")
    print("\n| samples | Continue -> audio, s (min-max) | new music, s | x real time |\n|---:|---|---:|---:|")
    for n in (int(x) for x in args.samples.split(",") if x):
        runs = []
        for k in range(args.repeats):
            settings = Settings(seed_seconds=8.0, length_seconds=args.seconds, num_samples=n, seed=k)
            t0 = time.perf_counter()
            results = cont.continue_file(MOTIF, settings)
            runs.append(time.perf_counter() - t0)
            if cont.audio_reason is None and any(r.wav is None for r in results):
                raise RuntimeError("the app wrote no WAV although audio is on")
        wall = sorted(runs)[len(runs) // 2]
        print(f"| {n} | {wall:.1f} ({min(runs):.1f}-{max(runs):.1f}) | {n * args.seconds:g} | "
              f"{n * args.seconds / wall:.1f}x |")


if __name__ == "__main__":
    main()
