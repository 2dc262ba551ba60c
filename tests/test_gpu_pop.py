"""The pop-large GPU call (scripts/gpu_pop.sh, issue 51) on CPU at a tiny size, and its pieces: the plain
trainer's minute exports, the $OUT limits of the device tool, the shards' round trip through the import
script (scripts/import_pop_large.py), and the command as docs/gpu.md gives it."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from data_prep.options import prep_options
from data_prep.prepare import write_dataset
from musictx.checkpoints.model_store import load_model, load_model_folder
from musictx.training import plain
from tests.test_pop_versions import _song_folder

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_pop, import_pop_large, eval_pop_large = _script("gpu_pop"), _script("import_pop_large"), _script("eval_pop_large")
ship_window_piano = _script("ship_window_piano")


@pytest.fixture(scope="module")
def pop_arrays(tmp_path_factory) -> Path:
    """A tiny pop_versions=train dataset: 8 synthetic POP909-like songs with versions."""
    root = tmp_path_factory.mktemp("pop")
    for n in range(1, 9):
        _song_folder(root / "POP909", n)
    opts = prep_options(source="folder", input_dir=str(root / "POP909"), output_dir=str(root / "arrays"),
                        tokenizer="remi", num_workers=0, pop_versions="train",
                        split={"validation": 0.2, "test": 0.2, "group_by": "file"})
    return write_dataset(opts, progress=False).out_dir


def test_check_out_names_what_the_device_tool_would_not_bring_back(tmp_path):
    (tmp_path / "model").mkdir()
    for k in range(7):
        (tmp_path / "model" / f"model-{k}.safetensors").write_bytes(b"x")
    (tmp_path / "gpu.log").write_text("ok")
    assert gpu_pop.check_out(tmp_path) == []
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c" / "deep file").write_bytes(b"x" * (17 * 2**20))
    problems = " | ".join(gpu_pop.check_out(tmp_path))
    assert "9 files, more than 8" in problems and "more than 16" in problems
    assert "deeper than 2 folders" in problems and "a name the transfer refuses" in problems


def test_the_default_model_fits_three_shards_and_the_documented_command_fits_the_tool():
    from musictx.checkpoints.model_store import shard_groups
    from musictx.training.options import net_from_options

    opts = plain.PlainTrainOptions(data_dir="", out_dir="")
    assert (opts.n_layers, opts.d_model, opts.seq_len, opts.attn_impl, opts.precision) == (
        8, 512, 2048, "triton", "bf16-mixed")
    with torch.device("meta"):
        net = net_from_options(opts.net_config(456))
    state = {k: torch.empty(v.shape, dtype=torch.float16, device="meta") for k, v in net.state_dict().items()}
    groups = shard_groups(state, int(opts.max_shard_mb * 2**20))
    # gpu.log, report.json, kernels.json, train.json, model/config.json and the shards: at most 8 files
    assert len(groups) <= 3
    doc = (ROOT / "docs" / "gpu.md").read_text()
    call = re.search(r"<!-- gpu-pop-call -->\s*```json\s*(\{.*?\})\s*```", doc, re.S)
    assert call, "docs/gpu.md gives the device tool's call as a JSON block after <!-- gpu-pop-call -->"
    args = json.loads(call.group(1))
    assert len(args["command"]) <= 2000 and args["timeout_s"] <= 600 and len(args["carry"]) <= 8
    assert "scripts/gpu_pop.sh" in args["command"] and "carry" in args["carry"]


def test_the_decisions_back_here():
    def result(val_note, x):
        return {"validation": {"nll_per_note": val_note}, "x_real_time": x}

    assert eval_pop_large.decide(result(5.0, 12.0), result(5.6, 15.0))["default_on_cpu"]
    slow = eval_pop_large.decide(result(5.0, 3.0), result(5.6, 15.0))
    assert slow["ship_as_pop_large"] and not slow["default_on_cpu"]
    assert not eval_pop_large.decide(result(5.7, 30.0), result(5.6, 15.0))["ship_as_pop_large"]


def test_cosine_over_the_time_budget():
    assert plain.cosine_multiplier(1, 0.0, 100, 0.1) == pytest.approx(0.01)
    assert plain.cosine_multiplier(1, 0.05, 100, 0.1) == pytest.approx(0.5 * (0.1 + 0.9 * 0.5 * (1 + math.cos(
        math.pi * 0.05))))  # a slow card: warm after a tenth of the budget at most
    assert plain.cosine_multiplier(100, 0.0, 100, 0.1) == pytest.approx(1.0)
    assert plain.cosine_multiplier(500, 0.5, 100, 0.1) == pytest.approx(0.55)
    assert plain.cosine_multiplier(500, 1.5, 100, 0.1) == pytest.approx(0.1)


def test_with_max_steps_the_cosine_runs_over_the_steps_unless_the_clock_runs_out_first():
    """The paper's comparison: each network the same tokens (``--max-steps``), each with its cosine over them."""
    clock = plain.TrainClock(budget_s=1e9)  # a budget far from over: the steps lead
    clock.t0 = time.monotonic()
    schedule = plain.WallClockCosine(clock, warmup_steps=10, min_ratio=0.1, max_steps=1000)
    assert schedule.progress(500) == pytest.approx(0.5, abs=1e-3) and schedule.progress(1000) == pytest.approx(1.0)
    short = plain.TrainClock(budget_s=10.0)
    short.t0 = time.monotonic() - 8.0  # 80% of the time gone: the clock leads
    assert plain.WallClockCosine(short, 10, 0.1, max_steps=1000).progress(100) == pytest.approx(0.8, abs=0.01)
    assert plain.WallClockCosine(clock, 10, 0.1).progress(10**6) < 1e-3  # no max_steps: the clock alone


