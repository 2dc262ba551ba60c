"""Issue 39, cases 1-5 and 8-10: every command refuses, in one line with exit status 1 and before any work, a
target inside the package, ``/``, the home folder itself, or one holding files it did not write; a mistyped
key gets "did you mean" everywhere; a refused run leaves no folder; and generation has upper bounds.

Each refused target is made in a temporary tree that stands for the package (``MUSICTX_PROTECTED_ROOTS``), and
every test compares the hashes of every file in that tree before and after. The commands run for real, as
subprocesses; refusals come before any model is read, so most take a second."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from musictx.paths import PACKAGE_DIR, PRETRAINED_DIR
from musictx.safe_output import PROTECTED_ENV

from .gen_fixtures import fixture_tiny_checkpoint  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]
MOTIF = PACKAGE_DIR / "assets" / "motif.mid"
COMMANDS = {"prep": "musictx.commands.prep", "train": "musictx.commands.train",
            "generate": "musictx.commands.generate", "evaluate": "musictx.commands.evaluate",
            "export": "musictx.commands.export", "attention": "musictx.commands.show_attention"}


def tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file below ``root`` (links not followed), by path relative to it."""
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink():
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def run_cmd(name: str, *args: str, cwd: Path, env: dict | None = None, timeout: float = 300):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", **(env or {})}
    return subprocess.run([sys.executable, "-m", COMMANDS[name], *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def refused(done: subprocess.CompletedProcess, name: str) -> str:
    """The command failed with exit status 1 and one ``musictx-<name>: error:`` line on stderr; return it."""
    prog = "musictx-prep" if name == "prep" else f"musictx-{name}"
    assert done.returncode == 1, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith(f"{prog}: error: ")]
    assert len(errors) == 1, done.stderr[-3000:]
    return errors[0]


@pytest.fixture
def stand_in(tmp_path) -> tuple[Path, dict]:
    """A tree standing for the installed package (its pretrained/piano holds copies of the shipped model's
    files), the environment that protects it, and a working folder beside it."""
    pkg = tmp_path / "pkg"
    shutil.copytree(PRETRAINED_DIR / "piano", pkg / "pretrained" / "piano")
    (pkg / "conf").mkdir()
    (pkg / "conf" / "train.yaml").write_text("seed: 1\n")
    (tmp_path / "work").mkdir()
    return pkg, {PROTECTED_ENV: str(pkg)}


# ----- 1 and 8: nothing is written into the package -----------------------------------------------------
def test_export_into_the_shipped_model_is_refused(stand_in, tmp_path):
    pkg, env = stand_in
    before, shipped = tree_hashes(pkg), tree_hashes(PRETRAINED_DIR)
    target = pkg / "pretrained" / "piano"
    line = refused(run_cmd("export", str(tmp_path / "any.ckpt"), str(target), cwd=tmp_path / "work", env=env),
                   "export")
    assert line == (f"musictx-export: error: output_dir={target}: inside the installed musictx package ({pkg}); "
                    "choose a folder of your own")
    # the real package too: the refusal comes before the checkpoint is even looked for
    line = refused(run_cmd("export", str(tmp_path / "any.ckpt"), str(PRETRAINED_DIR / "piano"), cwd=tmp_path),
                   "export")
    assert "inside the installed musictx package" in line
    assert tree_hashes(pkg) == before and tree_hashes(PRETRAINED_DIR) == shipped
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pkg", "work"]


# One command of each parametrized refusal runs in the default suite; the others (each a fresh process, some
# seconds each) are `slow`, as `make test-all` runs them: the check is the same function for every command.
def _others_slow(names, default):
    return [n if n == default else pytest.param(n, marks=pytest.mark.slow) for n in names]


@pytest.mark.parametrize("name", _others_slow(["train", "evaluate", "attention", "prep", "generate"], "generate"))
def test_every_command_refuses_the_package(name, stand_in, tmp_path):
    pkg, env = stand_in
    inside = pkg / "conf" / "out"
    args = {"train": [f"hydra.run.dir={inside}"], "evaluate": [f"output_dir={inside}"],
            "attention": [f"output={pkg / 'conf' / 'arcs.png'}"], "prep": [f"output_dir={inside}"],
            "generate": [f"output_dir={inside}"]}[name]
    before = tree_hashes(tmp_path)
    line = refused(run_cmd(name, *args, cwd=tmp_path / "work", env=env), name)
    assert f"inside the installed musictx package ({pkg})" in line
    assert tree_hashes(tmp_path) == before and not inside.exists()
    assert list((tmp_path / "work").iterdir()) == []  # no run folder (outputs/...) either


@pytest.mark.parametrize("name", _others_slow(["generate", "evaluate", "export", "train", "prep"], "generate"))
def test_root_and_home_are_refused(name, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    for target, said in (("/", "the root of the file system"), (str(home), "your home folder itself")):
        args = {"generate": [f"output_dir={target}"], "evaluate": [f"output_dir={target}"],
                "export": [str(tmp_path / "any.ckpt"), target], "train": [f"hydra.run.dir={target}"],
                "prep": [f"output_dir={target}"]}[name]
        before = tree_hashes(tmp_path)
        # the libraries' caches stay where they were: the stand-in home must hold only what the test put there
        env = {"HOME": str(home), "MPLCONFIGDIR": str(Path.home() / ".config" / "matplotlib"),
               "XDG_CACHE_HOME": str(Path.home() / ".cache")}
        line = refused(run_cmd(name, *args, cwd=tmp_path, env=env), name)
        assert said in line and target in line
        assert tree_hashes(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["home"]


def test_attention_output_root_is_refused(tmp_path):
    line = refused(run_cmd("attention", "output=/", cwd=tmp_path), "attention")
    assert line == "musictx-attention: error: output=/: the root of the file system; choose a folder of your own"
    assert not Path("/.png").exists() and list(tmp_path.iterdir()) == []


# ----- 2, 4, 5: no file is replaced without overwrite ---------------------------------------------------------
def test_export_does_not_replace_a_model_folder(tmp_path, tiny_checkpoint):
    folder = tmp_path / "mine"
    shutil.copytree(PRETRAINED_DIR / "piano", folder)
    before = tree_hashes(tmp_path)
    line = refused(run_cmd("export", str(tiny_checkpoint), str(folder), cwd=tmp_path), "export")
    assert line == (f"musictx-export: error: {folder / 'config.json'} already exists and this run did not write it; "
                    "pass --overwrite to replace it, or choose another output_dir")
    assert tree_hashes(tmp_path) == before
    done = run_cmd("export", str(tiny_checkpoint), str(folder), "--overwrite", cwd=tmp_path)  # said so: replaced
    assert done.returncode == 0, done.stderr[-2000:]
    after = tree_hashes(tmp_path)
    assert after["mine/config.json"] != before["mine/config.json"]
    assert not [n for n in after if ".tmp-" in n]  # no temporary left behind


def test_evaluate_does_not_replace_its_results(tmp_path, tiny_checkpoint, prepared_dir):
    out = tmp_path / "eval"
    out.mkdir()
    (out / "metrics.json").write_text('{"nll": 1.0}\n')
    (out / "evaluate_config.yaml").write_text("mine: true\n")
    before = tree_hashes(tmp_path)
    line = refused(run_cmd("evaluate", f"checkpoint={tiny_checkpoint}", f"data.dir={prepared_dir}",
                           f"output_dir={out}", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path), "evaluate")
    assert line.startswith(f"musictx-evaluate: error: {out / 'metrics.json'} already exists and this run did not "
                           "write it; pass overwrite=true")
    assert tree_hashes(tmp_path) == before and not (tmp_path / "run").exists()
    line = refused(run_cmd("evaluate", f"data.dir={prepared_dir}", f"output_dir={prepared_dir}", cwd=tmp_path),
                   "evaluate")
    assert "the folder of the input data.dir=" in line


def test_attention_does_not_replace_a_record_beside_its_picture(tmp_path):
    (tmp_path / "generation.json").write_text('{"samples": []}\n')
    before = tree_hashes(tmp_path)
    line = refused(run_cmd("attention", f"midi={MOTIF}", "output=generation.png", cwd=tmp_path), "attention")
    assert line.startswith(f"musictx-attention: error: {Path('generation.json')} already exists")
    assert tree_hashes(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["generation.json"]


# ----- 3: a new training run does not replace the run in its folder -------------------------------------------
@pytest.mark.slow  # 35-80 s of subprocesses on a Zen 3; make test-all runs it
def test_a_new_run_in_a_run_folder_is_refused_and_resume_still_works(tmp_path, prepared_dir):
    run = tmp_path / "run"
    common = ["experiment=tiny", f"data.dir={prepared_dir}", "model=lstm", "data.seq_len=32",
              f"hydra.run.dir={run}", "trainer.val_check_interval=2"]
    done = run_cmd("train", *common, "trainer.max_steps=4", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    before = tree_hashes(tmp_path)
    line = refused(run_cmd("train", *common, "trainer.max_steps=2", cwd=tmp_path), "train")
    assert line.startswith(f"musictx-train: error: hydra.run.dir={run} already holds a run (checkpoints/")
    assert f"resume it with hydra.run.dir={run} ckpt_path=last" in line and "overwrite=true" in line
    assert tree_hashes(tmp_path) == before  # .hydra/ and train.log of the first run included
    done = run_cmd("train", *common, "trainer.max_steps=6", "ckpt_path=last", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming from" in done.stdout and tree_hashes(tmp_path) != before


# ----- 9: one line for every command; "did you mean"; no folder left by a refused run ---------------------------
@pytest.mark.parametrize(("name", "typo", "meant"), [
    # the same check for every command (one default case a kind: a key, a config group); `make test-all` runs all
    pytest.param("train", "trainer.max_stps=3", "trainer.max_steps", marks=pytest.mark.slow),
    pytest.param("evaluate", "batch_sise=2", "batch_size", marks=pytest.mark.slow),
    pytest.param("prep", "num_workrs=1", "num_workers", marks=pytest.mark.slow),
    pytest.param("attention", "last_note=3", "last_notes", marks=pytest.mark.slow),
    ("generate", "lenght_seconds=3", "length_seconds"), ("train", "model=musc_transformer", "music_transformer"),
])
def test_a_mistyped_key_gets_did_you_mean(name, typo, meant, tmp_path):
    line = refused(run_cmd(name, typo, cwd=tmp_path), name)
    assert "did you mean" in line and meant in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # 35-80 s of subprocesses on a Zen 3; make test-all runs it
def test_failures_are_one_line_and_leave_no_run_folder(tmp_path, prepared_dir):
    cases = [("export", [str(tmp_path / "none.ckpt"), str(tmp_path / "model")], "none.ckpt"),
             ("evaluate", [f"checkpoint={tmp_path / 'none.ckpt'}", f"data.dir={prepared_dir}"], "none.ckpt"),
             ("prep", ["source=folder", f"input_dir={tmp_path / 'nothing'}", f"output_dir={tmp_path / 'data'}"],
              "nothing"),
             *[("train", [f"data.dir={tmp_path / 'nothing'}", f"seed={k}"], "no such folder") for k in range(3)]]
    for name, args, said in cases:
        line = refused(run_cmd(name, *args, cwd=tmp_path), name)
        assert said in line, line
    assert list(tmp_path.iterdir()) == []  # no outputs/train/..., outputs/evaluate/... folders


# ----- 10: bounds -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("option", "said"), [
    ("length_seconds=1e9", "length_seconds must be at most 1200"),
    pytest.param("num_samples=65", "num_samples must be in 1..64", marks=pytest.mark.slow),
    pytest.param("max_tokens=300000", "max_tokens must be in 1..200000", marks=pytest.mark.slow),
    pytest.param("seed_from=4000", "seed_from must be at most 3600", marks=pytest.mark.slow),
    pytest.param("seed_seconds=5000", "seed_seconds must be at most 3600", marks=pytest.mark.slow),
])
def test_generation_bounds(option, said, tmp_path):
    line = refused(run_cmd("generate", f"seed_midi={MOTIF}", option, f"output_dir={tmp_path / 'out'}",
                           cwd=tmp_path), "generate")
    assert said in line
    assert list(tmp_path.iterdir()) == []
