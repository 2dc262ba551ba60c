"""A classifier two-sample test: can a classifier tell sample A (e.g. generated continuations) from sample B
(the real ones) by the features of `musictx.listening.listen_features`? (``musictx-evaluate mode=two_sample``;
the excerpts are gathered by `musictx.evaluation.two_sample_run`.)

Two classifiers: a linear one (standardized logistic regression) and a tree ensemble (gradient boosting),
each cross-validated with folds grouped by song (StratifiedGroupKFold: a song's excerpts are never on both
sides of a split), repeated with reshuffled folds; the AUC is that of the pooled out-of-fold scores,
averaged over repeats. 0.5: the samples cannot be told apart by these features; 1.0: always.

The AUC's null: the same cross-validation with the labels shuffled within each song (a song's two excerpts
swap sides or not at random), its mean and 95th percentile over ``permutations`` shuffles. The features that
separate best are ranked by their own AUC (direction-free, |AUC - 0.5|), with each sample's mean.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from musictx.listed import counted

CLASSIFIERS = ("logistic", "boosting")


@dataclass(frozen=True)
class CVSettings:
    folds: int = 5
    repeats: int = 5
    permutations: int = 50
    top: int = 12
    seed: int = 0


def make_classifier(name: str, seed: int):
    """A fresh scikit-learn pipeline: missing features filled with the training folds' median first."""
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    impute = SimpleImputer(strategy="median", keep_empty_features=True)
    if name == "logistic":
        return make_pipeline(impute, StandardScaler(), LogisticRegression(C=1.0, max_iter=5000))
    if name == "boosting":
        return make_pipeline(impute, GradientBoostingClassifier(n_estimators=100, max_depth=2, learning_rate=0.1,
                                                                subsample=0.8, random_state=seed))
    raise ValueError(f"classifier must be one of {CLASSIFIERS}, got {name!r}")


