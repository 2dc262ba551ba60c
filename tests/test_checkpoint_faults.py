"""Issue 68, part 2: training checkpoints whole under faults.

A checkpoint is staged beside its file, never in ``$TMPDIR``; the real ``musictx-train`` killed with SIGKILL at
a rename or in the middle of a write (`tests/kill_hook.py`) leaves every checkpoint whole or absent, and the
next run sweeps what the kill left (one line), then resumes or, when no checkpoint was finished, starts again
without ``overwrite=true``. A full checkpoint disk names the checkpoint and that disk's free space; an output
folder that is a file or read-only is one line before Hydra makes anything."""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from musictx.checkpoints.model_store import read_checkpoint
from musictx.safe_output import OutputError, check_writable, temp_path
from musictx.training.checkpoint_io import AtomicCheckpointIO
from musictx.training.orphans import STALE_S, sweep_orphans

from .helpers import small_tmpfs
from .test_output_safety import refused, run_cmd
from .test_train import SHRINK, compose_train, fit

HOOK = Path(__file__).with_name("kill_hook.py")
# 4 steps, checkpoints at steps 2 and 4 (last.ckpt, then the best): the smallest run with two saves
ARGS = ["experiment=tiny", "model=lstm", "logger=csv", *SHRINK, "trainer.max_steps=4", "trainer.val_check_interval=2"]


def hidden_files(run: Path) -> list[str]:
    """What a save or a kill may leave: hidden files anywhere in the run folder but Hydra's own .hydra/."""
    return sorted(str(p.relative_to(run)) for p in run.rglob(".*") if p.is_file() and ".hydra" not in p.parts)


def files_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def train(run: Path, tmpdir: Path, data: Path, *extra: str, kill_at: str | None = None):
    """The real command in a subprocess (through the kill hook when ``kill_at``), with its own ``$TMPDIR``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "TMPDIR": str(tmpdir)}
    env.pop("KILL_AT", None)
    if kill_at:
        env["KILL_AT"] = kill_at
    cmd = [sys.executable, str(HOOK), "train", *ARGS, f"data.dir={data}", f"hydra.run.dir={run}", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def check_whole_or_absent(run: Path) -> list[Path]:
    """Every visible checkpoint loads, hparams.yaml and metrics.csv parse whole; the checkpoints found."""
    ckpts = sorted((run / "checkpoints").glob("[!.]*.ckpt"))
    for ckpt in ckpts:
        assert read_checkpoint(ckpt)["global_step"] in (2, 4), ckpt
    hparams = run / "csv" / "hparams.yaml"
    if hparams.exists():
        assert isinstance(yaml.safe_load(hparams.read_text()), dict) and hparams.stat().st_size > 0
    metrics = run / "csv" / "metrics.csv"
    if metrics.exists():
        with open(metrics, newline="") as f:
            assert "step" in (csv.DictReader(f).fieldnames or [])
    return ckpts


def kill_then_go_on(kill_at: str, prepared_dir: Path, tmp_path: Path) -> str:
    """Kill a run at ``kill_at``; check what is left; run again (resume when a checkpoint was finished, else the
    same command); check the run is whole, nothing is left over, and return the second run's stdout."""
    run, tmpdir = tmp_path / "run", tmp_path / "tmpdir"
    tmpdir.mkdir()
    killed = train(run, tmpdir, prepared_dir, kill_at=kill_at)
    assert killed.returncode == -9, (killed.returncode, killed.stderr[-3000:])
    ckpts = check_whole_or_absent(run)
    left = hidden_files(run)
    assert kill_at.startswith("after") or left, "the kill left no temporary: the hook did not fire where meant"
    again = train(run, tmpdir, prepared_dir, *(["ckpt_path=last"] if ckpts else []))
    assert again.returncode == 0, again.stderr[-3000:]
    if left:
        assert f"removed {len(left)} unfinished file(s) that stopped runs left (" in again.stdout, again.stdout
    assert hidden_files(run) == [] and files_in(tmpdir) == []  # no orphan, in the run or in $TMPDIR
    assert read_checkpoint(run / "checkpoints" / "last.ckpt")["global_step"] == 4
    check_whole_or_absent(run)
    return again.stdout


@pytest.mark.slow  # 6-24 s of real processes; in `make test-all` (the fast suite stays under 10 min)
def test_a_run_killed_in_its_first_checkpoint_starts_again_and_sweeps(prepared_dir, tmp_path):
    # the default suite's kill (two short runs): the first save cut in the middle of its write
    out = kill_then_go_on("write:last.ckpt:1", prepared_dir, tmp_path)
    assert "stopped before its first checkpoint, so nothing can be resumed; starting it again" in out, out


@pytest.mark.slow  # two short training subprocesses each (~10-20 s); make test-all runs them
@pytest.mark.parametrize("kill_at", [
    "before:last.ckpt:1",     # the first checkpoint written whole, not renamed: starts again
    "after:last.ckpt:1",      # renamed, then killed: resumes from step 2
    "before:best-*.ckpt:1",   # the best not renamed, last.ckpt whole: resumes
    "write:last.ckpt:2",      # the second last.ckpt cut short: resumes from the first
    "write:hparams.yaml:1",   # hparams.yaml (written once, before the first step) cut short: none, starts again
    "write:metrics.csv:1",    # the first metrics.csv cut short
])
def test_train_killed_at_a_rename_or_write(kill_at, prepared_dir, tmp_path):
    kill_then_go_on(kill_at, prepared_dir, tmp_path)


