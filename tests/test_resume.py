"""Resuming ``musictx-train`` (``ckpt_path=``): the run's folder keeps one best checkpoint, a run already at its
``trainer.max_steps`` says so in one line and trains nothing, the first resumed step follows the new schedule,
and a checkpoint of one tokenizer kind resumed on data of the other names both. Real configs, real tiny runs
with the real Lightning Trainer (`musictx.training.run.train`, as the console script runs them)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import lightning as L
import pytest

from musictx.checkpoints.model_store import ModelLoadError, read_checkpoint
from musictx.commands.train_objects import build, plan_of
from musictx.commands.train_objects import train_config as train
from musictx.training.resume import resolve_resume_path
from musictx.training.run import train as run_plan

from .metrical_fixtures import fixture_band_dir, fixture_remi_dir  # noqa: F401
from .test_train import compose_train

# Validations every 3 steps: a first run of 6 steps has two, each resume to 12 two more.
COMMON = ["model=lstm", "trainer.val_check_interval=3", "schedule.warmup_steps=2", "logger=csv"]


def best_files(run: Path) -> list[Path]:
    return sorted((run / "checkpoints").glob("best-*.ckpt"))


def val_losses(run: Path) -> list[float]:
    with open(run / "csv" / "metrics.csv", newline="") as f:
        return [float(r["val/loss"]) for r in csv.DictReader(f) if r.get("val/loss")]


def recorded_score(path: Path) -> float:
    """The val/loss ModelCheckpoint recorded for ``path`` in the file itself."""
    (state,) = [s for k, s in read_checkpoint(path)["callbacks"].items() if k.startswith("ModelCheckpoint")]
    return float(state["best_model_score"])


def test_a_resumed_run_keeps_one_best_checkpoint_and_ckpt_path_best_finds_it(prepared_dir, tmp_path):
    run = tmp_path / "run"
    train(compose_train(prepared_dir, run, *COMMON, "trainer.max_steps=6"))
    (before,) = best_files(run)
    train(compose_train(prepared_dir, run, *COMMON, "trainer.max_steps=12", "ckpt_path=last"))
    (best,) = best_files(run)  # the step-6 best was kept beside the new one: ckpt_path=best refused the folder
    assert recorded_score(best) == pytest.approx(min(val_losses(run)))  # the better of the old and the new
    assert best == before or not before.exists()
    assert resolve_resume_path("best", run / "checkpoints")[0] == str(best)
    # resumed from the best file itself, which Lightning never removes when it drops out of the top k
    train(compose_train(prepared_dir, run, *COMMON, "trainer.max_steps=15", "ckpt_path=best"))
    (again,) = best_files(run)
    assert recorded_score(again) == pytest.approx(min(val_losses(run)))
    assert resolve_resume_path("best", run / "checkpoints")[0] == str(again)


def test_a_best_checkpoint_left_beside_the_listed_one_is_removed_on_resume(prepared_dir, tmp_path, capsys):
    # A run folder of before the fix (or of a run killed between the best and the last save): a best file that
    # the top-k list in last.ckpt does not name, here the step-3 best put back beside the step-6 one.
    run = tmp_path / "run"
    train(compose_train(prepared_dir, run, *COMMON, "trainer.max_steps=3"))
    (early,) = best_files(run)
    shutil.copy(early, tmp_path / early.name)
    train(compose_train(prepared_dir, run, *COMMON, "trainer.max_steps=6", "ckpt_path=last"))
    (listed,) = best_files(run)
    if listed.name == early.name:
        pytest.skip("the step-3 validation stayed the best: nothing was left beside it")
    shutil.copy(tmp_path / early.name, early)
    scores = {p.name: recorded_score(p) for p in (listed, early)}
    capsys.readouterr()
    train(compose_train(prepared_dir, run, *COMMON, "trainer.max_steps=9", "ckpt_path=last"))
    (best,) = best_files(run)
    assert recorded_score(best) == pytest.approx(min(val_losses(run)))
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("checkpoints: ")]
    assert said == [f"checkpoints: {listed.name} (val/loss {scores[listed.name]:.4f}) stays this run's best; "
                    f"removed {early.name} (val/loss {scores[early.name]:.4f}), left beside it by an earlier save "
                    "(save_top_k=1)"]


@pytest.mark.parametrize("max_steps", [6, 4])
def test_a_resume_at_or_past_max_steps_says_so_in_one_line_and_trains_nothing(max_steps, prepared_dir, tmp_path,
                                                                             capsys):
    run = tmp_path / "run"
    train(compose_train(prepared_dir, run, *COMMON, "trainer.max_steps=6"))
    last = run / "checkpoints" / "last.ckpt"
    files = {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()}
    capsys.readouterr()
    metrics = train(compose_train(prepared_dir, run, *COMMON, f"trainer.max_steps={max_steps}", "ckpt_path=last"))
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        f"musictx-train: nothing to train: ckpt_path=last ({last}) is at step 6, and trainer.max_steps={max_steps}; "
        "to train on, raise trainer.max_steps above 6 and resume it again"], out
    assert metrics == {} and {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()} == files


def lr_of_each_update(cfg) -> dict[int, list[float]]:
    """Train ``cfg`` as musictx-train does; {global step: each parameter group's lr its update used}, read
    from the optimizer when it steps."""
    used = {}

    class Record(L.Callback):
        def on_before_optimizer_step(self, trainer, pl_module, optimizer):
            used[trainer.global_step] = [group["lr"] for group in optimizer.param_groups]

    def build_recorded():
        datamodule, module, trainer = build(cfg)
        trainer.callbacks.append(Record())
        return datamodule, module, trainer

    L.seed_everything(cfg.seed)
    run_plan(plan_of(cfg), build_recorded)
    return used


def test_a_resume_with_more_steps_takes_its_first_step_at_the_new_schedules_lr(prepared_dir, tmp_path):
    common = [*COMMON, "schedule=cosine"]  # total_steps: ${trainer.max_steps}
    lr_of_each_update(compose_train(prepared_dir, tmp_path / "run", *common, "trainer.max_steps=6"))
    old_next = [g["lr"] for g in read_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")["optimizer_states"][0]
                ["param_groups"]]  # what the 6-step schedule set for the 7th update
    straight = lr_of_each_update(compose_train(prepared_dir, tmp_path / "straight", *common, "trainer.max_steps=12"))
    resumed = lr_of_each_update(compose_train(prepared_dir, tmp_path / "run", *common, "trainer.max_steps=12",
                                              "ckpt_path=last"))
    assert sorted(resumed) == list(range(6, 12))
    assert resumed[6] != pytest.approx(old_next)  # else this test could not tell the schedules apart
    for step in range(6, 12):
        assert resumed[step] == pytest.approx(straight[step], rel=1e-12), f"update {step + 1}"


@pytest.mark.parametrize("order", ["performance_on_remi", "remi_on_performance"])
def test_a_resume_on_data_of_the_other_tokenizer_kind_names_both(order, prepared_dir, remi_dir, tmp_path):
    trained, other = (prepared_dir, remi_dir) if order == "performance_on_remi" else (remi_dir, prepared_dir)
    run = tmp_path / "run"
    train(compose_train(trained, run, *COMMON, "trainer.max_steps=2", "logger=none"))
    words = {prepared_dir: "Performance events", remi_dir: "REMI tokens"}
    last = run / "checkpoints" / "last.ckpt"
    with pytest.raises(ModelLoadError) as err:
        train(compose_train(other, run, *COMMON, "trainer.max_steps=4", "ckpt_path=last", "logger=none"))
    assert str(err.value) == (
        f"ckpt_path={last}: the run learnt {words[trained]}, but data.dir={other} holds {words[other]}; resume it "
        f"with data.dir set to the dataset it was trained on ({words[trained]}), or leave ckpt_path out to start "
        "a new run on these data")


def test_overwrite_replaces_the_old_runs_checkpoints(prepared_dir, tmp_path, capsys):
    """``overwrite=true`` replaces the run in the folder: none of its checkpoints stays beside the new run's (an
    old best file kept there made ``ckpt_path=best`` refuse the folder, or resume the old run's weights)."""
    run = tmp_path / "run"
    train(compose_train(prepared_dir, run, *COMMON, "trainer.max_steps=6", "seed=1"))
    old = {p.name for p in (run / "checkpoints").glob("*.ckpt")}
    capsys.readouterr()
    train(compose_train(prepared_dir, run, *COMMON, "trainer.max_steps=3", "seed=2", "overwrite=true"))
    said = capsys.readouterr().out
    (best,) = best_files(run)
    assert read_checkpoint(best)["global_step"] <= 3 and best.name not in old
    assert read_checkpoint(run / "checkpoints" / "last.ckpt")["global_step"] == 3
    assert resolve_resume_path("best", run / "checkpoints")[0] == str(best)
    assert "overwrite=true: removed the old run's checkpoints" in said and sorted(old)[0] in said


def named_paths(path: Path) -> set[str]:
    """The files the ModelCheckpoint state in checkpoint ``path`` names: its best, k-th, last and listed ones."""
    (state,) = [s for k, s in read_checkpoint(path)["callbacks"].items() if k.startswith("ModelCheckpoint")]
    named = {state["best_model_path"], state["kth_best_model_path"], state["last_model_path"], *state["best_k_models"]}
    return named - {""}


@pytest.mark.parametrize("validates", [True, False])
def test_a_run_resumed_from_another_runs_file_keeps_its_best_in_its_own_folder(validates, prepared_dir, tmp_path,
                                                                               capsys):
    # Lightning restores best_model_path from a checkpoint of another folder: run B's last.ckpt named run A's
    # file as B's best, and a B that saved no best of its own reported it (evaluate: scored A's weights).
    first, run = tmp_path / "A", tmp_path / "B"
    train(compose_train(prepared_dir, first, *COMMON, "trainer.max_steps=6"))
    (theirs,) = best_files(first)
    files = {p.name: p.read_bytes() for p in (first / "checkpoints").iterdir()}
    capsys.readouterr()
    validation = [] if validates else ["trainer.limit_val_batches=0"]
    train(compose_train(prepared_dir, run, *COMMON, "trainer.max_steps=9", f"ckpt_path={theirs}", *validation))
    out = capsys.readouterr().out.splitlines()
    assert {p.name: p.read_bytes() for p in (first / "checkpoints").iterdir()} == files  # A's files as they were
    named = {p for ckpt in (run / "checkpoints").glob("*.ckpt") for p in named_paths(ckpt)}
    assert {Path(p).parent for p in named} <= {run / "checkpoints"}, named
    ours = best_files(run)
    assert len(ours) == (1 if validates else 0)
    best = f"best {ours[0]} (val/loss {recorded_score(ours[0]):.4f})" if ours else "best - (val/loss -)"
    assert f"checkpoints in {run / 'checkpoints'}: last.ckpt, {best}" in out
    assert [line for line in out if line.startswith("checkpoints: ")] == [
        f"checkpoints: left out {theirs}, named by ckpt_path={theirs} but of another folder: this run's best "
        f"checkpoints are only its own, in {run / 'checkpoints'}; that folder's files are left as they are"]
