"""Best of K by a critic: can choosing among a few continuations the one that sounds most like a song close the
two-sample test's gap (issue 65)? A study, outside the package; docs/two-sample-2026-11.md has its figures.

``gather`` continues each song of a split K times (one batch, the shipped settings, the two-sample test's seed and
length) and writes every sample's listening features (`musictx.listening.listen_features`), the real next 30 s's
and the 30 s after (the real-vs-real control) to a JSON file:

    python scripts/rerank_study.py gather data/pop --split train --songs 200 --samples 1 --out outputs/rr_train.json
    python scripts/rerank_study.py gather data/pop --split validation --samples 4 --out outputs/rr_val.json

``test`` fits a critic (logistic regression on the features without the annotated chords, standardized) on one
file's first sample against its real excerpts (the train split's songs), picks in the other file each song's
sample the critic finds most real, and runs the two-sample test (`musictx.evaluation.two_sample`) on the picks, on
the first sample (no choice) and on a random pick:

    python scripts/rerank_study.py test outputs/rr_train.json outputs/rr_val.json [--against written] [--k 4]
        [--hold-out mel_,rhy_]

``--against written``: the real music as the tokenizer writes it (the two-sample test's headline), for the critic's
fit and the test.

``--hold-out`` leaves feature families out of the critic (never out of the test): whether choosing by some tells
closes the others too, or only those it was fit on.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pretty_midi
import yaml

from musictx.checkpoints.model_store import load_pretrained
from musictx.decoding import SamplingOptions
from musictx.evaluation.run import split_songs
from musictx.evaluation.scorecard import continue_metrical, real_music
from musictx.evaluation.two_sample import CVSettings, two_sample_test
from musictx.evaluation.two_sample_run import ANNOTATED, on_velocity_grid, one_file_per_song
from musictx.listening.listen_features import SongContext, excerpt_features

SEED_S, FROM_S, LENGTH_S = 10.0, 25.0, 30.0  # the two-sample test's defaults (evaluate.yaml)


def song_rows(net, tok, path: Path, samples: int, sampling: SamplingOptions) -> dict | None:
    """Every sample's features and the two real excerpts' for one song; None when it is too short."""
    pm = pretty_midi.PrettyMIDI(str(path))
    if pm.get_end_time() < FROM_S + SEED_S + 2 * LENGTH_S:
        return None
    opts = {"seed_seconds": SEED_S, "seed_from": FROM_S, "length_seconds": LENGTH_S, "num_samples": samples}
    cont = continue_metrical(net, tok, path, opts, sampling)
    t0 = cont.seed_end
    if pm.get_end_time() < t0 + 2 * LENGTH_S:
        return None
    real, song = real_music(pm, tok), SongContext.read(path, pm)
    real.velocity = on_velocity_grid(tok, real.velocity)
    seed_span = real.window(cont.seed_start, t0)
    written = cont.written  # the song as the tokenizer writes it (the two-sample test's headline real music)
    return {"song": str(path),
            "generated": [excerpt_features(s, t0, t0 + LENGTH_S, song, seed_span) for s in cont.samples],
            "real": excerpt_features(real, t0, t0 + LENGTH_S, song, seed_span),
            "real_after": excerpt_features(real, t0 + LENGTH_S, t0 + 2 * LENGTH_S, song, seed_span),
            "written": excerpt_features(written, t0, t0 + LENGTH_S, song, written.window(cont.seed_start, t0))}


def gather(args: argparse.Namespace) -> None:
    import torch
    from tqdm import tqdm

    torch.set_num_threads(1)
    net, tok = load_pretrained("pop")
    net.eval()
    paths = one_file_per_song(split_songs(args.data, args.split))[: args.songs]
    rows = []
    for k, path in enumerate(tqdm(paths, desc=f"{args.split} x {args.samples}")):
        sampling = SamplingOptions.from_mapping({**args.set, "seed": args.seed + k})
        row = song_rows(net, tok, path, args.samples, sampling)
        if row:
            rows.append(row)
    args.out.write_text(json.dumps(rows))
    print(f"{len(rows)} songs of {len(paths)} -> {args.out}")


def matrix(dicts: list[dict], names: list[str]) -> np.ndarray:
    return np.nan_to_num(np.array([[d[n] for n in names] for d in dicts], dtype=float))


def critic(train: list[dict], names: list[str], kind: str = "logistic", c: float = 0.1, against: str = "real"):
    """Real (1) against every sample (0): logistic regression on standardized features, or gradient boosting."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    fake = [g for r in train for g in r["generated"]]
    X = np.vstack([matrix(fake, names), matrix([r[against] for r in train], names)])
    y = np.r_[np.zeros(len(fake)), np.ones(len(train))]
    if kind == "boosting":
        return HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, class_weight="balanced").fit(X, y)
    return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=4000, class_weight="balanced")).fit(X, y)


