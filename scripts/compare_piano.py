"""The three-model comparison of README "Does relative attention keep the motif?".

The shipped Music Transformer (experiment=piano), the vanilla Transformer (experiment=piano_vanilla) and
the LSTM (experiment=piano_lstm) were trained on the same windows of data/piano for the same 32.8 M tokens.
Each step below writes JSON under outputs/compare, so the steps can run as the trainings finish:

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/compare_piano.py eval music_transformer
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/compare_piano.py eval vanilla
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/compare_piano.py eval lstm
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/compare_piano.py variants   # what else was tried (MT)
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/compare_piano.py motif lstm # only the curve, again
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/compare_piano.py report     # table, curves, rolls, audio

``eval``: NLL on the whole validation and test splits (context 1024, stride 512), continuation health on
16 test seeds (10 s seed, 20 s continued, with and without the grammar guard) and the forgetting curve on
the 16 test seeds with the clearest motifs (`MOTIF`). ``report`` writes the forgetting curves
docs/motif_forgetting.png, the validation curves docs/motif_val_loss.png, the Markdown table
outputs/compare/table.md, and for two motif seeds the three continuations side by side
(docs/motif_seed_K.png, docs/motif/seed_K_<model>.mid and .ogg; the .ogg files need ``pip install soundfile``).
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from musictx.checkpoints.model_store import load_model, read_checkpoint
from musictx.evaluation.compare import plot_val_curves, read_log
from musictx.evaluation.motif import (
    evaluate_motif,
    format_motif_table,
    pick_motif_seeds,
    seed_group,
)
from musictx.evaluation.motif_plots import plot_forgetting_curves
from musictx.evaluation.plots import read_metrics_csv
from musictx.evaluation.run import evaluation_options, format_table, run_evaluation
from musictx.generation.continue_seed import piece_notes, sample_continuations
from musictx.generation.sampling_options import SamplingOptions
from musictx.io.audio import audio_unavailable, read_wav, render_wav
from musictx.io.midi_io import Notes
from musictx.io.midi_write import write_midi
from musictx.io.piano_roll import plot_roll_panels
from musictx.io.token_store import TokenArrays, load_tokenizer

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "piano"
OUT = ROOT / "outputs" / "compare"
DOCS = ROOT / "docs"
RUNS = {"music_transformer": ROOT / "outputs" / "piano" / "train",  # the shipped model's own run
        "vanilla": OUT / "vanilla" / "train", "lstm": OUT / "lstm" / "train"}
CHECKPOINTS = {"music_transformer": "piano", "vanilla": str(RUNS["vanilla"] / "checkpoints" / "last.ckpt"),
               "lstm": str(RUNS["lstm"] / "checkpoints" / "last.ckpt")}
LABELS = {"music_transformer": "Music Transformer", "vanilla": "vanilla Transformer", "lstm": "LSTM"}
CONTINUATION = dict(num_seeds=16, seed_seconds=10, length_seconds=20)
# 16 seeds from 6 of the test split's 8 works: a seed every 10 s of each piece is a candidate, at most 4
# per work (else one work's performances fill the list), and each must have a repeat (score >= 0.2).
MOTIF = dict(num_seeds=16, seed_seconds=10, length_seconds=60, stride_seconds=10, max_per_group=4, min_score=0.2)
REPORT_AT = (10, 30, 60)  # the closing note quotes the windows ending here
ROLL_SECONDS = 30  # listenable evidence: 10 s of seed and 30 s of each model


def evaluate(checkpoint: str, split: str, mode: str, **blocks) -> dict:
    """One `musictx-evaluate` run as a function, with this comparison's settings."""
    cfg = evaluation_options(checkpoint=checkpoint, data={"dir": str(DATA)}, split=split, mode=mode, stride=512,
                            batch_size=16, progress=False, **blocks)
    result = run_evaluation(cfg)
    print(format_table(result), flush=True)
    return result


