"""What ``musictx-generate`` tells its user: the length asked for is met (the token cap is sized from it) or
the shortfall is said in one line, long runs print their progress, Ctrl-C keeps the samples so far, and a
typo'd option is one line naming the nearest one."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from musictx.checkpoints.model_store import read_checkpoint
from musictx.decoding.hook import OnStep
from musictx.decoding.sampling import generate
from musictx.decoding.sampling_options import SamplingOptions
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.tokenizer import EventTokenizer

from .gen_fixtures import fixture_tiny_checkpoint, tiny_net  # noqa: F401  (fixture)

TOK = EventTokenizer()
LAY = TOK.layout
PROG = "musictx-generate"
# The endless model's draws: middle C on and off, and 50 ms TIME_SHIFTs; no EOS.
ENDLESS = {60: 0.4, LAY.note_off + 60: 0.4, LAY.time_shift + 4: 0.2}


@pytest.fixture(name="endless_checkpoint", scope="module")
def fixture_endless_checkpoint(tiny_checkpoint, tmp_path_factory) -> Path:
    """The tiny checkpoint made to ignore its input and draw from `ENDLESS` at every step: it never ends a
    piece, and writes 60-100 ids per second of music (more than 2048 ids for a minute)."""
    ckpt = read_checkpoint(tiny_checkpoint)
    state = ckpt["state_dict"]
    state["net.ln_f.weight"].zero_()  # the final norm's output is its bias, whatever the input
    state["net.ln_f.bias"].zero_()[0] = 1.0
    head = state["net.head.weight"]  # (V, d_model): the logits are its first column
    head.zero_()[:, 0] = -30.0
    for i, p in ENDLESS.items():
        head[i, 0] = math.log(p)
    path = tmp_path_factory.mktemp("endless") / "endless.ckpt"
    torch.save(ckpt, path)
    return path


def options(checkpoint, out: Path, **kwargs) -> GenerateOptions:
    base = dict(checkpoint=str(checkpoint), output_dir=str(out), num_samples=1, seed=5, audio=False)
    return GenerateOptions(**{**base, **kwargs})


# ----- length --------------------------------------------------------------------------------------------
def test_the_length_asked_for_is_met_when_max_tokens_is_unset(endless_checkpoint, tmp_path):
    record = run(options(endless_checkpoint, tmp_path, length_seconds=60))
    (sample,) = record["samples"]
    assert sample["stop"] == "length_seconds" and sample["new_seconds"] >= 60, sample
    assert sample["new_tokens"] > 2048, "a minute of this model needs more ids than the old fixed cap"
    notes = TOK.read(tmp_path / sample["midi"])
    assert notes.start.max() > 55 and len(notes) == sample["notes"]


def test_a_sample_cut_short_by_max_tokens_says_so_in_one_line(endless_checkpoint, tmp_path, capsys):
    record = run(options(endless_checkpoint, tmp_path, length_seconds=600, max_tokens=300, num_samples=2))
    lines = capsys.readouterr().out.splitlines()
    for sample in record["samples"]:
        assert sample["stop"] == "max_tokens" and sample["new_tokens"] == 300
        line = (f"{tmp_path / sample['midi']}: only {sample['new_seconds']:.1f} s of the 600 s asked for: stopped at "
                f"max_tokens=300 ({sample['notes']} notes); raise max_tokens for more")
        assert line in lines, lines


# ----- progress ------------------------------------------------------------------------------------------
def test_generate_reports_every_step_to_its_hooks():
    net = tiny_net("music_transformer")
    steps = []
    prompt = torch.tensor([[60, LAY.time_shift + 9]] * 2)
    hook = OnStep(lambda nxt, done: steps.append((nxt.clone(), done.clone())))
    ids = generate(net, None, prompt, SamplingOptions(), [hook], max_new_tokens=20)
    assert len(steps) == 20 and all(done.shape == (2,) and not done.any() for _, done in steps)
    assert torch.equal(torch.stack([nxt for nxt, _ in steps], dim=1), ids[:, 2:])


def progress_lines(out: str) -> list[str]:
    """The states of the tqdm bar in ``out``: it redraws its line after a carriage return."""
    return [part.strip() for part in re.split(r"[\r\n]", out) if part.strip().startswith("generating: ")]


def test_long_runs_show_their_progress_in_a_bar(endless_checkpoint, tmp_path, capsys):
    run(options(endless_checkpoint, tmp_path, length_seconds=30, progress_every_s=0.05, num_samples=2))
    progress = progress_lines(capsys.readouterr().out)
    assert len(progress) > 2, "the bar was not redrawn"
    seconds = [float(line.split()[1]) for line in progress]
    assert seconds == sorted(seconds) and 0 < seconds[-1] <= 30  # the length rule stops a sample before 30 s
    assert all(" of 30 s " in line and " of 2 samples done]" in line for line in progress[1:]), progress
    assert progress[-1].endswith("2 of 2 samples done]"), progress  # its last state: every sample written


# ----- the console script --------------------------------------------------------------------------------
def command(*args: str) -> list[str]:
    exe = Path(sys.executable).parent / PROG
    return [*([str(exe)] if exe.exists() else [sys.executable, "-m", "musictx.commands.generate"]), *args]


ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def test_ctrl_c_writes_the_samples_so_far_and_says_so(endless_checkpoint, tmp_path):
    run_dir = tmp_path / "run"
    cmd = command(f"checkpoint={endless_checkpoint}", "length_seconds=1200", "num_samples=2", "audio=false",
                  "progress_every_s=0.2", f"hydra.run.dir={run_dir}")
    # A runner started in the background hands its children SIGINT ignored: give the run a terminal's Ctrl-C.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen, deadline = "", time.monotonic() + 120
    while time.monotonic() < deadline and not progress_lines(seen)[1:]:  # the bar moved once
        chunk = proc.stdout.read(1)  # the bar's line ends in a carriage return, not a newline
        if not chunk:
            break  # the run ended
        seen += chunk
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        rest = proc.communicate(timeout=120)[0].splitlines()
    finally:
        proc.kill()
    assert progress_lines(seen)[1:], seen[-2000:]
    record = json.loads((run_dir / "generation.json").read_text())
    assert record["interrupted"] and len(record["samples"]) == 2
    got = [s["new_seconds"] for s in record["samples"]]
    assert proc.returncode == 130, rest[-20:]
    assert rest[-1] == (f"{PROG}: interrupted: wrote the 2 partial sample(s) so far ({min(got):.1f} to "
                        f"{max(got):.1f} s of new music) to {run_dir.resolve()}")
    for sample in record["samples"]:
        assert sample["stop"] == "interrupted" and sample["new_tokens"] > 0
        notes = TOK.read(run_dir / sample["midi"])
        assert len(notes) == sample["notes"] > 0


def test_ctrl_c_while_writing_records_the_samples_written(endless_checkpoint, tmp_path):
    """64 samples take seconds to write (a MIDI file and a piano roll each): a Ctrl-C once the second one's MIDI
    is on disk lands among them. The record lists what was written, and nothing half-written is left."""
    run_dir = tmp_path / "run"
    cmd = command(f"checkpoint={endless_checkpoint}", "length_seconds=5", "num_samples=64", "audio=false",
                  "progress_every_s=null", f"hydra.run.dir={run_dir}")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    second = run_dir / "sample_01.mid"  # claimed empty with the others before any is written
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not (second.exists() and second.stat().st_size):
        time.sleep(0.01)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-3000:]
    record = json.loads((run_dir / "generation.json").read_text())
    written = [s["midi"] for s in record["samples"]]
    assert record["interrupted"] and 1 <= len(written) < 64 and record["samples_not_written"] == 64 - len(written)
    assert err.strip().splitlines()[-1] == (f"{PROG}: interrupted while writing: wrote {len(written)} of the 64 "
                                            f"sample(s) and generation.json to {run_dir.resolve()}")
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(
        ["generation.json", *written, *(s["png"] for s in record["samples"])])
    for sample in record["samples"]:  # each one whole: the stop the run asked for, all its notes in the file
        assert sample["stop"] == "length_seconds"
        assert len(TOK.read(run_dir / sample["midi"])) == sample["notes"] > 0


@pytest.mark.parametrize("typo", ["lenght_seconds=30", "+lenght_seconds=30"])
def test_a_typo_is_one_line_naming_the_nearest_option(typo, tmp_path):
    done = subprocess.run(command(typo, f"hydra.run.dir={tmp_path / 'run'}"), capture_output=True, text=True,
                          timeout=300, env=ENV)
    assert done.returncode == 1
    assert done.stderr.strip() == f"{PROG}: error: unknown option 'lenght_seconds'; did you mean 'length_seconds'?"
    assert not (tmp_path / "run").exists()
