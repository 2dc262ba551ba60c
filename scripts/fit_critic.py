"""The pop model's critic (`musictx.listening.critic`): what `best_of` chooses by. A maintainer's fit, outside
the package; docs/generation.md ("Best of K") has its figures.

``gather`` continues the first SONGS of the train split once each with the shipped settings and no choice
(``best_of=1``; the two-sample test's seed and length: 10 s from 25 s, 30 s new) and writes each song's new ids:

    python scripts/fit_critic.py gather data/pop --songs 200 --part 0/2 --out outputs/critic_ids_0.json

``--candidates K`` keeps all K candidates of a song as the choice draws them (the last ones replay the seed's
last bars: ``hooks.phrase_return.replays``), so that the critic learns the candidates it will choose among:

    python scripts/fit_critic.py gather data/pop --songs 240 --candidates 2 --part 0/2 --out outputs/critic_rp_0.json

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
    from musictx.tasks import bars_for, metrical_seed
    from musictx.tasks.continue_metrical import bars_prompt, strip_after_bars
    from musictx.tasks.prompt import sample

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
        k = args.candidates  # one sample's candidates, as `best_of` draws them, every one kept (1: a plain draw)
        made = sample(net, bars_prompt(net, tok, seed, sampling, num_samples=k, bars=bars, candidates=k))
        for j, row in enumerate(made[:, len(seed.ids):].cpu().numpy()):
            rows.append({"song": str(path), "bars": bars, "candidate": j,
                         "new_ids": strip_after_bars(tok, row, bars).tolist()})
    args.out.write_text(json.dumps(rows))
    print(f"{len(rows)} continuations -> {args.out}")


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
    fake, real, seen = [], [], set()
    for row in tqdm(rows, desc="features"):
        seed = metrical_seed(tok, row["song"], SEED_S, FROM_S)
        bars = row["bars"]
        fake.append(candidate_features(tok, seed, np.asarray(row["new_ids"]), bars))
        song = Path(row["song"]).resolve()
        if song not in seen:  # a song's own bars once, however many continuations of it (gathers may overlap)
            seen.add(song)
            real.append(candidate_features(tok, seed, seed.bars_after(tok.bar_id, bars), bars))
    names = sorted(n for n in fake[0] if not n.startswith(ANNOTATED))  # no chord file beside a continuation
    X = np.nan_to_num(np.array([[d[n] for n in names] for d in fake + real], dtype=float))
    y = np.r_[np.zeros(len(fake)), np.ones(len(real))]
    scaler = StandardScaler().fit(X)
    Z = scaler.transform(X)
    # balanced: a song's own bars weigh as much as all its continuations together
    model = LogisticRegression(C=args.c, max_iter=4000, class_weight="balanced").fit(Z, y)
    accuracy = float(model.score(Z, y))
    critic = Critic(tuple(names), scaler.mean_, np.where(scaler.scale_ > 0, scaler.scale_, 1.0), model.coef_[0],
                    float(model.intercept_[0]), args.best_of,
                    {"songs": len(real), "continuations": len(fake), "split": "train", "c": args.c, "seed_s": SEED_S,
                     "from_s": FROM_S, "length_s": LENGTH_S, "train_accuracy": accuracy})
    critic.save(args.out)
    top = np.argsort(-np.abs(model.coef_[0]))[:12]
    print(f"{len(real)} songs, {len(fake)} continuations, {len(names)} features, train accuracy {accuracy:.3f} -> "
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
    g.add_argument("--candidates", type=int, default=1,
                   help="keep all K candidates of a song as best_of=K draws them (the last ones replay)")
    g.add_argument("--out", type=Path, required=True)
    f = sub.add_parser("fit")
    f.add_argument("data", type=Path)
    f.add_argument("ids", type=Path, nargs="+")
    f.add_argument("--c", type=float, default=0.1, help="the logistic regression's inverse regularization")
    f.add_argument("--best-of", type=int, default=4, help="the candidates a sample is chosen from by default")
    f.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    gather(args) if args.step == "gather" else fit(args)


if __name__ == "__main__":
    main()
