"""musictx-evaluate on a real (tiny) checkpoint, and the comparison report built from real results."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from musictx.checkpoints.model_store import read_checkpoint
from musictx.evaluation.compare import write_report
from musictx.evaluation.run import (
    EvaluateError,
    EvaluateOptions,
    evaluation_options,
    format_table,
    run_evaluation,
    write_result,
)
from musictx.io.token_store import TokenArrays

from .gen_fixtures import fixture_tiny_checkpoint  # noqa: F401  (fixture)


def eval_config(checkpoint, data_dir, **extra):
    """evaluate.yaml's options with ``extra`` set, dotted keys (``continuation.num_seeds``) into their group."""
    overrides = {"checkpoint": str(checkpoint), "data": {"dir": str(data_dir)}, "progress": False}
    for key, value in extra.items():
        group, _, name = key.rpartition(".")
        if group:
            overrides.setdefault(group, {})[name] = value
        else:
            overrides[key] = value
    return evaluation_options(**overrides)


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
    with pytest.raises(EvaluateError, match="checkpoint=.*nope.ckpt: no such file, model folder or shipped model name"):
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
    cmd = [sys.executable, "-m", "musictx.commands.evaluate", f"checkpoint={tiny_checkpoint}",
           f"data.dir={prepared_dir}",
           "split=validation", f"output_dir={tmp_path}", f"hydra.run.dir={tmp_path}", "progress=false"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["split"] == "validation" and metrics["nll"]["tokens"] > 0
    assert "bits/token" in run.stdout


# ----- bad options and damaged checkpoints: one clear line, no metrics.json -----------------------------
def test_unknown_keys_are_refused_before_any_work(tiny_checkpoint, prepared_dir):
    for key in ("strid", "continuation.num_seed", "data.dirr"):
        with pytest.raises(EvaluateError, match=rf"unknown option\(s\) \['{key}'\]"):
            eval_config(tiny_checkpoint, prepared_dir, **{key: 1})
    values = {**vars(eval_config(tiny_checkpoint, prepared_dir)), "strid": 1}
    with pytest.raises(EvaluateError, match=r"unknown option\(s\) \['strid'\]"):
        EvaluateOptions.from_mapping(values)
    cfg = eval_config(tiny_checkpoint, prepared_dir, mode="token_continuation")
    cfg.continuation["temperature"] = float("nan")
    with pytest.raises(EvaluateError, match="continuation.temperature must be a finite number"):
        run_evaluation(cfg)


def test_metrics_json_is_strict_json_even_with_nan(tmp_path, capsys):
    path = write_result({"model": "x", "nll": {"nll": float("nan"), "tokens": 3}}, tmp_path)

    def refuse(word):
        raise ValueError(word)

    assert json.loads(path.read_text(), parse_constant=refuse)["nll"] == {"nll": None, "tokens": 3}
    assert "nll.nll" in capsys.readouterr().out


def _damaged(kind: str, tiny_checkpoint, tmp_path) -> str:
    import torch

    path = tmp_path / f"{kind}.ckpt"
    if kind == "truncated":
        data = tiny_checkpoint.read_bytes()
        path.write_bytes(data[: len(data) // 3])
    else:
        ckpt = read_checkpoint(tiny_checkpoint)
        next(v for k, v in ckpt["state_dict"].items() if k.startswith("net."))[0] = float("nan")
        torch.save(ckpt, path)
    return str(path)


@pytest.mark.parametrize(("case", "message"), [
    pytest.param("typo", r"unknown option\(s\) \['stirde'\]", marks=pytest.mark.slow),
    ("truncated", r"truncated\.ckpt: not a usable musictx checkpoint"),
    pytest.param("nan", r"nan\.ckpt: parameter net\.\S+ holds \d+ non-finite value", marks=pytest.mark.slow),
])
def test_console_script_refuses_with_one_line(case, message, tiny_checkpoint, prepared_dir, tmp_path):
    extra = ["+stirde=4"] if case == "typo" else []
    checkpoint = tiny_checkpoint if case == "typo" else _damaged(case, tiny_checkpoint, tmp_path)
    cmd = [sys.executable, "-m", "musictx.commands.evaluate", f"checkpoint={checkpoint}", f"data.dir={prepared_dir}",
           f"output_dir={tmp_path / 'out'}", f"hydra.run.dir={tmp_path / 'out'}", "progress=false", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("musictx-evaluate: error: ") and re.search(message, last), last
    assert not (tmp_path / "out" / "metrics.json").exists()


@pytest.mark.slow  # 6-24 s of real processes; in `make test-all` (the fast suite stays under 10 min)
def test_a_model_that_is_not_there_is_refused_naming_the_option(prepared_dir, tmp_path):
    """``checkpoint=pian``: one line naming ``checkpoint=``, as musictx-generate says it (it said "pian: no such
    file, ..." without the option)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    lines = {}
    for module, args in (("evaluate", [f"data.dir={prepared_dir}", f"output_dir={tmp_path / 'out'}"]),
                         ("generate", [f"output_dir={tmp_path / 'gen'}"])):
        done = subprocess.run([sys.executable, "-m", f"musictx.commands.{module}", "checkpoint=pian", *args],
                              capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
        [lines[module]] = done.stderr.strip().splitlines()
    assert lines["evaluate"].startswith("musictx-evaluate: error: checkpoint=pian: no such file, model folder or "
                                        "shipped model name (shipped: piano"), lines
    assert lines["evaluate"].split(": error: ")[1] == lines["generate"].split(": error: ")[1], lines
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_a_context_longer_than_the_model_takes_is_refused_before_scoring(tiny_checkpoint, prepared_dir):
    limit = read_checkpoint(tiny_checkpoint)["musictx"]["model"]["config"]["max_seq_len"]
    with pytest.raises(EvaluateError, match=rf"context={4 * limit}: the model takes at most {limit} tokens"):
        run_evaluation(eval_config(tiny_checkpoint, prepared_dir, mode="nll", context=4 * limit))


def test_a_stride_longer_than_the_context_and_a_data_dir_that_is_not_one_are_refused_naming_the_option(
        tiny_checkpoint, prepared_dir):
    with pytest.raises(EvaluateError, match=r"stride=16: more than the 8 tokens of each window's context "
                                            r"\(context=8\); give stride=8 or less"):
        run_evaluation(eval_config(tiny_checkpoint, prepared_dir, mode="nll", context=8, stride=16))
    # before any model is loaded: the folder's name, not "<folder>/tokenizer.json: missing"
    with pytest.raises(EvaluateError, match=r"data\.dir=.*manifest\.json: a file, not a folder"):
        run_evaluation(eval_config(tiny_checkpoint, prepared_dir / "manifest.json"))
    with pytest.raises(EvaluateError, match=r"data\.dir=.*nowhere: no such folder"):
        run_evaluation(eval_config(tiny_checkpoint, prepared_dir / "nowhere"))


@pytest.mark.parametrize(("value", "said"), [(0, "0"), (-1, "-1")])
def test_two_sample_max_songs_of_zero_or_less_is_refused_not_read_as_every_song(value, said, tiny_checkpoint,
                                                                                 prepared_dir):
    """0 had read every song of the split (0 taken as no limit), -1 every song but the last."""
    with pytest.raises(EvaluateError, match=rf"two_sample\.max_songs must be a whole number from 1 .* got {said}$"):
        run_evaluation(eval_config(tiny_checkpoint, prepared_dir, mode="two_sample", **{"two_sample.max_songs": value}))
    with pytest.raises(EvaluateError, match=r"two_sample\.seed_from must be a number of seconds from 0"):
        run_evaluation(eval_config(tiny_checkpoint, prepared_dir, mode="two_sample", **{"two_sample.seed_from": -5}))


def test_the_compare_report_by_hand_names_what_is_wrong_with_the_folder(tiny_checkpoint, prepared_dir, tmp_path,
                                                                         capsys):
    from musictx.commands.compare import main

    def refusal(*argv) -> str:
        with pytest.raises(SystemExit) as stop:
            main([str(a) for a in argv])
        assert stop.value.code == 1
        return capsys.readouterr().err.strip().splitlines()[-1]

    assert refusal(tmp_path / "nope").endswith("nope: no such folder (give the folder of a musictx-train -m "
                                               "experiment=compare sweep)")
    assert "no run folder in it holds a metrics.json" in refusal(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "metrics.json").write_text("{bad")
    assert re.search(r"a/metrics\.json: not a metrics\.json of musictx-evaluate \(Expecting", refusal(tmp_path))
    (tmp_path / "a" / "metrics.json").write_text(json.dumps({"model": "x", "recall": {}}))
    assert refusal(tmp_path).endswith("a/metrics.json: no mode=nll result; the report needs each run evaluated "
                                      "with evaluate.mode=nll or all")
    write_result(run_evaluation(eval_config(tiny_checkpoint, prepared_dir)), tmp_path / "a")
    main([str(tmp_path)])
    first = (tmp_path / "compare.md").read_text()
    assert "MusicTransformer" in first
    # the sweep's own report, written again: refused without --overwrite, which the refusal names
    assert "pass --overwrite to replace it" in refusal(tmp_path)
    main([str(tmp_path), "--overwrite"])
    assert (tmp_path / "compare.md").read_text() == first


def test_nll_max_songs_scores_the_first_songs_and_says_how_much_of_the_split(tiny_checkpoint, prepared_dir, tmp_path):
    """mode=nll always scored the whole split (minutes on a real test split); nll.max_songs limits it like the other
    modes' max_songs, and the table says in one line how much of the split its figure covers."""
    import shutil

    data = shutil.copytree(prepared_dir, tmp_path / "data")
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["splits"]["test"]["notes"] = 1000  # the whole split's notes: no figure for part of it
    (data / "manifest.json").write_text(json.dumps(manifest))
    arrays = TokenArrays(data, "test")
    whole = run_evaluation(eval_config(tiny_checkpoint, data, mode="nll"))["nll"]
    assert whole["songs"] == whole["songs_in_split"] == len(arrays) >= 2 and "nll_per_note" in whole
    assert "nll.max_songs" not in format_table(run_evaluation(eval_config(tiny_checkpoint, data, mode="nll")))
    result = run_evaluation(eval_config(tiny_checkpoint, data, mode="nll", **{"nll.max_songs": 1}))
    part = result["nll"]
    assert part["tokens"] == int(arrays.lengths[0]) - 1 and part["tokens_in_split"] == whole["tokens"]
    assert part["songs"] == 1 and part["songs_in_split"] == len(arrays) and "nll_per_note" not in part
    line = format_table(result).splitlines()[-1]
    assert line.startswith(f"nll.max_songs=1: NLL {part['nll']:.4f} nats/token over {part['tokens']:,} tokens, "
                           f"the first 1 of the {len(arrays)} songs of the test split"), line
    # more songs than the split has: the whole split, said as such (no line)
    assert run_evaluation(eval_config(tiny_checkpoint, data, mode="nll", **{"nll.max_songs": 99}))["nll"] == whole
    for value in (0, -1, 1.5):
        with pytest.raises(EvaluateError, match=rf"nll\.max_songs must be a whole number from 1 .* got {value}$"):
            run_evaluation(eval_config(tiny_checkpoint, data, mode="nll", **{"nll.max_songs": value}))
    from musictx.evaluation.compare import evaluated_on

    assert evaluated_on(result).endswith(f"[test, first 1 of {len(arrays)} songs]")
    assert evaluated_on({**result, "nll": whole}).endswith("[test]")


def test_console_script_takes_nll_max_songs(tiny_checkpoint, prepared_dir, tmp_path):
    cmd = [sys.executable, "-m", "musictx.commands.evaluate", f"checkpoint={tiny_checkpoint}",
           f"data.dir={prepared_dir}", "mode=nll", "nll.max_songs=1", f"output_dir={tmp_path}", "progress=false"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["nll"]["songs"] == 1 and metrics["nll"]["songs_in_split"] > 1
    assert f"over {metrics['nll']['tokens']:,} tokens, the first 1 of the" in run.stdout
