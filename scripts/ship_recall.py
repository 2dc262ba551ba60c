"""Measure a recall fine-tune and ship it as `piano` (how the shipped piano weights were made).

    OMP_WAIT_POLICY=PASSIVE python scripts/ship_recall.py measure outputs/arms/G_long/checkpoints/last.ckpt
    OMP_WAIT_POLICY=PASSIVE python scripts/ship_recall.py ship outputs/arms/G_long/checkpoints/last.ckpt \\
        --recipe "experiment=piano_recall_bursty init_from=piano ..."

``measure`` scores the checkpoint on the whole validation and test splits of data/piano (context 1024,
stride 512) and runs the recall measurement on the test split: outputs/piano/<run>.measure.json, the
figures the shipping rule compares (test NLL no worse than the previous `piano`'s + 0.02, copy gain
clearly higher). ``ship`` exports it (fp16) to musictx/pretrained/piano with those figures and the spot
check the tests compare against (first 1024 tokens of the same 8 test performances, on the exported
weights) in config.json's "info". The card's text is edited by hand.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from musictx.checkpoints.export import export
from musictx.checkpoints.model_store import load_model, read_checkpoint
from musictx.evaluation.recall import format_recall_table
from musictx.evaluation.run import evaluation_options, run_evaluation
from musictx.evaluation.spot_check import sample_nll
from musictx.paths import PRETRAINED_DIR

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "piano"
SHARED = ROOT.parent / "shared" / "data" / "piano"
OUT = ROOT / "outputs" / "piano"


def measure_path(checkpoint: str) -> Path:
    return OUT / f"{Path(checkpoint).parents[1].name}.measure.json"


def measure(checkpoint: str) -> dict:
    figures = {"checkpoint": checkpoint, "global_step": read_checkpoint(checkpoint)["global_step"]}
    for split, mode in (("validation", "nll"), ("test", "nll"), ("test", "recall")):
        opts = evaluation_options(checkpoint=checkpoint, data={"dir": str(DATA)}, split=split, mode=mode, stride=512,
                                  batch_size=16, progress=False)
        figures[f"{split}_{mode}"] = run_evaluation(opts)[mode]
    OUT.mkdir(parents=True, exist_ok=True)
    measure_path(checkpoint).write_text(json.dumps(figures, indent=1, default=str) + "\n")
    print(f"step {figures['global_step']}: validation NLL {figures['validation_nll']['nll']:.4f}, test NLL "
          f"{figures['test_nll']['nll']:.4f}\n{format_recall_table(figures['test_recall'])}")
    return figures


def ship(checkpoint: str, recipe: str) -> None:
    figures = json.loads(measure_path(checkpoint).read_text())
    folder = PRETRAINED_DIR / "piano"
    old = json.loads((folder / "config.json").read_text())["info"]
    lineage = {"global_step": old["global_step"], "test_nll": old["test_nll"], "recipe": old.get("recipe"),
               "fine_tuned_from": old.get("fine_tuned_from")}
    export(checkpoint, folder, dtype="float16", info={"fine_tuned_from": lineage, "recipe": recipe})
    net, tok, _ = load_model("piano")
    spot = old["spot_check"]["files"]
    spot_check = {"files": spot, "tokens_per_file": 1024, **sample_nll(net, tok, [SHARED / f for f in spot], 1024)}
    config = json.loads((folder / "config.json").read_text())
    config["info"].update({"val_nll": figures["validation_nll"]["nll"], "test_nll": figures["test_nll"]["nll"],
                           "spot_check": spot_check})
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(json.dumps({"val_nll": config["info"]["val_nll"], "test_nll": config["info"]["test_nll"],
                      "spot_check": spot_check}, indent=1, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("measure", "ship"))
    parser.add_argument("checkpoint")
    parser.add_argument("--recipe", help="ship: the training command, for config.json")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))  # 1 beside a training run
    if args.step == "measure":
        measure(args.checkpoint)
    else:
        ship(args.checkpoint, args.recipe)


if __name__ == "__main__":
    main()
