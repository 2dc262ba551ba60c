"""Turn a pop run into a shipped model (pop, or pop_infill: the one that fills bars), measure what its card
states, and write the card.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/ship_pop.py outputs/pop_recall/train/checkpoints/last.ckpt \
        --recipe "3000 steps of experiment=pop, then 300 steps of its recall fine-tune (experiment=pop_recall)"
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/ship_pop.py --name pop_infill CHECKPOINT --recipe "..."

1. exports the checkpoint to musictx/pretrained/pop (fp16 safetensors, config.json, MidiTok's tokenizer.json);
2. scores the validation and test splits of data/pop: NLL per token and per note;
3. the continuation scorecard on the held-out test songs (10 s seed from 25 s, 30 s new, 2 samples, the
   shipped settings) for the pop model and, on the same songs, the piano model ("musictx before");
4. writes outputs/pop/ship.json and the model card musictx/pretrained/pop/README.md.

``--name pop_infill`` does the same on data/pop_infill (the infill tokens), with the infill scorecard in
place of the piano model's continuation (`infill_card`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from musictx.checkpoints.export import export
from musictx.checkpoints.model_store import load_model, load_model_folder, save_model_folder
from musictx.evaluation.plots import read_metrics_csv
from musictx.evaluation.run import evaluation_options, format_table, run_evaluation
from musictx.evaluation.scorecard import MEASURES, format_scorecard
from musictx.evaluation.spot_check import sample_nll
from musictx.evaluation.task_scorecard import format_task_scorecard
from musictx.io.token_store import TokenArrays, load_manifest
from musictx.paths import PRETRAINED_DIR

ROOT = Path(__file__).resolve().parents[1]
NAME = "pop"  # the model shipped; main() sets it from --name, with the three paths below
DATA = ROOT / "data" / "pop"
OUT = ROOT / "outputs" / "pop"
FOLDER = PRETRAINED_DIR / "pop"
POP909 = ROOT.parent / "shared" / "data" / "pop" / "POP909"
SPOT_FILES = 4  # test songs whose first 1024 tokens fingerprint the weights (tests/test_pretrained_pop.py)


def evaluate(checkpoint: str, split: str, mode: str, **scorecard) -> dict:
    data = DATA if checkpoint == NAME else ROOT / "data" / "pop"  # another model: its own tokens
    cfg = evaluation_options(checkpoint=checkpoint, data={"dir": str(data)}, split=split, mode=mode, stride=512,
                             batch_size=16, progress=False, scorecard=scorecard, infill=scorecard)
    result = run_evaluation(cfg)
    print(format_table(result), flush=True)
    return result


def card(ship: dict) -> str:
    nll_v, nll_t = ship["validation"]["nll"], ship["test"]["nll"]
    pop, piano = ship["scorecard_pop"]["scorecard"]["means"], ship["scorecard_piano"]["scorecard"]["means"]
    manifest = load_manifest(ship.get("train_data", DATA))
    rows = []
    for key, label, _ in MEASURES:
        if key in pop["model"]:
            chance = pop["chance"].get(key)
            rows.append(f"| {label} | **{pop['model'][key]:.3f}** | {piano['model'].get(key, float('nan')):.3f} | "
                        f"{pop['real'][key]:.3f} | {'-' if chance is None else f'{chance:.3f}'} |")
    train = manifest["splits"]["train"]
    return "\n".join([
        "# pop: a metrical, multi-track Music Transformer for pop songs",
        "",
        f"A Music Transformer (relative attention; {ship['params']:,} parameters, "
        f"{ship['model']['config']['n_layers']} layers x {ship['model']['config']['d_model']}) trained on "
        f"{ship.get('trained_on', 'CPU')} on POP909 songs ({train['files']} training files, "
        f"{train['seconds'] / 3600:.1f} h, "
        f"{train['tokens']:,} tokens) in REMI tokens (MidiTok: bars, positions, explicit durations, one "
        f"Program per track: MELODY, BRIDGE and PIANO kept apart). Trained with {ship['recipe']}. "
        "The tokenizer is in config.json and, as MidiTok's own file, in tokenizer.json.",
        "",
        "Load it: `net, tokenizer = musictx.checkpoints.model_store.load_pretrained(\"pop\")`; "
        "`musictx-generate seed_midi=song.mid` picks it for a metrical seed.",
        "",
        "| split | NLL (nats/token) | NLL (nats/note) | tokens |",
        "|---|---|---|---|",
        f"| validation | {nll_v['nll']:.3f} | {nll_v['nll_per_note']:.3f} | {nll_v['tokens']:,} |",
        f"| test (held out) | {nll_t['nll']:.3f} | {nll_t['nll_per_note']:.3f} | {nll_t['tokens']:,} |",
        "",
        f"Continuation scorecard on the {len(ship['scorecard_pop']['scorecard']['songs'])} held-out test songs "
        "(10 s seed from 25 s, cut at bar lines; 30 s new; 2 samples; shipped settings), beside "
        f"{ship.get('baseline_desc', 'the piano model')} on the same seeds, the real continuation and chance:",
        "",
        f"| measure (mean) | pop | {ship.get('baseline_name', 'piano (before)')} | real continuation | chance |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "Data: POP909 (Wang, Chen et al., ISMIR 2020), MIT licence. Songs 801-909 were never here; of 001-800, "
        "the test split above was never trained on or used for a decision.",
    ]) + "\n"


def infill_card(ship: dict) -> str:
    """The pop_infill card: NLL, the infill scorecard and the continuation scorecard beside pop's."""
    nll_v, nll_t = ship["validation"]["nll"], ship["test"]["nll"]
    infill, cont = ship["scorecard_infill"]["task_scorecard"], ship["scorecard_pop"]["scorecard"]["means"]
    base = ship["scorecard_piano"]["scorecard"]["means"]  # pop itself, on the same seeds
    rows = [f"| {label} | **{cont['model'][k]:.3f}** | {base['model'].get(k, float('nan')):.3f} | "
            f"{cont['real'][k]:.3f} |" for k, label, _ in MEASURES if k in cont["model"]]
    return "\n".join([
        "# pop_infill: the pop model taught to fill bars",
        "",
        f"The shipped `pop` Music Transformer ({ship['params']:,} parameters) fine-tuned on POP909 in the infill "
        f"format: {ship['recipe']}. Its vocabulary is pop's REMI with three ids appended "
        "(Infill_Start, Infill_End, Fill).",
        "",
        "Load it: `load_pretrained(\"pop_infill\")`; `musictx-generate task=infill seed_midi=song.mid bars=9-12` "
        "picks it. Accompaniment and continuation use `pop` by default.",
        "",
        "| split | NLL (nats/token) | NLL (nats/note) |", "|---|---|---|",
        f"| validation | {nll_v['nll']:.3f} | {nll_v['nll_per_note']:.3f} |",
        f"| test (held out) | {nll_t['nll']:.3f} | {nll_t['nll_per_note']:.3f} |",
        "", f"Infill scorecard on the {len(infill['songs'])} held-out test songs:", "",
        format_task_scorecard(infill),
        "", "Continuation scorecard on the same test songs (10 s seed from 25 s, 30 s new, 2 samples), beside `pop`:",
        "", "| measure (mean) | pop_infill | pop | real continuation |", "|---|---|---|---|", *rows,
        "", "Data: POP909 (Wang, Chen et al., ISMIR 2020), MIT licence; the test split was never trained on.",
    ]) + "\n"


