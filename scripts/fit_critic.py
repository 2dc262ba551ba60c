"""The pop model's critic (`musictx.listening.critic`): what `best_of` chooses by. A maintainer's fit, outside
the package; docs/generation.md ("Best of K") has its figures.

``gather`` continues the first SONGS of the train split once each with the shipped settings and no choice
(``best_of=1``; the two-sample test's seed and length: 10 s from 25 s, 30 s new) and writes each song's new ids:

    python scripts/fit_critic.py gather data/pop --songs 200 --part 0/2 --out outputs/critic_ids_0.json

``fit`` reads the songs again, measures each continuation and the song's own next bars as the tokenizer writes
them with the very function the choice uses (`musictx.tasks.critic_choice.candidate_features`), fits a logistic
regression (real 1, continuation 0; standardized; the listening features without the annotated chords) and
writes the critic beside the model:

    python scripts/fit_critic.py fit data/pop outputs/critic_ids_*.json --out musictx/pretrained/pop/critic.json

Only train songs are read: the validation songs judge the choice, the test songs are looked at once.
"""

from __future__ import annotations

import argparse
import json
import zlib
from pathlib import Path

import numpy as np

SEED_S, FROM_S, LENGTH_S = 10.0, 25.0, 30.0  # the two-sample test's defaults (evaluate.yaml)


def train_songs(data: Path, songs: int | None) -> list[Path]:
    """The first ``songs`` of the train split, one file a song (POP909's other arrangements left out)."""
    from musictx.evaluation.run import split_songs
    from musictx.evaluation.two_sample_run import one_file_per_song

    return one_file_per_song(split_songs(data, "train"))[:songs]


def gather(args: argparse.Namespace) -> None:
    import torch
    from tqdm import tqdm

    from musictx.checkpoints.model_store import load_pretrained
    from musictx.decoding import SamplingOptions
    from musictx.tasks import bars_for, metrical_seed, sample_bars

    torch.set_num_threads(1)
    net, tok = load_pretrained("pop")
    part, parts = (int(x) for x in args.part.split("/"))
    paths = train_songs(args.data, args.songs)[args.skip:][part::parts]
    rows = []
    for path in tqdm(paths, desc=f"part {part}/{parts}"):
        seed = metrical_seed(tok, path, SEED_S, FROM_S)
        bars = bars_for(seed, LENGTH_S, None)
        if len(seed.bars_after(tok.bar_id, 2 * bars)) == 0:
            continue
        sampling = SamplingOptions(seed=args.seed + zlib.crc32(path.name.encode()) % 10_000, best_of=1)
        new = sample_bars(net, tok, seed, sampling, num_samples=1, bars=bars)[0]
        rows.append({"song": str(path), "bars": bars, "new_ids": new.tolist()})
    args.out.write_text(json.dumps(rows))
    print(f"{len(rows)} songs -> {args.out}")


def fit(args: argparse.Namespace) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler
    from tqdm import tqdm

    from musictx.checkpoints.model_store import load_pretrained
    from musictx.evaluation.two_sample_run import ANNOTATED
    from musictx.listening.critic import Critic
    from musictx.tasks import metrical_seed
    from musictx.tasks.critic_choice import candidate_features

    tok = load_pretrained("pop")[1]
    rows = [r for f in args.ids for r in json.loads(f.read_text())]
    fake, real = [], []
    for row in tqdm(rows, desc="features"):
        seed = metrical_seed(tok, row["song"], SEED_S, FROM_S)
        bars = row["bars"]
        fake.append(candidate_features(tok, seed, np.asarray(row["new_ids"]), bars))
        real.append(candidate_features(tok, seed, seed.bars_after(tok.bar_id, bars), bars))
    names = sorted(n for n in fake[0] if not n.startswith(ANNOTATED))  # no chord file beside a continuation
    X = np.nan_to_num(np.array([[d[n] for n in names] for d in fake + real], dtype=float))
    y = np.r_[np.zeros(len(fake)), np.ones(len(real))]
    scaler = StandardScaler().fit(X)
    Z = scaler.transform(X)
    if args.paired:  # within each song: the real bars against the model's, as differences (a choice is within a song)
        half = len(fake)
        D = Z[half:] - Z[:half]  # (songs, F) real minus continuation
        model = LogisticRegression(C=args.c, max_iter=4000, fit_intercept=False).fit(
            np.vstack([D, -D]), np.r_[np.ones(half), np.zeros(half)])
        accuracy = float((D @ model.coef_[0] > 0).mean())
    else:
        model = LogisticRegression(C=args.c, max_iter=4000).fit(Z, y)
        accuracy = float(model.score(Z, y))
    critic = Critic(tuple(names), scaler.mean_, np.where(scaler.scale_ > 0, scaler.scale_, 1.0), model.coef_[0],
                    float(np.atleast_1d(model.intercept_)[0]) if not args.paired else 0.0, args.best_of,
                    {"songs": len(rows), "split": "train", "c": args.c, "seed_s": SEED_S, "from_s": FROM_S,
                     "length_s": LENGTH_S, "paired": args.paired, "train_accuracy": accuracy})
    critic.save(args.out)
    top = np.argsort(-np.abs(model.coef_[0]))[:12]
    print(f"{len(rows)} songs, {len(names)} features, train accuracy {critic.about['train_accuracy']:.3f} -> "
          f"{args.out}\n  heaviest: " + ", ".join(f"{names[i]} {model.coef_[0][i]:+.2f}" for i in top))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="step", required=True)
    g = sub.add_parser("gather")
    g.add_argument("data", type=Path)
    g.add_argument("--songs", type=int, default=200)
    g.add_argument("--skip", type=int, default=0, help="leave out the first SKIP of those songs")
    g.add_argument("--part", default="0/1", help="I/N: every Nth song from the Ith (parallel runs)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", type=Path, required=True)
    f = sub.add_parser("fit")
    f.add_argument("data", type=Path)
    f.add_argument("ids", type=Path, nargs="+")
    f.add_argument("--c", type=float, default=0.1, help="the logistic regression's inverse regularization")
    f.add_argument("--paired", action="store_true",
                   help="fit within songs: each song's real bars against its continuation, as differences")
    f.add_argument("--best-of", type=int, default=4, help="the candidates a sample is chosen from by default")
    f.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    gather(args) if args.step == "gather" else fit(args)


if __name__ == "__main__":
    main()
