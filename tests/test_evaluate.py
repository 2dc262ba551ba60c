"""musictx-evaluate on a real (tiny) checkpoint, and the comparison report built from real results."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from musictx.compare import write_report
from musictx.evaluate import format_table, run_evaluation, write_result
from musictx.model_store import ModelLoadError
from musictx.paths import CONF_DIR
from musictx.token_store import TokenArrays

from .gen_fixtures import fixture_tiny_checkpoint  # noqa: F401  (fixture)


def eval_config(checkpoint, data_dir, **extra):
    cfg = OmegaConf.load(f"{CONF_DIR}/evaluate.yaml")
    cfg.pop("hydra")
    cfg.checkpoint, cfg.data.dir, cfg.output_dir, cfg.progress = str(checkpoint), str(data_dir), "unused", False
    for key, value in extra.items():
        OmegaConf.update(cfg, key, value)
    return cfg


def test_evaluation_scores_every_test_token_and_continues_seeds(tiny_checkpoint, prepared_dir):
    cfg = eval_config(tiny_checkpoint, prepared_dir, mode="all", **{
        "continuation.num_seeds": 2, "continuation.seed_seconds": 1.0, "continuation.length_seconds": 1.0})
    result = run_evaluation(cfg)
    arrays = TokenArrays(prepared_dir, "test")
    assert result["nll"]["tokens"] == arrays.num_tokens - len(arrays)  # every token but each piece's first
    assert 0 < result["nll"]["nll"] < 7 and result["nll"]["ppl"] > 1
    cont = result["continuation"]
    assert len(cont["pieces"]) == 2
    assert cont["real"]["pitch_class_tv_vs_real"] == 0.0
    for row in ("continuation", "unconditioned"):
        assert 0 <= cont[row]["pitch_class_tv_vs_seed"] <= 1
    table = format_table(result)
    assert "NLL (nats/token)" in table and "real continuation (ceiling)" in table


def test_evaluation_rejects_bad_input(tiny_checkpoint, prepared_dir, tmp_path):
    with pytest.raises(ModelLoadError, match="nope.ckpt: no such file, model folder or shipped model name"):
        run_evaluation(eval_config(tmp_path / "nope.ckpt", prepared_dir))
    with pytest.raises(ValueError, match="mode must be"):
        run_evaluation(eval_config(tiny_checkpoint, prepared_dir, mode="everything"))


def test_compare_report_from_real_results(tiny_checkpoint, prepared_dir, tmp_path):
    result = run_evaluation(eval_config(tiny_checkpoint, prepared_dir))
    for name in ("0_a", "1_b"):
        run_dir = tmp_path / name
        write_result(result, run_dir)
        (run_dir / "csv").mkdir()
        (run_dir / "csv" / "metrics.csv").write_text(
            "epoch,step,train/tokens_per_s,val/loss\n0,10,100.0,\n0,10,,5.5\n0,20,300.0,\n0,20,,4.5\n")
    write_report(tmp_path)
    table = (tmp_path / "compare.md").read_text()
    assert table.count("MusicTransformer") == 2 and "| 4.5000 |" in table
    assert (tmp_path / "val_loss.png").read_bytes()[:4] == b"\x89PNG"


def test_console_script_writes_metrics(tiny_checkpoint, prepared_dir, tmp_path):
    cmd = [sys.executable, "-m", "musictx.evaluate", f"checkpoint={tiny_checkpoint}", f"data.dir={prepared_dir}",
           "split=validation", f"output_dir={tmp_path}", f"hydra.run.dir={tmp_path}", "progress=false"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["split"] == "validation" and metrics["nll"]["tokens"] > 0
    assert "bits/token" in run.stdout
