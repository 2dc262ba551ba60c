"""Ship the recall fine-tune as `piano` (README "Results: recall"; docs/recall.md), measuring what its card states.

    OMP_WAIT_POLICY=PASSIVE python scripts/ship_recall.py outputs/arms/piano_finetune_bursty/checkpoints/last.ckpt

The run: the previous `piano` weights fine-tuned 1,200 steps on experiment=piano_recall_bursty's windows.
This exports it (fp16) to musictx/pretrained/piano, scores the whole validation and test splits of
data/piano (context 1024, stride 512) and the spot check the tests compare against (first 1024 tokens of
the same 8 test performances as before), runs the recall measurement on the test split, and writes the
figures into config.json ("info") and outputs/piano/ship_recall.json. The card's text is edited by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from musictx.checkpoints.export import export
from musictx.checkpoints.model_store import load_model, read_checkpoint
from musictx.evaluation.run import evaluation_options, run_evaluation
from musictx.evaluation.spot_check import sample_nll
from musictx.paths import PRETRAINED_DIR

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "piano"
SHARED = ROOT.parent / "shared" / "data" / "piano"


def main(checkpoint: str) -> None:
    torch.set_num_threads(2)
    folder = PRETRAINED_DIR / "piano"
    old = json.loads((folder / "config.json").read_text())["info"]
    step = read_checkpoint(checkpoint)["global_step"]
    export(checkpoint, folder, dtype="float16",
           info={"fine_tuned_from": {"global_step": old["global_step"], "test_nll_as_trained": old["test_nll"]},
                 "recipe": "experiment=piano_recall_bursty init_from=piano model.net.max_rel_dist=512 "
                           "schedule.lr=5e-4 schedule.warmup_steps=100 trainer.max_steps=1200"})
    figures = {"fine_tune_steps": step}
    for split, mode in (("validation", "nll"), ("test", "nll"), ("test", "recall")):
        cfg = evaluation_options(checkpoint="piano", data={"dir": str(DATA)}, split=split, mode=mode, stride=512,
                                batch_size=16, progress=False)
        figures[f"{split}_{mode}"] = run_evaluation(cfg)[mode]
    net, tok, _ = load_model("piano")
    spot = old["spot_check"]["files"]
    figures["spot_check"] = {"files": spot, "tokens_per_file": 1024,
                             **sample_nll(net, tok, [SHARED / f for f in spot], 1024)}
    config = json.loads((folder / "config.json").read_text())
    config["info"].update({"val_nll": figures["validation_nll"]["nll"], "test_nll": figures["test_nll"]["nll"],
                           "spot_check": figures["spot_check"]})
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    out = ROOT / "outputs" / "piano"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ship_recall.json").write_text(json.dumps(figures, indent=2, default=str) + "\n")
    print(json.dumps({k: figures[k] for k in ("validation_nll", "test_nll", "spot_check")}, indent=1, default=str))


if __name__ == "__main__":
    main(sys.argv[1])