def spot_check() -> dict:
    """NLL of the first 1024 tokens of a few test songs: the figure a test checks installed weights against."""
    net, tok, _ = load_model(NAME)
    spot = list(TokenArrays(DATA, "test").files)[:SPOT_FILES]  # relative to POP909/
    return {"files": spot, "tokens_per_file": 1024, **sample_nll(net, tok, [POP909 / f for f in spot], 1024)}


def main() -> None:
    global NAME, DATA, OUT, FOLDER
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", default=str(OUT / "train" / "checkpoints" / "last.ckpt"))
    parser.add_argument("--name", choices=("pop", "pop_infill"), default="pop", help="the model to ship")
    parser.add_argument("--max-songs", type=int, default=None, help="a quick look; the card is made on all")
    parser.add_argument("--recipe", default="experiment=pop", help="how the checkpoint was trained, for the card")
    parser.add_argument("--trained-on", default="CPU", help="the machine, for the card (e.g. 'an NVIDIA H100')")
    parser.add_argument("--train-data", default=None, help="the arrays it was trained on, for the card's figures "
                        "(default data/NAME; e.g. data/pop_large: the train split with POP909's other arrangements)")
    parser.add_argument("--baseline-name", default="piano (before)", help="the comparison's column in the card")
    parser.add_argument("--baseline-desc", default="the piano model", help="the comparison, in the card's words")
    parser.add_argument("--baseline", default=None, help="metrics.json of the comparison model's test scorecard "
                        "(musictx-evaluate mode=continuation, the same settings), instead of running it again")
    args = parser.parse_args()
    NAME, DATA, OUT, FOLDER = (args.name, ROOT / "data" / args.name, ROOT / "outputs" / args.name,
                               PRETRAINED_DIR / args.name)
    max_songs = args.max_songs
    train_data = Path(args.train_data) if args.train_data else DATA
    info = {"data": f"POP909 001-800, {train_data.name} train split", "recipe": args.recipe}
    if Path(args.checkpoint).is_dir():  # a model folder (a GPU run's, imported by scripts/import_pop_large.py)
        net, tok, meta = load_model_folder(args.checkpoint)
        save_model_folder(net, tok, FOLDER, "float16", info={**meta.get("info", {}), **info,
                                                               "source_checkpoint": args.checkpoint})
    else:
        export(args.checkpoint, str(FOLDER), dtype="float16", info=info)
    ship = {"validation": evaluate(NAME, "validation", "nll"), "test": evaluate(NAME, "test", "nll")}
    ship["scorecard_pop"] = evaluate(NAME, "test", "continuation", max_songs=max_songs)
    ship["scorecard_piano"] = (json.loads(Path(args.baseline).read_text()) if args.baseline else
                               evaluate("piano" if NAME == "pop" else "pop", "test", "continuation",
                                        max_songs=max_songs))
    if NAME == "pop_infill":
        ship["scorecard_infill"] = evaluate(NAME, "test", "infill", max_songs=max_songs)
    ship.update(recipe=args.recipe, checkpoint=args.checkpoint, trained_on=args.trained_on, train_data=str(train_data),
                baseline_name=args.baseline_name, baseline_desc=args.baseline_desc)
    ship.update(params=ship["test"]["params"], global_step=ship["test"]["global_step"],
                model=json.loads((FOLDER / "config.json").read_text())["model"])
    ship["spot_check"] = spot_check()
    config = json.loads((FOLDER / "config.json").read_text())
    config["info"].update({"val_nll": ship["validation"]["nll"]["nll"], "test_nll": ship["test"]["nll"]["nll"],
                           "spot_check": ship["spot_check"]})
    (FOLDER / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    metrics = OUT / "train" / "csv" / "metrics.csv"
    if metrics.exists():
        ship["val_curve"] = read_metrics_csv(metrics).get("val/loss", ([], []))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "ship.json").write_text(json.dumps(ship, indent=2, default=str))
    (FOLDER / "README.md").write_text(card(ship) if NAME == "pop" else infill_card(ship))
    print(format_scorecard(ship["scorecard_pop"]["scorecard"]))
    print(f"wrote {FOLDER} and {OUT / 'ship.json'}")


if __name__ == "__main__":
    main()