def cv_auc(X: np.ndarray, y: np.ndarray, groups: np.ndarray, name: str, folds: int, seed: int) -> float:
    """The AUC of one cross-validation's pooled out-of-fold scores, folds grouped by ``groups``."""
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedGroupKFold

    n_folds = min(folds, len(np.unique(groups)))
    split = StratifiedGroupKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    scores = np.zeros(len(y))
    for train, test in split.split(X, y, groups):
        model = make_classifier(name, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a constant feature in a fold, a slow LR convergence
            model.fit(X[train], y[train])
        scores[test] = model.predict_proba(X[test])[:, 1]
    return float(roc_auc_score(y, scores))


def shuffled_within(y: np.ndarray, groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The labels permuted inside each group: every song keeps its excerpts, which side each is on is chance."""
    out = y.copy()
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        out[idx] = y[rng.permutation(idx)]
    return out


def feature_auc(x: np.ndarray, y: np.ndarray) -> float:
    """One feature's AUC for telling label 1 from label 0 (0.5 where it is constant; missing values left out)."""
    from sklearn.metrics import roc_auc_score

    ok = np.isfinite(x)
    if len(np.unique(y[ok])) < 2 or np.ptp(x[ok]) == 0:
        return 0.5
    return float(roc_auc_score(y[ok], x[ok]))


def tells(X: np.ndarray, y: np.ndarray, names: list[str], top: int) -> list[dict]:
    """The ``top`` features that tell the samples apart best by themselves, with each sample's mean."""
    rows = []
    for j, name in enumerate(names):
        auc = feature_auc(X[:, j], y)
        rows.append({"feature": name, "auc": auc, "separation": abs(auc - 0.5) + 0.5,
                     "mean_a": _nanmean(X[y == 1, j]), "mean_b": _nanmean(X[y == 0, j])})
    return sorted(rows, key=lambda r: -r["separation"])[:top]


def _nanmean(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(x.mean()) if len(x) else float("nan")


def two_sample_test(a: np.ndarray, b: np.ndarray, groups: np.ndarray, names: list[str], settings: CVSettings,
                    with_null: bool = True) -> dict:
    """Sample ``a`` (rows: excerpts, columns: ``names``) against ``b``, row i of each from song ``groups[i]``:
    each classifier's AUC (mean and per repeat), its within-song label-shuffle null, and the top tells."""
    X = np.vstack([a, b]).astype(float)  # (2N, F)
    y = np.concatenate([np.ones(len(a), int), np.zeros(len(b), int)])
    g = np.concatenate([groups, groups])
    out = {"n_a": len(a), "n_b": len(b), "groups": int(len(np.unique(g))), "classifiers": {}}
    rng = np.random.default_rng(settings.seed)
    for name in CLASSIFIERS:
        runs = [cv_auc(X, y, g, name, settings.folds, settings.seed + r) for r in range(settings.repeats)]
        row = {"auc": float(np.mean(runs)), "auc_repeats": runs}
        if with_null and settings.permutations:
            null = [cv_auc(X, shuffled_within(y, g, rng), g, name, settings.folds, settings.seed + 1000 + k)
                    for k in range(settings.permutations)]
            row.update({"null_mean": float(np.mean(null)), "null_p95": float(np.percentile(null, 95)),
                        "p_value": float((1 + np.sum(np.asarray(null) >= row["auc"])) / (1 + len(null)))})
        out["classifiers"][name] = row
    ranked = tells(X, y, names, len(names))
    out["tells"], out["feature_auc"] = ranked[: settings.top], {t["feature"]: t["auc"] for t in ranked}
    return out


def format_two_sample(result: dict) -> str:
    """The AUC table (model vs real, null, real vs real; the headline without the annotated-chord features,
    then with them where they were measured) and the top tells with both samples' means."""
    main, control = result["generated_vs_real"], result.get("real_vs_real")
    length = result["settings"]["length_seconds"]  # the control's excerpts are as long as the continuations
    asked = result["settings"]["folds"]
    folds = min(asked, main["groups"])  # as cv_auc runs it: a fold needs a song of its own
    songs = counted(main["groups"], "song")
    folds_text = f"{folds}-fold" if folds == asked else f"{folds}-fold ({asked} asked, {songs})"
    lines = [f"two-sample test: {songs}, {result['settings']['seed_seconds']:g} s seed from "
             f"{result['settings']['seed_from']:g} s, {length:g} s new, one sample "
             f"per song; {len(result['features'])} features; {folds_text} CV grouped by "
             f"song x {result['settings']['repeats']} repeats",
             "| features | classifier | AUC generated vs real | null mean (labels shuffled within song) | "
             f"null 95th pct | AUC real vs real (next {length:g} s vs the {length:g} s after) |",
             "|---|---|---|---|---|---|"]
    blocks = [("without the annotated chords (headline)", result)]
    # measured with the annotated-chord features, none of which any song had: the headline's test again, noise
    unannotated = "with_annotated_chords" in result and result.get("annotated_songs") == 0
    if "with_annotated_chords" in result and not unannotated:
        blocks.append(("all, the annotated chords too", result["with_annotated_chords"]))
    for label, block in blocks:
        for name in CLASSIFIERS:
            m = block["generated_vs_real"]["classifiers"][name]
            c = block["real_vs_real"]["classifiers"][name]["auc"] if block.get("real_vs_real") else float("nan")
            lines.append(f"| {label} | {name} | {m['auc']:.3f} | {m.get('null_mean', float('nan')):.3f} | "
                         f"{m.get('null_p95', float('nan')):.3f} | {c:.3f} |")
    if "as_is" in result:  # a metrical model: the song as it is, beside the song as its tokenizer writes it
        block = result["as_is"]
        for name in CLASSIFIERS:
            m, c = (block[k]["classifiers"][name]["auc"] for k in ("generated_vs_real", "real_vs_real"))
            lines.append(f"| the song as it is, not through the tokenizer | {name} | {m:.3f} | - | - | {c:.3f} |")
        for name in CLASSIFIERS:
            w = block["written_vs_as_is"]["classifiers"][name]["auc"]
            lines.append(f"| the song through the tokenizer vs as it is (the grid alone) | {name} | {w:.3f} | - | - "
                         "| - |")
    if unannotated:
        lines.append("(no song here has annotated chords, a chord_midi.txt beside it: no test with them)")
    control_auc = (control or {}).get("feature_auc", {})
    lines += ["", "| feature (top tells) | AUC alone | generated mean | real mean | real-vs-real AUC alone |",
              "|---|---|---|---|---|"]
    for t in main["tells"]:
        rr = control_auc.get(t["feature"], float("nan"))
        lines.append(f"| {t['feature']} | {t['auc']:.3f} | {_fmt(t['mean_a'])} | {_fmt(t['mean_b'])} | {rr:.3f} |")
    return "\n".join(lines)


def _fmt(x: float) -> str:
    return "-" if not np.isfinite(x) else (f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}")