def eval_model(name: str) -> Path:
    ckpt = CHECKPOINTS[name]
    result = {"val": evaluate(ckpt, "validation", "nll")["nll"]}
    test = evaluate(ckpt, "test", "all", continuation=CONTINUATION)
    result |= {k: test[k] for k in ("model", "params", "global_step", "nll", "continuation")}
    result["continuation_no_guard"] = evaluate(ckpt, "test", "continuation",
                                               continuation={**CONTINUATION, "guard": False})["continuation"]
    result["motif"] = evaluate(ckpt, "test", "motif", motif=MOTIF)["motif"]
    return write(OUT / name / "eval.json", result)


def motif_again(name: str) -> Path:
    """Only the forgetting curve, into an existing eval.json (after a change to the motif measures)."""
    path = OUT / name / "eval.json"
    result = json.loads(path.read_text())
    result["motif"] = evaluate(CHECKPOINTS[name], "test", "motif", motif=MOTIF)["motif"]
    return write(path, result)


def write(path: Path, data: dict, compact: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, default=str, **({"separators": (",", ":")} if compact else {"indent": 1})) + "\n")
    print(f"wrote {path}")
    return path


def variants() -> Path:
    """The Music Transformer's forgetting curve under other settings: cooler sampling, a smaller slide
    (more of the seed kept after the context fills), a 2048-token context at inference (the relative term
    reaches 512 back either way; past that only content attends) and a 20 s seed (the motif heard more
    often; other seeds, so their own ceiling). Settings already in variants.json are not run again."""
    net, tok, _ = load_model("piano")
    long_net = copy.deepcopy(net)
    long_net.max_seq_len = 2048
    runs = {"temperature 0.8": ({"temperature": 0.8}, net),
            "temperature 0.9, top-p 1": ({"temperature": 0.9, "top_p": 1.0}, net),
            "slide 64": ({"slide": 64}, net), "context 2048": ({}, long_net),
            "seed 20 s": ({"seed_seconds": 20}, net)}
    path = OUT / "variants.json"
    out = json.loads(path.read_text()) if path.is_file() else {}
    arrays = TokenArrays(DATA, "test")
    for label, (settings, model) in runs.items():
        if label not in out:
            out[label] = evaluate_motif(model, tok, arrays, evaluation_options(motif={**MOTIF, **settings}).motif)
            print(label, format_motif_table(out[label]), flush=True)
            write(path, out)
    return path


# ----- report -----------------------------------------------------------------------------------------
def budget(name: str) -> dict:
    """Steps, tokens, threads and wall clock of a training run, read from its own folder."""
    run = RUNS[name]
    cfg = OmegaConf.load(run / ".hydra" / "config.yaml")
    ckpt = read_checkpoint(run / "checkpoints" / "last.ckpt")
    start = (run / ".hydra" / "config.yaml").stat().st_mtime
    end = (run / "checkpoints" / "last.ckpt").stat().st_mtime
    speed = read_metrics_csv(run / "csv" / "metrics.csv").get("train/tokens_per_s", ([], []))[1]
    steps = int(ckpt["global_step"])
    return {"steps": steps, "tokens": steps * cfg.data.batch_size * cfg.data.seq_len, "threads": cfg.threads,
            "wall_minutes": (end - start) / 60, "tokens_per_s": float(np.median(speed)) if speed else None}


def window_value(motif: dict, source: str, key: str, end: float) -> float:
    index = [b for _, b in motif["windows"]].index(end)
    return motif["curves"][source][key]["mean"][index]


REUSE = (("motif_reuse", "motif reuse"), ("motif_reuse_rhythm", "+ rhythm"), ("motif_reuse_near", "near (+-1)"))


def reuse_cells(motif: dict, source: str) -> list[str]:
    """'a / b / c': the mean reuse in the windows ending at REPORT_AT seconds, per reuse measure; last, the
    near reuse over all windows (one mean per continuation) with its 95% band: single windows are noisy."""
    cells = [" / ".join(f"{window_value(motif, source, key, t):.3f}" for t in REPORT_AT) for key, _ in REUSE]
    per_sample = np.asarray(motif["curves"][source]["motif_reuse_near"]["values"]).mean(axis=1)  # (n,)
    half = 1.96 * per_sample.std(ddof=1) / np.sqrt(len(per_sample)) if len(per_sample) > 1 else 0.0
    return cells + [f"{per_sample.mean():.3f} ± {half:.3f}"]