def test_no_byte_of_a_checkpoint_goes_through_tmpdir(prepared_dir, tmp_path, monkeypatch):
    # $TMPDIR where nothing can be made (under a file): Lightning's own save staged every checkpoint there
    (tmp_path / "a_file").write_text("")
    nowhere = tmp_path / "a_file" / "tmp"
    monkeypatch.setenv("TMPDIR", str(nowhere))
    monkeypatch.setattr(tempfile, "tempdir", str(nowhere))
    run = tmp_path / "run"
    fit(compose_train(prepared_dir, run, "model=lstm", "trainer.max_steps=4", "trainer.val_check_interval=2"))
    assert read_checkpoint(run / "checkpoints" / "last.ckpt")["global_step"] == 4
    assert len(list((run / "checkpoints").glob("best-*.ckpt"))) == 1 and hidden_files(run) == []


def test_a_full_checkpoint_disk_names_the_checkpoint_and_its_disk(tmp_path):
    with small_tmpfs(tmp_path / "disk", "64k") as disk:
        last = disk / "last.ckpt"
        AtomicCheckpointIO().save_checkpoint({"step": 1}, last)
        before = last.read_bytes()
        with pytest.raises(OutputError) as err:
            AtomicCheckpointIO().save_checkpoint({"step": 2, "weights": bytes(200_000)}, last)
        # the free space is this small disk's (kB), not the working folder's (GB)
        assert str(err.value).startswith(f"cannot write {last}: the disk is full (") and " kB free)" in str(err.value)
        assert last.read_bytes() == before and [p.name for p in disk.iterdir()] == ["last.ckpt"]


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_sweep_removes_only_what_stopped_runs_left_and_says_so(tmp_path, monkeypatch):
    ckpts, tmpdir, host = tmp_path / "checkpoints", tmp_path / "tmpdir", socket.gethostname()
    ckpts.mkdir()
    tmpdir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    gone = dead_pid()
    orphans = [ckpts / f".last.tmp-{host}-{gone}.ckpt", ckpts / f".last.ckpt.tmp-{gone}"]  # now, and older runs'
    for path in orphans:
        path.write_bytes(b"half a checkpoint")
    kept = [temp_path(ckpts / "last.ckpt"),  # this process: a save in progress
            ckpts / f".last.tmp-other-host-{gone}.ckpt", ckpts / "last.ckpt"]
    for path in kept:
        path.write_bytes(b"kept")
    # what older versions left in $TMPDIR (fsspec's mkstemp names): a Lightning checkpoint of musictx, untouched
    # for long, goes; the same but fresh (a live save may be moving it), and anything else, stay
    old = tmpdir / "tmpab12cd_3"
    AtomicCheckpointIO().save_checkpoint({"pytorch-lightning_version": "2.5", "musictx": {}, "w": bytes(9000)}, old)
    fresh, other = tmpdir / "tmpzz12cd_3", tmpdir / "tmpxy12cd_3"
    fresh.write_bytes(old.read_bytes())
    other.write_bytes(b"PK\x03\x04 someone else's zip")
    past = time.time() - STALE_S - 60
    for path in (old, other):
        os.utime(path, (past, past))
    said = []
    removed = sweep_orphans([ckpts, ckpts], say=said.append)
    assert sorted(removed) == sorted([*orphans, old])
    assert all(p.exists() for p in [*kept, fresh, other]) and not any(p.exists() for p in removed)
    assert len(said) == 1 and said[0].startswith("removed 3 unfinished file(s) that stopped runs left (")
    assert " kB in all): " in said[0]
    assert sweep_orphans([ckpts], say=said.append) == [] and len(said) == 1  # nothing left: nothing said


@pytest.mark.parametrize(("name", "key", "under"), [
    ("train", "hydra.run.dir", "run"),
    pytest.param("train", "hydra.run.dir", "", marks=pytest.mark.slow),
    pytest.param("evaluate", "output_dir", "out", marks=pytest.mark.slow),
])
def test_an_output_folder_that_is_a_file_is_one_line(name, key, under, prepared_dir, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine\n")
    out = a_file / under if under else a_file
    args = [*ARGS, f"hydra.run.dir={out}"] if name == "train" else ["checkpoint=piano", f"output_dir={out}"]
    line = refused(run_cmd(name, *args, f"data.dir={prepared_dir}", cwd=tmp_path), name)
    why = "is a file, so no folder can be made in it" if under else "is a file, not a folder"
    assert line == f"musictx-{name}: error: {key}={out}: {a_file} {why}; choose another folder", line
    assert a_file.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_a_read_only_folder_is_named(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() == 0:  # root writes through permissions: a read-only mount, where one can be made
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=16k", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"root, and no read-only tmpfs can be mounted here ({done.stderr.strip()})")
    else:
        folder.chmod(0o555)
    try:
        with pytest.raises(OutputError, match=rf"^output_dir={folder / 'run'}: {folder} is (on a read-only file "
                                              r"system|not writable by you), so no folder can be made in it; "):
            check_writable(folder / "run", "output_dir")
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", "-l", str(folder)], check=False)
        folder.chmod(0o755)