def test_plain_training_exports_shards_that_the_import_script_reassembles(pop_arrays, tmp_path, monkeypatch):
    out = tmp_path / "out"
    opts = plain.parse(["--data", str(pop_arrays), "--out", str(out), *gpu_pop.TINY_TRAIN, "--budget-s", "3",
                        "--every-s", "1", "--run-dir", str(tmp_path / "run")])
    assert opts.n_layers == 1 and opts.max_shard_mb == 0.03 and opts.accelerator == "cpu"
    history = plain.train(opts)
    assert len(history) >= 2 and history[-1]["step"] > history[0]["step"]
    assert all(r["val_nll"] > 0 for r in history)
    config = json.loads((out / "model" / "config.json").read_text())
    assert 2 <= len(config["weights_files"]) <= 3
    assert sorted(p.name for p in (out / "model").iterdir()) == sorted(["config.json", *config["weights_files"]])
    assert all((out / "model" / f).stat().st_size <= 0.03 * 2**20 + 4096 for f in config["weights_files"])
    train = json.loads((out / "train.json").read_text())
    assert train["final"] and train["history"] == history and (tmp_path / "run" / "checkpoints" / "last.ckpt").exists()
    # as the GPU run writes it (the H200's did): trained with the fused kernel, which runs on CUDA only
    config["model"]["config"]["attn_impl"] = "triton"
    (out / "model" / "config.json").write_text(json.dumps(config))
    summary = import_pop_large.import_run(out, tmp_path / "back" / "model", pop_arrays)
    assert summary["reloads_equal"] and summary["shards"] == len(config["weights_files"])
    assert summary["cpu_val_nll_windows"] == pytest.approx(history[-1]["val_nll"], rel=0.02)
    assert sorted(p.name for p in (tmp_path / "back" / "model").iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json"]
    net, tok, meta = load_model(str(tmp_path / "back" / "model"))
    sharded, _, _ = load_model_folder(out / "model")
    ids = torch.randint(0, tok.vocab_size, (1, 50))
    assert meta["model"]["config"]["attn_impl"] == "auto"  # triton on CUDA, the efficient kernel here
    sharded.set_attn_impl("efficient")
    assert torch.equal(net(ids), sharded(ids)) and meta["info"]["global_step"] == history[-1]["step"]
    # shipped beside the package, where every command finds it by name, its card beside it
    monkeypatch.setenv("MUSICTX_MODELS", str(tmp_path / "models"))
    where = eval_pop_large.install(tmp_path / "back" / "model")
    assert where == tmp_path / "models" / "pop-large" and (where / "README.md").read_text().startswith("# pop-large")
    named, _, meta = load_model("pop-large")
    assert meta["source"] == "installed" and torch.equal(named(ids), net(ids))


@pytest.mark.slow
def test_the_whole_command_runs_on_cpu_at_a_tiny_size(pop_arrays, tmp_path):
    out = tmp_path / "OUT"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(["bash", "scripts/gpu_pop.sh", "tiny", "--data", str(pop_arrays), "--budget-s", "60"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert set(report["steps"]) == {"tests", "kernels", "train"} and report["out_problems"] == []
    assert all(s["rc"] == 0 and not s["timed_out"] for s in report["steps"].values())
    assert len(report["out_files"]) <= 8 and report["seconds"] < 60 + 15
    rows = {(r["impl"], r["L"]): r for r in json.loads((out / "kernels.json").read_text())["rows"]}
    assert "ms" in rows[("efficient", 256)] and "CUDA" in rows[("triton", 128)]["error"]
    log = (out / "gpu.log").read_text()
    assert "skipped" in log and "[plain] step" in log
    summary = import_pop_large.import_run(out, tmp_path / "back" / "model", pop_arrays)
    assert summary["reloads_equal"]
    assert eval_pop_large.main(["--model", str(tmp_path / "back" / "model"), "--data", str(pop_arrays),
                                "--speed-seconds", "4"]) == 0
    done = json.loads((tmp_path / "back" / "eval.json").read_text())
    assert set(done["results"]) == {"pop-large", "pop"} and set(done["decision"]) == {
        "ship_as_pop_large", "default_on_cpu", "why"}
    assert all(r["validation"]["tokens"] == done["results"]["pop"]["validation"]["tokens"] > 0
               for r in done["results"].values())


BLOCKED = ("hydra", "omegaconf", "mido", "pretty_midi")  # not on the GPU image, and not carried


def test_the_gpu_call_needs_nothing_the_image_lacks_but_the_carried_wheels():
    """What the three steps import, in a Python where the packages the image lacks cannot be found."""
    code = f"""
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Hide())
import musictx.training.plain, bench.attention_gpu, bench.attention_cases
import musictx.models.efficient_attention, musictx.kernels.triton_attention
import musictx.models.attention, musictx.io.tokenizers
from musictx.decoding.sampling import generate
from musictx.decoding.sampling_options import SamplingOptions
sys.path.insert(0, "tests")
import test_cuda
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.strip() == "ok", done.stderr[-3000:]


def test_a_bundle_comes_back_whole_or_says_what_is_wrong(tmp_path):
    from musictx.checkpoints.bundle import BundleError, bundle_names, read_bundle, write_bundle

    src = tmp_path / "run"
    (src / "model").mkdir(parents=True)
    payload = bytes(range(256)) * 600  # 150 KiB: three parts of 64 KiB
    (src / "model" / "weights.bin").write_bytes(payload)
    (src / "train.json").write_text('{"final": true}')
    out = tmp_path / "OUT"
    parts = write_bundle(src, out / "mid", 64 / 1024)
    assert [p.name for p in parts] == ["mid.tar.1-of-3", "mid.tar.2-of-3", "mid.tar.3-of-3"]
    assert all(p.stat().st_size <= 64 * 1024 for p in parts) and bundle_names(out) == ["mid"]
    back = read_bundle(out, "mid", tmp_path / "back")
    assert (back / "model" / "weights.bin").read_bytes() == payload and (back / "train.json").exists()
    # a later export with fewer parts leaves no part of the earlier one behind
    (src / "model" / "weights.bin").write_bytes(payload[:1000])
    assert [p.name for p in write_bundle(src, out / "mid", 64 / 1024)] == ["mid.tar.1-of-1"]
    assert sorted(p.name for p in out.iterdir()) == ["mid.tar.1-of-1"]
    (out / "mid.tar.1-of-1").rename(out / "mid.tar.1-of-2")
    with pytest.raises(BundleError, match="its header says part 1 of 1"):
        read_bundle(out, "mid", tmp_path / "again")
    (out / "mid.tar.1-of-2").write_bytes(b"not a tar" * 100)
    (out / "mid.tar.2-of-2").write_bytes(b"x")
    with pytest.raises(BundleError, match="not a part of a musictx bundle"):
        read_bundle(out, "mid", tmp_path / "again")
    with pytest.raises(BundleError, match="no parts of bundle 'large'"):
        read_bundle(out, "large", tmp_path / "again")
    # more: tests/test_bundle_safety.py (hostile members, mixed and cut sets, the import's output policy)


def test_keep_best_exports_only_an_improvement(pop_arrays, tmp_path, capsys):
    out = tmp_path / "out"
    opts = plain.parse(["--data", str(pop_arrays), "--out", str(out), *gpu_pop.TINY_TRAIN, "--budget-s", "4",
                        "--every-s", "0.5", "--run-dir", str(tmp_path / "run"), "--keep-best", "true",
                        "--bundle", str(tmp_path / "OUT" / "tiny"), "--lr", "0.05"])
    history = plain.train(opts)
    saved = [r for r in history if r["saved"]]
    assert saved[0] is history[0] and len(history) >= 3
    best_so_far = [min(r["val_nll"] for r in history[:i + 1]) for i in range(len(history))]
    assert [r["saved"] for r in history] == [i == 0 or r["val_nll"] < best_so_far[i - 1]
                                             for i, r in enumerate(history)]
    back = import_pop_large.read_bundle(tmp_path / "OUT", "tiny", tmp_path / "back")
    config = json.loads((back / "model" / "config.json").read_text())
    assert config["info"]["global_step"] == saved[-1]["step"]
    assert config["info"]["val_nll"] == min(r["val_nll"] for r in history)
    # the import script reads the trainer's bundle; a second import into the same place replaces nothing
    # without --overwrite, and with it writes the same weights again
    args = [str(tmp_path / "OUT"), "--run", "tiny", "--to", str(tmp_path / "imp" / "model")]
    assert import_pop_large.main(args) == 0
    weights = load_file(tmp_path / "imp" / "model" / "model.safetensors")
    with pytest.raises(SystemExit):
        import_pop_large.main(args)
    assert "pass --overwrite to replace it" in capsys.readouterr().err
    assert import_pop_large.main([*args, "--overwrite"]) == 0
    again = load_file(tmp_path / "imp" / "model" / "model.safetensors")  # (its header's key order may differ)
    assert again.keys() == weights.keys() and all(torch.equal(again[k], weights[k]) for k in weights)


@pytest.mark.slow
def test_runs_side_by_side_come_back_as_bundles_the_import_script_reads(pop_arrays, tmp_path, capsys):
    """Two runs side by side, as window 3's call trains piano and pop with chords (docs/gpu.md): pop_chords on its
    own arrays, packed by gpu_pop_carry.sh --chords and unpacked by gpu_pop.sh, the other run on the common
    folder; each comes back as a bundle that the import script turns into a model of its own vocabulary."""
    chords = tmp_path / "chord_arrays"
    opts = prep_options(source="folder", input_dir=str(pop_arrays.parent / "POP909"), output_dir=str(chords),
                        tokenizer="remi", num_workers=0, split={"validation": 0.2, "test": 0.2, "group_by": "file"})
    opts.tokenizer["chords"] = True  # musictx-prep tokenizer=remi tokenizer.chords=true
    write_dataset(opts, progress=False)
    carry, out = tmp_path / "carry", tmp_path / "OUT"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1",
           "GPU_POP_CARRY": str(carry), "CHORDS_DATA": str(chords)}
    pack = subprocess.run(["bash", "scripts/gpu_pop_carry.sh", "--chords"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert pack.returncode == 0, pack.stderr
    assert [p.name for p in carry.iterdir()] == ["pop_chords.tar.gz"]  # packed only: it travels as one small file
    run = subprocess.run(["bash", "scripts/gpu_pop.sh", "tiny", "--data", f"{pop_arrays},pop_chords={carry}/pop_chords",
                          "--budget-s", "45", "--steps", "train", "--runs", "mid,pop_chords",
                          "--stage", str(tmp_path / "stage"), "--max-steps", "2"],  # the same steps (tokens) for each
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert set(report["steps"]) == {"mid", "pop_chords"} and report["out_problems"] == []
    assert sorted(report["out_files"]) == ["gpu.log", "mid.tar.1-of-1", "pop_chords.tar.1-of-1", "report.json"]
    log = (out / "gpu.log").read_text()
    assert f"unpacked {carry}/pop_chords.tar.gz" in log
    assert f"--data {carry}/pop_chords " in log and f"--data {pop_arrays} " in log  # each run on its own arrays
    assert "[mid] [plain] step 2 " in log and "[pop_chords] [plain] step 2 " in log and "step 3 " not in log
    vocab = {}
    for name, arrays in (("mid", pop_arrays), ("pop_chords", chords)):
        assert import_pop_large.main([str(out), "--run", name, "--to", str(tmp_path / name / "model"),
                                      "--data", str(arrays)]) == 0
        assert (tmp_path / name / "report.json").exists()
        net, tokenizer, _ = load_model_folder(tmp_path / name / "model")
        vocab[name] = (net.vocab_size, tokenizer.vocab_size)
    assert vocab["pop_chords"][0] == vocab["pop_chords"][1] > vocab["mid"][0] == vocab["mid"][1]  # the chord events
    with pytest.raises(SystemExit):
        import_pop_large.main([str(out), "--run", "large", "--to", str(tmp_path / "large" / "model")])
    assert "import_pop_large.py: error: " in (err := capsys.readouterr().err)
    assert "no bundle 'large'; found: mid, pop_chords" in err
    bad = subprocess.run([sys.executable, "scripts/gpu_pop.py", "--out", str(tmp_path / "x"), "--runs", "huge"],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown run(s) huge; known: large, mid, small" in bad.stderr
    again = subprocess.run([sys.executable, "scripts/gpu_pop.py", "--out", str(tmp_path / "x"), "--runs", "mid",
                            "--stage", str(tmp_path / "stage")], cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 2 and "not empty (its runs would be bundled with this call's)" in again.stderr
    assert (tmp_path / "stage" / "mid" / "train.json").exists()  # the earlier call's runs are left as they were


def test_each_run_takes_its_own_arrays_or_the_common_ones():
    both = gpu_pop.data_by_run("carry/piano,pop_chords=carry/pop_chords", ["piano_small", "pop_chords"])
    assert both == {"": "carry/piano", "pop_chords": "carry/pop_chords"}
    assert gpu_pop.data_by_run("carry/pop_large", []) == {"": "carry/pop_large"}
    assert gpu_pop.data_by_run("a=x,b=y", ["a", "b"]) == {"a": "x", "b": "y", "": ""}
    with pytest.raises(ValueError, match="names a run this call does not train"):
        gpu_pop.data_by_run("carry/piano,pop_chord=carry/pop_chords", ["piano_small", "pop_chords"])  # a typo
    with pytest.raises(ValueError, match="no folder for b"):
        gpu_pop.data_by_run("a=x", ["a", "b"])
    with pytest.raises(ValueError, match="given twice"):
        gpu_pop.data_by_run("x,y", ["a"])
    bad = subprocess.run([sys.executable, "scripts/gpu_pop.py", "--out", "/tmp/never", "--runs", "mid",
                          "--data", "mid=x,small=y"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "--data: 'small=y' names a run this call does not train (--runs: mid)" in bad.stderr


def test_a_window_starts_from_the_last_ones_best_weights_and_adds_up(pop_arrays, tmp_path):
    """Lent GPU windows add up (issue 64): a second run started from the first's export (--init-dir) begins with
    its weights (at lr 0 its validation NLL is the first's best), counts its tokens on from the first's, and keeps
    the earlier weights where it does not improve on them; another shape is refused in one line."""
    first, second = tmp_path / "w1", tmp_path / "w2"
    common = [*gpu_pop.TINY_TRAIN, "--budget-s", "2", "--every-s", "1", "--keep-best", "true"]
    one = plain.train(plain.parse(["--data", str(pop_arrays), "--out", str(first), *common,
                                   "--run-dir", str(tmp_path / "r1")]))
    best = min(r["val_nll"] for r in one)
    two = plain.train(plain.parse(["--data", str(pop_arrays), "--out", str(second), *common, "--lr", "0",
                                   "--init-dir", str(first / "model"), "--run-dir", str(tmp_path / "r2")]))
    assert two[0]["val_nll"] == pytest.approx(best, rel=2e-3)  # the first's best weights (fp16 on the way)
    assert two[0]["tokens_seen"] > one[-1]["tokens_seen"] > 0
    before = json.loads((second / "train.json").read_text())["before"]
    info = json.loads((first / "model" / "config.json").read_text())["info"]
    assert (before["tokens_seen"], before["windows"], before["recorded_val_nll"]) == (info["tokens_seen"], 1,
                                                                                       info["val_nll"])
    assert before["val_nll"] == pytest.approx(info["val_nll"], rel=2e-3)  # measured again on its own windows
    assert info["val_nll"] == pytest.approx(best) and info["windows"] == 1
    # a record from other windows (a shipped model's card) is not the bar: the starting weights are measured
    config = json.loads((first / "model" / "config.json").read_text())
    config["info"]["val_nll"] = 0.01  # no export could beat it: keep_best would never save
    (first / "model" / "config.json").write_text(json.dumps(config))
    plain.train(plain.parse(["--data", str(pop_arrays), "--out", str(tmp_path / "w4"), *common, "--lr", "0",
                             "--init-dir", str(first / "model"), "--run-dir", str(tmp_path / "r4")]))
    before = json.loads((tmp_path / "w4" / "train.json").read_text())["before"]
    assert before["recorded_val_nll"] == 0.01 and before["val_nll"] == pytest.approx(best, rel=2e-3)
    with pytest.raises(ValueError, match="is not this run's shape"):
        plain.train(plain.parse(["--data", str(pop_arrays), "--out", str(tmp_path / "w3"), *common, "--d-model", "16",
                                 "--init-dir", str(first / "model"), "--run-dir", str(tmp_path / "r3")]))


@pytest.mark.parametrize("net", ["transformer", "lstm"])
def test_the_papers_baselines_train_the_same_way(pop_arrays, tmp_path, net):
    """The comparison's other two networks (issue 64) through the same trainer, export and record."""
    history = plain.train(plain.parse(["--data", str(pop_arrays), "--out", str(tmp_path / "out"), *gpu_pop.TINY_TRAIN,
                                       "--net", net, "--max-steps", "3", "--run-dir", str(tmp_path / "run")]))
    assert history and history[-1]["step"] == 3 and history[-1]["val_nll"] > 0
    net_back, _, meta = load_model_folder(tmp_path / "out" / "model")
    assert meta["model"]["name"] == net and type(net_back).name == net  # the model store's one identity
    summary = import_pop_large.import_run(tmp_path / "out", tmp_path / "back" / "model", pop_arrays)  # back home
    assert summary["reloads_equal"] and summary["cpu_val_nll_windows"] > 0