def test(args: argparse.Namespace) -> None:
    train = json.loads(args.train.read_text())
    val = json.loads(args.val[0].read_text())
    for more in args.val[1:]:  # the same songs' further samples (gather --seed)
        for row, extra in zip(val, json.loads(more.read_text()), strict=True):
            assert row["song"] == extra["song"], (row["song"], extra["song"])
            row["generated"] += extra["generated"]
    names = [n for n in val[0]["real"] if not n.startswith(ANNOTATED)]
    held = tuple(p for p in args.hold_out.split(",") if p)
    fit_on = [n for n in names if not n.startswith(held)] if held else names
    model = critic(train, fit_on, args.critic, args.c, args.against)
    k = args.k or len(val[0]["generated"])
    val = [{**r, "generated": r["generated"][:k]} for r in val]
    scores = [model.predict_proba(matrix(r["generated"], fit_on))[:, 1] for r in val]  # (K,) P(real) per song
    rng = np.random.default_rng(0)
    arms = {"first sample (no choice)": [0] * len(val), "a random sample": list(rng.integers(0, k, len(val))),
            f"the critic's pick of {k}": [int(np.argmax(s)) for s in scores]}
    settings = CVSettings(5, 5, 0, 12, 0)  # the two-sample test's folds and repeats; no null
    real = matrix([r[args.against] for r in val], names)
    print(f"critic fit on {len(train)} songs, {len(fit_on)} features (held out: {held or 'none'}); "
          f"tested on {len(val)} songs x {k} samples, {len(names)} features")
    for arm, picks in arms.items():
        gen = matrix([r["generated"][p] for r, p in zip(val, picks, strict=True)], names)
        result = two_sample_test(gen, real, np.arange(len(val)), names, settings, with_null=False)
        aucs = " / ".join(f"{c['auc']:.3f}" for c in result["classifiers"].values())
        tells = ", ".join(f"{t['feature']} {t['mean_a']:.3g} ({t['mean_b']:.3g})" for t in result["tells"][:8])
        print(f"{arm}: AUC {' / '.join(result['classifiers'])} {aucs}; tells, generated (real): {tells}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="step", required=True)
    g = sub.add_parser("gather")
    g.add_argument("data", type=Path)
    g.add_argument("--split", default="validation")
    g.add_argument("--songs", type=int, default=None)
    g.add_argument("--samples", type=int, default=4)
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--seed", type=int, default=0, help="song k is continued with random seed SEED + k")
    g.add_argument("--set", type=lambda t: dict(yaml.safe_load(t)), default={},
                   help="sampling options other than the shipped ones, as YAML, e.g. '{top_p: null}'")
    t = sub.add_parser("test")
    t.add_argument("train", type=Path)
    t.add_argument("val", type=Path, nargs="+", help="the songs to choose for; more files: more samples of them")
    t.add_argument("--against", default="real", choices=("real", "written"),
                   help="the real music: the song as it is, or as the tokenizer writes it (the two-sample headline)")
    t.add_argument("--critic", default="logistic", choices=("logistic", "boosting"))
    t.add_argument("--c", type=float, default=0.1, help="the logistic critic's inverse regularization")
    t.add_argument("--k", type=int, default=None, help="choose among each song's first K samples (default: all)")
    t.add_argument("--hold-out", default="", help="feature name prefixes left out of the critic, comma-separated")
    args = p.parse_args()
    gather(args) if args.step == "gather" else test(args)


if __name__ == "__main__":
    main()
