"""The GPU queue's windows on CPU at a tiny size (docs/gpu.md): the options each run gets, a run that starts from
its carried best weights, the piano run at the shipped piano's shape, a window's piano shipped with its record,
the recall curriculum in the trainer's windows, and the next window's call as the tool and the scripts take it.
The pop-large call itself: `tests/test_gpu_pop.py`."""

from __future__ import annotations

import json
import re

import pytest
import torch

from musictx.checkpoints.model_store import load_model, load_model_folder
from musictx.training import plain
from tests.helpers import needs_shared
from tests.test_gpu_pop import ROOT, gpu_pop, ship_window_piano


def test_options_after_a_lone_double_dash_go_to_every_run_as_they_are():
    own, extra = gpu_pop.split_at_dashes(["--runs", "paper_mt", "--", "--lr", "3e-4", "--recall-prob", "0.6"])
    assert own == ["--runs", "paper_mt"] and extra == ["--lr", "3e-4", "--recall-prob", "0.6"]
    assert gpu_pop.split_at_dashes(["--runs", "a"]) == (["--runs", "a"], [])


def test_a_run_starts_from_its_carried_best_weights_only_where_there_are_some(tmp_path):
    (tmp_path / "paper_mt").mkdir()
    (tmp_path / "paper_mt" / "config.json").write_text("{}")
    assert gpu_pop.init_args(str(tmp_path), "paper_mt") == ["--init-dir", str(tmp_path / "paper_mt")]
    assert gpu_pop.init_args(str(tmp_path), "paper_lstm") == [] and gpu_pop.init_args("", "paper_mt") == []
    assert {"paper_mt", "paper_vanilla", "paper_lstm"} <= set(gpu_pop.RUNS)
    shapes = [plain.parse(["--data", "d", "--out", "o", *gpu_pop.RUNS[n]]) for n in ("paper_mt", "paper_vanilla")]
    assert all((o.n_layers, o.d_model, o.n_heads, o.d_ff, o.seq_len) == (6, 512, 8, 1024, 2048) for o in shapes)
    lstm = plain.parse(["--data", "d", "--out", "o", *gpu_pop.RUNS["paper_lstm"]])
    assert (lstm.net, lstm.n_layers, lstm.d_model, lstm.precision) == ("lstm", 3, 512, "32-true")


def test_the_piano_small_run_is_the_shipped_pianos_shape_and_starts_from_its_weights():
    """The run that can become the piano model people get (issue 64) must load the shipped piano's weights as
    they are (windows add up through the model in git) and decode as fast as it does: the same net config."""
    from musictx.models import build_model
    from musictx.paths import PRETRAINED_DIR

    shipped = PRETRAINED_DIR / "piano"
    config = json.loads((shipped / "config.json").read_text())["model"]["config"]
    opts = plain.parse(["--data", "d", "--out", "o", *gpu_pop.RUNS["piano_small"]])
    mine = opts.net_config(config["vocab_size"])
    shape = ("n_layers", "d_model", "n_heads", "d_ff", "max_rel_dist", "max_seq_len")
    assert {k: mine[k] for k in shape} == {k: config[k] for k in shape}
    net = build_model(**mine)
    plain.start_from(net, str(shipped))
    assert torch.equal(net.head.weight, load_model("piano")[0].head.weight.float())  # its weights, loaded


