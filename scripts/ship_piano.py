"""Turn the experiment=piano run into the shipped model, measure what its card states, and write the card.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python scripts/ship_piano.py outputs/piano/train/checkpoints/last.ckpt

1. exports the checkpoint to musictx/pretrained/piano (fp16 safetensors + config.json),
2. scores the whole validation and test splits of data/piano (context 1024, stride 512),
3. continuation health on 16 test seeds (10 s seed, 20 s continued), with and without the grammar guard
   and without nucleus truncation (top-p 1),
4. the spot-check NLL the tests compare against (first 1024 tokens of 8 test performances),
5. seconds of music per second of wall time at batch 1 and 4 (the realtime bench's code),
6. piano rolls of the first three test seeds' continuations and the loss curves in docs/,
and writes the figures into the folder's config.json ("info"), outputs/piano/ship.json and the model card
musictx/pretrained/piano/README.md (`scripts/model_card.py`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from bench.realtime import measure, sampling_of
from musictx.checkpoints.export import export
from musictx.checkpoints.model_store import load_model, read_checkpoint
from musictx.evaluation.plots import plot_loss_curves
from musictx.evaluation.run import evaluation_options, format_table, run_evaluation
from musictx.evaluation.spot_check import sample_nll
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.token_store import TokenArrays
from musictx.paths import PRETRAINED_DIR

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "piano"
SHARED = ROOT.parent / "shared" / "data" / "piano"
OUT = ROOT / "outputs" / "piano"
SPOT_FILES = 8


def evaluate(split: str, mode: str, **continuation) -> dict:
    cfg = evaluation_options(checkpoint="piano", data={"dir": str(DATA)}, split=split, mode=mode, stride=512,
                            batch_size=16, progress=False,
                            continuation={"num_seeds": 16, "seed_seconds": 10, "length_seconds": 20, **continuation})
    result = run_evaluation(cfg)
    print(format_table(result), flush=True)
    return result


def test_seed_rolls(test_files: list[str]) -> list[str]:
    """Continuations of the first three test seeds (not picked for beauty) as docs/piano_test_seed_K.png."""
    names = []
    for k, rel in enumerate(test_files[:3]):
        out = OUT / f"test_seed_{k}"
        run(GenerateOptions(seed_midi=str(SHARED / rel), seed_seconds=10, length_seconds=20, num_samples=1,
                            seed=k, audio=False, output_dir=str(out)))
        png = ROOT / "docs" / f"piano_test_seed_{k}.png"
        png.write_bytes((out / "sample_00.png").read_bytes())
        names.append(png.name)
    return names


def main(checkpoint: str) -> None:
    torch.set_num_threads(2)
    ckpt = read_checkpoint(checkpoint)
    folder = export(checkpoint, PRETRAINED_DIR / "piano", dtype="float16")
    figures = {"global_step": ckpt["global_step"], "val": evaluate("validation", "nll")["nll"],
               "test": evaluate("test", "all")}
    figures["test_no_guard"] = evaluate("test", "continuation", hooks={"guard": {"enabled": False},
                                                                         "recall_guidance": {"strength": 0.0}}
                                       )["continuation"]
    # nucleus sampling drops the tail every step; a NOTE_OFF that is never likely enough may never come
    figures["test_top_p_1"] = evaluate("test", "continuation", top_p=1.0)["continuation"]
    test_files = list(TokenArrays(DATA, "test").files)  # paths relative to ../shared/data/piano
    net, tok, _ = load_model("piano")
    spot = test_files[:SPOT_FILES]
    figures["spot_check"] = {"files": spot, "tokens_per_file": 1024,
                             **sample_nll(net, tok, [SHARED / f for f in spot], 1024)}
    # shipped settings; one arm, so each batch's row is the first (it had lost its settings argument)
    figures["realtime"] = [measure([(net, tok, sampling_of([]))], batch, 30.0, repeats=3)[0] for batch in (1, 4)]
    figures["rolls"] = test_seed_rolls(test_files)
    plot_loss_curves(Path(checkpoint).parents[1] / "csv" / "metrics.csv", ROOT / "docs" / "piano_loss.png")
    config = json.loads((folder / "config.json").read_text())
    config["info"].update({"global_step": ckpt["global_step"], "val_nll": figures["val"]["nll"],
                           "test_nll": figures["test"]["nll"]["nll"], "spot_check": figures["spot_check"]})
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (OUT / "ship.json").write_text(json.dumps(figures, indent=2, default=str) + "\n")
    print(json.dumps(figures["spot_check"], indent=2))


if __name__ == "__main__":
    main(sys.argv[1])
