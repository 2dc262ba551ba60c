"""Ship a piano model trained in a lent GPU window (issue 64's "piano model people get") in the package, in the
session that ran the window (carry/ does not outlive its machine; docs/gpu.md):

    python scripts/import_pop_large.py <files_at> --run piano_small --to carry/paper_w3/piano_small/model \
        --data carry/piano
    # ... measured against the shipped piano on validation first (docs/gpu.md, "The next window") ...
    python scripts/ship_window_piano.py carry/paper_w3/piano_small/model [--to musictx/pretrained/piano]

1. writes the model folder in fp16 over the shipped one (its config.json keeps the window's record: tokens
   seen, validation NLL, windows, where it came from, and the record of the model it replaced),
2. measures the card's spot check again on the same files (the first 1,024 tokens of each), which
   `tests/test_pretrained.py` holds the installed weights to,
3. keeps the card (README.md) and prints what in it now describes the weights before: its figures are the
   session's to rewrite from what it measured.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from musictx.checkpoints.model_store import load_model_folder, save_model_folder
from musictx.evaluation.spot_check import sample_nll
from musictx.paths import PRETRAINED_DIR

SHARED_PIANO = Path(__file__).resolve().parents[2] / "shared" / "data" / "piano"


def ship(model: Path, to: Path, data: Path = SHARED_PIANO) -> dict:
    """The window's ``model`` folder as ``to`` (a shipped model folder, its card kept); the new spot check."""
    replaced = json.loads((to / "config.json").read_text())["info"]
    old = replaced["spot_check"]
    net, tok, meta = load_model_folder(model)
    net = net.half().float()  # the weights as the shipped fp16 file holds them: the spot check is of those
    spot = sample_nll(net, tok, [data / f for f in old["files"]], old["tokens_per_file"])
    info = {**meta["info"], "source_folder": str(model),
            "spot_check": {"files": old["files"], "tokens_per_file": old["tokens_per_file"], **spot},
            "replaced": replaced}  # the shipped model's record before (a piano_small window starts from it)
    card = (to / "README.md").read_text()
    with tempfile.TemporaryDirectory() as tmp:  # written whole before the shipped folder is touched
        staged = save_model_folder(net, tok, Path(tmp) / "model", dtype="float16", info=info)
        (staged / "README.md").write_text(card)
        shutil.rmtree(to)
        shutil.copytree(staged, to, copy_function=shutil.copyfile)  # the usual permissions, not the staging dir's
    return {"before": old["nll"], "after": spot["nll"], "tokens": spot["tokens"], "info": info}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/ship_window_piano.py", description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path, help="the window's model folder, imported (scripts/import_pop_large.py)")
    p.add_argument("--to", type=Path, default=PRETRAINED_DIR / "piano", help="the shipped folder it replaces")
    p.add_argument("--data", type=Path, default=SHARED_PIANO, help="where the card's spot-check files are")
    args = p.parse_args(argv)
    done = ship(args.model, args.to, args.data)
    print(f"shipped {args.model} as {args.to}: spot-check NLL {done['before']:.4f} -> {done['after']:.4f} a token "
          f"({done['tokens']} tokens); tokens seen {done['info'].get('tokens_seen')}, validation NLL "
          f"{done['info'].get('val_nll')}")
    print(f"now rewrite {args.to / 'README.md'}: its figures (NLL, scorecard, speed, training) describe the weights "
          "before")
    return 0


if __name__ == "__main__":
    sys.exit(main())