@needs_shared
def test_a_window_piano_ships_with_its_record_and_a_fresh_spot_check(tmp_path):
    """scripts/ship_window_piano.py, into a copy of the shipped folder: the window's weights (here the shipped
    ones with a changed head, as a window's would be), its record in config.json, the card kept, and the spot
    check measured again on the card's files (what tests/test_pretrained.py holds the weights to)."""
    import shutil

    from musictx.checkpoints.model_store import save_model_folder
    from musictx.paths import PRETRAINED_DIR

    net, tok, _ = load_model_folder(PRETRAINED_DIR / "piano")
    with torch.no_grad():
        net.head.weight.mul_(0.8)
    window = save_model_folder(net, tok, tmp_path / "window", dtype="float32",
                               info={"tokens_seen": 123_456, "val_nll": 2.1, "windows": 3})
    shipped = tmp_path / "piano"
    shutil.copytree(PRETRAINED_DIR / "piano", shipped)
    done = ship_window_piano.ship(window, shipped)
    back, _, meta = load_model_folder(shipped)
    assert torch.allclose(back.head.weight, net.head.weight.half().float())  # the window's weights, in fp16
    assert (meta["info"]["tokens_seen"], meta["info"]["windows"]) == (123_456, 3)
    assert meta["info"]["replaced"] == json.loads((PRETRAINED_DIR / "piano" / "config.json").read_text())["info"]
    assert (shipped / "README.md").read_text() == (PRETRAINED_DIR / "piano" / "README.md").read_text()
    spot = meta["info"]["spot_check"]
    assert spot["nll"] == pytest.approx(done["after"]) and abs(done["after"] - done["before"]) > 0.01
    assert spot["files"] == json.loads((PRETRAINED_DIR / "piano" / "config.json").read_text())["info"][
        "spot_check"]["files"]


def _longest_repeat(window) -> int:
    """The longest run of ids in ``window`` (1-D) that also occurs earlier in it, not overlapping itself."""
    ids, best = [int(i) for i in window], 0
    for gap in range(1, len(ids)):
        run = 0
        for a, b in zip(ids, ids[gap:], strict=False):
            run = run + 1 if a == b else 0
            best = max(best, min(run, gap))
    return best


def test_the_recall_curriculum_reaches_the_gpu_trainers_windows(prepared_dir):
    """--recall-prob (issue 64: the piano model people get is fine-tuned for recall on a lent GPU) puts a
    repeat of an earlier passage into the train windows of Performance events: exact where it is neither
    transposed nor re-timed (most of them); the same random notes without it repeat no such passage."""
    def longest_repeats(*extra: str) -> list[int]:
        opts = plain.parse(["--data", str(prepared_dir), "--out", "unused", *gpu_pop.TINY_TRAIN,
                            "--batch-size", "8", *extra])
        dm = plain.build(opts)[0]
        dm.setup("fit")
        windows, _ = next(iter(dm.train_dataloader()))  # (B, T) inputs, (B, T) targets
        return [_longest_repeat(w) for w in windows]
    with_recall = longest_repeats("--recall-prob", "1", "--recall-min-len", "40", "--recall-max-len", "48")
    assert sum(n >= 40 for n in with_recall) >= 4
    assert max(longest_repeats()) < 40


def test_the_next_windows_call_is_one_the_tool_and_the_scripts_take():
    """docs/gpu.md's next window, as the device tool will be given it: within the tool's limits, every run known,
    every run's arrays named, and each carried path one that `gpu_pop_carry.sh --piano --chords` makes."""
    doc = (ROOT / "docs" / "gpu.md").read_text()
    block = re.search(r"<!-- next-window-call -->\s*```json\s*(\{.*?\})\s*```", doc, re.S)
    assert block, "docs/gpu.md gives the next window's call as a JSON block after <!-- next-window-call -->"
    call = json.loads(block.group(1))
    assert len(call["command"]) <= 2000 and call["timeout_s"] <= 600 and len(call["carry"]) <= 8
    words = call["command"].split()
    assert words[:2] == ["bash", "scripts/gpu_pop.sh"]
    own, extra = gpu_pop.split_at_dashes(words[2:])
    value = {k: v for k, v in zip(own, own[1:], strict=False) if k.startswith("--")}
    runs = value["--runs"].split(",")
    assert set(runs) <= set(gpu_pop.RUNS) and float(value["--budget-s"]) + 30 <= call["timeout_s"]
    data = gpu_pop.data_by_run(value["--data"], runs)
    carried = set(call["carry"])
    for run in runs:  # a run's arrays travel: as they are, or packed (gpu_pop.sh unpacks carry/NAME.tar.gz)
        folder = data.get(run, data[""])
        assert folder in carried or f"{folder}.tar.gz" in carried, (run, folder)
    assert "carry/wheels" in carried and f"{value['--init']}/piano_small" in carried
    made = (ROOT / "scripts" / "gpu_pop_carry.sh").read_text()
    assert all(path.split("/")[1].removesuffix(".tar.gz") in made for path in carried)
    plain.parse(["--data", "d", "--out", "o", *extra])  # the options every run gets are plain's own