def table(results: dict[str, dict], budgets: dict[str, dict]) -> str:
    at = "/".join(str(t) for t in REPORT_AT)
    head = ("| model | params | tokens | threads x wall min | val NLL | test NLL (nats) | bits | notes/s | "
            "duration vs real | density vs real | " + " | ".join(f"{label} {at} s" for _, label in REUSE)
            + " | near, all windows |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, r in results.items():
        b, cont, real = budgets[name], r["continuation"]["continuation"], r["continuation"]["real"]
        lines.append(f"| {LABELS[name]} | {r['params'] / 1e6:.2f} M | {b['tokens'] / 1e6:.1f} M | "
                     f"{b['threads']} x {b['wall_minutes']:.0f} | {r['val']['nll']:.3f} | {r['nll']['nll']:.3f} | "
                     f"{r['nll']['bits_per_token']:.3f} | {cont['notes_per_s']:.1f} | "
                     f"{cont['mean_duration_s'] / real['mean_duration_s']:.2f}x | "
                     f"{cont['notes_per_s'] / real['notes_per_s']:.2f}x | "
                     + " | ".join(reuse_cells(r["motif"], "continuation")) + " |")
    first = next(iter(results))  # the ceiling is the same music for every model; the floor is this model's
    for source, label in (("real", "real continuation (ceiling)"), ("unconditioned", f"unconditioned {LABELS[first]} "
                                                                                      "(floor)")):
        lines.append(f"| {label} |" + " |" * 9 + " " + " | ".join(reuse_cells(results[first]["motif"], source)) + " |")
    return "\n".join(lines)


def variants_table(variants: dict[str, dict], base_seeds: list[str]) -> str:
    """One row per variant; a variant with other seeds than the comparison's gets its own ceiling row."""
    at = "/".join(str(t) for t in REPORT_AT)
    head = ("| Music Transformer, sampling | " + " | ".join(f"{label} {at} s" for _, label in REUSE)
            + " | near, all windows |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for label, res in variants.items():
        lines.append(f"| {label} | " + " | ".join(reuse_cells(res, "continuation")) + " |")
        if res["seeds"] != base_seeds:
            lines.append(f"| {label}: real continuation (ceiling) | " + " | ".join(reuse_cells(res, "real")) + " |")
    return "\n".join(lines)


def side_by_side(k: int, motif_seed, models: dict) -> dict:
    """Seed ``k``'s real continuation and each model's (same sampling seed) as one figure, MIDI and audio."""
    rows = {"real": motif_seed.ids[len(motif_seed.seed.ids):]}
    sampling = SamplingOptions(seed=k)
    for name, (net, tok) in models.items():
        rows[name] = sample_continuations(net, tok, motif_seed.seed, sampling, num_samples=1,
                                          length_seconds=ROLL_SECONDS, max_tokens=16384)[0]
    tok = load_tokenizer(DATA)  # the one vocabulary of the three models and the seed
    end = motif_seed.seed.seconds + ROLL_SECONDS
    notes = {key: clip(piece_notes(tok, motif_seed.seed, new), end) for key, new in rows.items()}
    labels = {"real": "real performance", **LABELS}
    png = plot_roll_panels([(labels[key], n) for key, n in notes.items()], DOCS / f"motif_seed_{k}.png",
                           takeover=motif_seed.seed.seconds,
                           title=f"{motif_seed.name}: {motif_seed.seed.seconds:g} s of seed, then {ROLL_SECONDS} s")
    folder = DOCS / "motif"
    folder.mkdir(exist_ok=True)
    files = [png.name]
    for key, n in notes.items():
        midi = write_midi(n, folder / f"seed_{k}_{key}.mid")
        files += [midi.name] + ([write_ogg(midi).name] if audio_unavailable() is None else [])
    return {"seed": motif_seed.name, "files": files}


def write_ogg(midi: Path, rate: int = 24000) -> Path:
    """``midi`` rendered (musictx.io.audio) to a mono Ogg Vorbis file beside it: ~10x smaller than the WAV,
    small enough for docs/ in git. Needs ``pip install soundfile``."""
    import soundfile

    with tempfile.TemporaryDirectory() as tmp:
        _, audio = read_wav(render_wav(midi, Path(tmp) / "a.wav", sample_rate=rate))
    ogg = midi.with_suffix(".ogg")
    soundfile.write(ogg, audio.mean(axis=1) if audio.ndim == 2 else audio, rate, format="OGG", subtype="VORBIS")
    return ogg


def clip(notes: Notes, end: float) -> Notes:
    keep = notes.start < end
    return Notes(notes.start[keep], np.minimum(notes.end[keep], end), notes.pitch[keep], notes.velocity[keep])


def report() -> None:
    results = {name: json.loads((OUT / name / "eval.json").read_text()) for name in RUNS
               if (OUT / name / "eval.json").is_file()}
    budgets = {name: budget(name) for name in results}
    text = table(results, budgets)
    variants_json = OUT / "variants.json"
    if variants_json.is_file():
        base_seeds = next(iter(results.values()))["motif"]["seeds"]
        text += "\n\n" + variants_table(json.loads(variants_json.read_text()), base_seeds)
    (OUT / "table.md").write_text(text + "\n")
    print(text)
    plot_val_curves([{"log": read_log(RUNS[name] / "csv" / "metrics.csv"), "model": LABELS[name], "nll": r["nll"]}
                     for name, r in results.items()], DOCS / "motif_val_loss.png")
    plot_forgetting_curves([r["motif"] for r in results.values()], DOCS / "motif_forgetting.png",
                           [LABELS[n] for n in results])
    tok = load_tokenizer(DATA)
    cfg = MOTIF
    seeds = pick_motif_seeds(TokenArrays(DATA, "test"), tok, cfg["num_seeds"], cfg["seed_seconds"],
                             cfg["length_seconds"], 4, cfg["min_score"], cfg["stride_seconds"],
                             cfg["max_per_group"])  # the curves' seeds
    models = {name: load_model(CHECKPOINTS[name])[:2] for name in results}
    picked = seeds_to_hear(seeds, next(iter(results.values()))["motif"])
    listen = [side_by_side(k, m, models) for k, m in enumerate(picked)]
    variants = json.loads(variants_json.read_text()) if variants_json.is_file() else {}
    write(DOCS / "motif_compare.json", {  # the sampled ids stay in outputs/compare: megabytes, not for git
        "budgets": budgets, "table": text, "listen": listen,
        "results": {name: {**r, "motif": without_ids(r["motif"])} for name, r in results.items()},
        "variants": {label: without_ids(res) for label, res in variants.items()}}, compact=True)


def seeds_to_hear(seeds: list, motif: dict) -> list:
    """Two seeds, from two works, whose real continuation brings their motif back the most (near reuse over
    all windows): where there is something to keep. Chosen by the music, not by any model's output."""
    assert [m.name for m in seeds] == motif["seeds"], "the report's seeds must be the curves' seeds"
    real = np.asarray(motif["curves"]["real"]["motif_reuse_near"]["values"]).mean(axis=1)  # (n_seeds,)
    order = [seeds[i] for i in np.argsort(-real, kind="stable")]
    return [order[0], next((m for m in order if seed_group(m.name) != seed_group(order[0].name)), order[1])]


def without_ids(motif: dict) -> dict:
    return {key: value for key, value in motif.items() if key != "sample_ids"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("eval", "motif", "variants", "report"))
    parser.add_argument("model", nargs="?", choices=tuple(RUNS))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.step in ("eval", "motif"):
        if args.model is None:
            parser.error(f"{args.step} needs a model")
        (eval_model if args.step == "eval" else motif_again)(args.model)
    elif args.step == "variants":
        variants()
    else:
        report()


if __name__ == "__main__":
    main()
