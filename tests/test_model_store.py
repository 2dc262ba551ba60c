"""Loading models: model folders (safetensors, no pickle), the registry that stops a crafted checkpoint
from running code, references by name / folder / checkpoint, fine-tuning from saved weights, and
refusing to resume from a URL."""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from safetensors.torch import load_file

from musictx.checkpoints.export import export
from musictx.checkpoints.model_store import (
    CONFIG_FILE,
    CRITIC_FILE,
    WEIGHTS_FILE,
    ModelLoadError,
    load_checkpoint,
    load_model,
    read_checkpoint,
    resolve,
)
from musictx.checkpoints.net_specs import build_net
from musictx.decoding.errors import GenerateError
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.tokenizer import EventTokenizer, TokenizerMismatchError
from musictx.paths import CONF_DIR
from musictx.training.finetune import InitFromError

from .gen_fixtures import CKPT_CONTEXT, fixture_tiny_checkpoint  # noqa: F401  (fixture)


@pytest.fixture(name="tiny_folder", scope="module")
def fixture_tiny_folder(tiny_checkpoint, tmp_path_factory):
    return export(str(tiny_checkpoint), tmp_path_factory.mktemp("folder") / "tiny", dtype="float16")


def _crafted(tiny_checkpoint, tmp_path, spec: dict):
    ckpt = read_checkpoint(tiny_checkpoint)
    ckpt["musictx"]["model"] = spec
    path = tmp_path / "crafted.ckpt"
    torch.save(ckpt, path)
    return path


def test_crafted_checkpoint_cannot_run_code(tiny_checkpoint, tmp_path):
    marker = tmp_path / "pwned"
    spec = {"target": "subprocess.Popen", "name": None, "config": {"args": f"touch {marker}", "shell": True}}
    path = _crafted(tiny_checkpoint, tmp_path, spec)
    with pytest.raises(ModelLoadError, match="not one of musictx's models"):
        load_checkpoint(path)
    with pytest.raises(GenerateError, match="not one of musictx's models"):
        run(GenerateOptions(checkpoint=str(path), output_dir=str(tmp_path / "out"), audio=False))
    assert not marker.exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("config", "message"), [
    ({"vocab_size": 390, "evil": 1}, "stored argument evil is not an argument of MusicTransformer"),
    ({"vocab_size": 390, "d_model": [32]}, "stored argument d_model must be a whole number, got [32]"),
    ({"vocab_size": {"a": 1}}, "stored argument vocab_size must be a whole number, got {'a': 1}"),
    # the checks of musictx-train's model.net options, shared: these were a raw RuntimeError ("Trying to create
    # tensor with negative dimension"), a net of no layers, and a size of True
    ({"vocab_size": 390, "d_model": -4}, "stored argument d_model must be a whole number >= 1, got -4"),
    ({"vocab_size": 390, "n_layers": 0}, "stored argument n_layers must be a whole number >= 1, got 0"),
    ({"vocab_size": 390, "d_model": True}, "stored argument d_model must be a whole number, got True"),
])
def test_registry_checks_arguments(config, message):
    with pytest.raises(ModelLoadError, match=re.escape(message)):
        build_net({"name": "music_transformer", "config": config})


def test_a_stored_size_out_of_range_is_named_with_its_file(tiny_folder, tmp_path):
    """Was a RuntimeError from torch with no file named (musictx-generate: "... (RuntimeError; MUSICTX_DEBUG=1
    shows where)")."""
    folder = shutil.copytree(tiny_folder, tmp_path / "bad")
    config = json.loads((folder / CONFIG_FILE).read_text())
    config["model"]["config"]["d_model"] = -4
    (folder / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=re.escape(f"{folder / CONFIG_FILE}: stored argument d_model must be "
                                                       "a whole number >= 1, got -4")):
        load_model(str(folder))


def test_model_folder_round_trip(tiny_checkpoint, tiny_folder):
    assert sorted(p.name for p in tiny_folder.iterdir()) == [CONFIG_FILE, WEIGHTS_FILE]
    state = load_file(tiny_folder / WEIGHTS_FILE)
    assert {t.dtype for t in state.values()} == {torch.float16}
    net_ckpt, tok_ckpt, _ = load_checkpoint(tiny_checkpoint)
    net, tok, meta = load_model(str(tiny_folder))
    assert meta["source"] == "folder" and tok == tok_ckpt
    assert next(net.parameters()).dtype == torch.float32
    ids = torch.randint(0, 388, (2, CKPT_CONTEXT))
    with torch.no_grad():
        ref, got = net_ckpt(ids), net(ids)
    assert (got - ref).abs().max() < 2e-2 * ref.abs().max()  # fp16 weights, fp32 compute


def test_a_sharded_folder_loads_the_same_weights(tiny_checkpoint, tiny_folder, tmp_path):
    """--max-shard-mb splits the weights into files under the cap (a transfer taking files of at most
    16 MiB), listed in config.json; loading reads them all; a missing shard is one line naming it."""
    whole = (tiny_folder / WEIGHTS_FILE).stat().st_size
    cap_mb = whole / 3.5 / 2**20
    subprocess.run([sys.executable, "-m", "musictx.commands.export", str(tiny_checkpoint), str(tmp_path / "sharded"),
                    "--max-shard-mb", f"{cap_mb:.6f}"], check=True, capture_output=True)
    folder = tmp_path / "sharded"
    listed = json.loads((folder / CONFIG_FILE).read_text())["weights_files"]
    assert len(listed) >= 3 and listed[0] == f"model-00001-of-{len(listed):05d}.safetensors"
    assert sorted(p.name for p in folder.glob("*.safetensors")) == listed
    tensors = max(t.numel() * t.element_size() for t in load_file(tiny_folder / WEIGHTS_FILE).values())
    assert all((folder / n).stat().st_size <= max(cap_mb * 2**20, tensors) + 4096 for n in listed)  # + header
    net_whole, _, _ = load_model(str(tiny_folder))
    net_sharded, _, _ = load_model(str(folder))
    for (k, a), (k2, b) in zip(net_whole.state_dict().items(), net_sharded.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(a, b)
    (folder / listed[2]).unlink()
    with pytest.raises(ModelLoadError, match=f"{listed[2]}: unreadable weights"):
        load_model(str(folder))


def test_references_resolve_and_bad_ones_are_named(tiny_checkpoint, tiny_folder, tmp_path):
    assert resolve(str(tiny_checkpoint))[0] == "checkpoint"
    assert resolve(str(tiny_folder))[0] == "folder"
    with pytest.raises(ModelLoadError, match="no such file, model folder or shipped model name .shipped: piano"):
        resolve("no_such_model")
    with pytest.raises(ModelLoadError, match="a folder without config.json"):
        resolve(str(tmp_path))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / CONFIG_FILE).write_text(json.dumps({"format": 1, "model": {"name": "os.system", "config": {}}}))
    with pytest.raises((ModelLoadError, TokenizerMismatchError)):
        load_model(str(bad))


def test_a_model_installed_beside_the_package_loads_by_name(tiny_folder, tmp_path, monkeypatch):
    """A folder in $MUSICTX_MODELS (pop-large's place: too large for the package) is found by its name, and
    listed when a name is wrong; a shipped name is never shadowed by an installed folder of that name."""
    monkeypatch.setenv("MUSICTX_MODELS", str(tmp_path / "models"))
    with pytest.raises(ModelLoadError, match="pop_infill\\)$"):  # none installed: none listed
        resolve("big")
    shutil.copytree(tiny_folder, tmp_path / "models" / "big")
    shutil.copytree(tiny_folder, tmp_path / "models" / "piano")  # the shipped piano wins
    assert resolve("big") == ("installed", tmp_path / "models" / "big")
    assert resolve("piano")[0] == "shipped"
    net, _, meta = load_model("big")
    assert meta["source"] == "installed" and sum(p.numel() for p in net.parameters()) > 0
    with pytest.raises(ModelLoadError, match="pop_infill; installed: big\\)$"):
        resolve("bigger")


def test_generate_from_a_model_folder(tiny_folder, tmp_path):
    record = run(GenerateOptions(checkpoint=str(tiny_folder), output_dir=str(tmp_path), num_samples=1,
                                 length_seconds=2.0, audio=False))
    assert record["model_source"] == "folder" and (tmp_path / "sample_00.mid").stat().st_size > 0


def _train_cfg(data_dir, out, *extra):
    overrides = ["experiment=tiny", f"data.dir={data_dir}", f"paths.output_dir={out}", "logger=none",
                 f"data.seq_len={CKPT_CONTEXT}", "data.batch_size=4", "data.num_workers=0", "trainer.max_steps=2",
                 "trainer.val_check_interval=1", "trainer.limit_val_batches=1", "++trainer.enable_progress_bar=false",
                 "++trainer.enable_model_summary=false", "~callbacks.progress_bar", *extra]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("train", overrides=overrides), list(extra)


def test_init_from_starts_from_the_saved_weights(tiny_folder, prepared_dir, tmp_path):
    from musictx.commands.train_objects import build

    cfg, overrides = _train_cfg(prepared_dir, tmp_path, f"init_from={tiny_folder}", "model.net.dropout=0.1")
    L.seed_everything(0)
    datamodule, module, trainer = build(cfg, overrides)
    saved, _, _ = load_model(str(tiny_folder))
    assert module.net.get_config()["d_model"] == saved.get_config()["d_model"] == 32  # not the config's 128
    assert module.net.get_config()["dropout"] == 0.1  # a run setting from the config
    for (name, a), b in zip(module.net.state_dict().items(), saved.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    trainer.fit(module, datamodule=datamodule)
    assert trainer.global_step == 2  # a fresh run: step, optimizer and schedule start at zero


@pytest.mark.parametrize(("extra", "error", "message"), [
    (["model.net.d_model=64"], InitFromError, r"model\.net\.d_model=64 changes a weight shape.*d_model=32"),
    (["model=lstm"], InitFromError, r"holds a 'music_transformer' model but model=lstm"),
])
def test_init_from_refuses_shape_changes(tiny_folder, prepared_dir, tmp_path, extra, error, message):
    from musictx.commands.train_objects import build

    cfg, overrides = _train_cfg(prepared_dir, tmp_path, f"init_from={tiny_folder}", *extra)
    with pytest.raises(error, match=message):
        build(cfg, overrides)


def test_init_from_refuses_another_tokenizer(tiny_folder, prepared_dir, tmp_path):
    from musictx.training.finetune import init_net_from

    other = EventTokenizer({"velocity_bins": 16})
    with pytest.raises(TokenizerMismatchError, match=r"init_from=.*velocity_bins"):
        init_net_from(str(tiny_folder), {}, other, {})


def test_resume_from_url_is_refused(prepared_dir, tmp_path):
    from musictx.commands.train_objects import train_config

    cfg, _ = _train_cfg(prepared_dir, tmp_path, "ckpt_path=http://example.invalid/last.ckpt")
    with pytest.raises(ValueError, match="resuming from a URL is refused"):
        train_config(cfg)
    assert not (tmp_path / "checkpoints").exists()


def test_wheel_ships_configs_and_model_folders(tmp_path):
    """`pip install .` (not only -e) gets the configs, the shipped models and the seed motif."""
    root = Path(CONF_DIR).parents[1]
    src = tmp_path / "src"  # a copy: an in-tree build would leave build/ and egg-info in the checkout
    skip = shutil.ignore_patterns(".venv", ".git", "data", "outputs", "multirun", "build", "*.egg-info")
    shutil.copytree(root, src, symlinks=True, ignore=skip)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(src)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("musictx-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "musictx/conf/train.yaml" in names and "musictx/conf/experiment/piano.yaml" in names
    assert "musictx/assets/motif.mid" in names
    shipped = [p.parent.name for p in (root / "musictx" / "pretrained").glob("*/config.json")]
    assert shipped, "no shipped model folder to check"
    for name in shipped:
        assert {f"musictx/pretrained/{name}/{f}" for f in (CONFIG_FILE, WEIGHTS_FILE, "README.md")} <= names


# ----- damaged files: refused at load with the file and the reason -----------------------------------
def _poisoned(tiny_checkpoint, tmp_path, how: str) -> tuple[Path, str]:
    """A copy of the tiny checkpoint with one weight NaN, or made inf by setting its exponent bits (as a
    bit flip on disk would); returns (path, the parameter's name in the file)."""
    ckpt = read_checkpoint(tiny_checkpoint)
    name = [k for k, v in ckpt["state_dict"].items() if k.startswith("net.") and v.is_floating_point()][-1]
    flat = ckpt["state_dict"][name].view(-1)
    if how == "nan":
        flat[3] = float("nan")
    else:
        flat.view(torch.int32)[3] |= 0x7F800000
    path = tmp_path / f"{how}.ckpt"
    torch.save(ckpt, path)
    return path, name


@pytest.mark.parametrize("how", ["nan", "bitflip"])
def test_non_finite_weights_are_refused_with_the_parameter_named(how, tiny_checkpoint, tmp_path):
    path, name = _poisoned(tiny_checkpoint, tmp_path, how)
    with pytest.raises(ModelLoadError, match=rf"{how}\.ckpt: parameter {name} holds 1 non-finite value"):
        load_checkpoint(path)
    with pytest.raises(GenerateError, match=rf"parameter {name} holds"):
        run(GenerateOptions(checkpoint=str(path), output_dir=str(tmp_path / "out"), audio=False))


def test_non_finite_weights_in_a_model_folder_are_refused(tiny_folder, tmp_path):
    from safetensors.torch import save_file

    folder = tmp_path / "copy"
    shutil.copytree(tiny_folder, folder)
    state = load_file(folder / WEIGHTS_FILE)
    name = sorted(state)[0]
    state[name].view(-1)[0] = float("inf")
    save_file(state, folder / WEIGHTS_FILE)
    with pytest.raises(ModelLoadError, match=rf"model\.safetensors: parameter {name} holds 1 non-finite"):
        load_model(str(folder))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "no weights"])
def test_unreadable_checkpoints_are_model_load_errors(damage, tiny_checkpoint, tmp_path):
    path = tmp_path / "damaged.ckpt"
    data = Path(tiny_checkpoint).read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00" * 1000)
    else:
        ckpt = read_checkpoint(tiny_checkpoint)
        del ckpt["state_dict"]
        torch.save(ckpt, path)
    with pytest.raises(ModelLoadError, match=r"damaged\.ckpt: (not a usable musictx checkpoint|no 'state_dict')"):
        load_checkpoint(path)


def test_a_shipped_model_exported_by_name_keeps_its_critic_and_says_its_card_stays(tmp_path):
    """``musictx-export pop DIR``: the shipped name is read as its folder; the critic that best_of chooses by goes with
    the weights (a model without it refuses best_of), and the model card, whose figures are the source weights', is
    left out in one line."""
    out = tmp_path / "pop_fp32"
    done = subprocess.run([sys.executable, "-m", "musictx.commands.export", "pop", str(out), "--dtype", "float32"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (out / CRITIC_FILE).is_file() and not (out / "README.md").exists()
    assert "model card" in done.stdout and "README.md" in done.stdout and "not copied" in done.stdout
    # every file, the weights too, readable as any file the user makes there (the umask's, not owner-only 0600)
    (out / "plain").write_text("")
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in out.iterdir()}
    assert set(modes.values()) == {modes.pop("plain")} and len(modes) >= 3, modes
    (out / "plain").unlink()
    net, _, _ = load_model(str(out))
    shipped, _, _ = load_model("pop")
    assert net.critic is not None and net.critic.names == shipped.critic.names
    assert np.array_equal(net.critic.coef, shipped.critic.coef) and net.critic.best_of == shipped.critic.best_of
    for path in out.iterdir():  # a folder holding a critic alone: an export would replace it
        if path.name != CRITIC_FILE:
            path.unlink()
    again = subprocess.run([sys.executable, "-m", "musictx.commands.export", "pop", str(out)], capture_output=True,
                           text=True)
    assert again.returncode != 0 and f"{CRITIC_FILE} already exists" in again.stderr


def test_an_export_says_the_dtype_and_size_it_stored_and_help_shows_the_defaults(tmp_path):
    """``musictx-export pop DIR`` said only "wrote DIR": not that it stored float16 (the default) nor how large; its
    --help showed no default. The line now says both, of the files written (a sharded export: how many)."""
    def export_lines(*args: str) -> list[str]:
        done = subprocess.run([sys.executable, "-m", "musictx.commands.export", *args], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    out = tmp_path / "pop"
    line = export_lines("pop", str(out))[0]
    size = (out / WEIGHTS_FILE).stat().st_size
    assert line == f"wrote {out}: float16 weights, {size / 2**20:.2f} MiB ({WEIGHTS_FILE})", line
    assert json.loads((out / CONFIG_FILE).read_text())["weights_dtype"] == "float16"
    cap = size / 3.5 / 2**20
    line = export_lines("pop", str(tmp_path / "shards"), "--dtype", "float32", "--max-shard-mb", f"{cap:.6f}")[0]
    listed = json.loads((tmp_path / "shards" / CONFIG_FILE).read_text())["weights_files"]
    size = sum((tmp_path / "shards" / name).stat().st_size for name in listed)
    assert line == f"wrote {tmp_path / 'shards'}: float32 weights, {size / 2**20:.2f} MiB ({len(listed)} files)", line
    shown = " ".join(" ".join(export_lines("--help")).split())
    assert "how the weights are stored (default: float16)" in shown, shown
    assert "many MiB each (default: one file)" in shown, shown


def test_a_text_file_given_as_a_checkpoint_and_a_file_as_the_output_folder_are_said_plainly(tmp_path):
    from musictx.commands.export import check_output
    from musictx.safe_output import OutputError

    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    with pytest.raises(ModelLoadError, match=r"notes.txt: a text file, not a checkpoint \(.ckpt\)"):
        read_checkpoint(notes)
    with pytest.raises(OutputError, match=r"output_dir=.*notes.txt: .*notes.txt is a file, not a folder"):
        check_output("pop", str(notes), overwrite=False)


@pytest.mark.parametrize("device", ["gpu", "cuda:7", 12])
def test_a_device_torch_cannot_use_is_named_not_blamed_on_the_file(device, tiny_checkpoint, tiny_folder):
    import torch

    if str(device).startswith("cuda") and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    for ref in (tiny_checkpoint, tiny_folder):  # torch.load's error was "not a usable musictx checkpoint"
        with pytest.raises(ModelLoadError, match=rf"^map_location={device!r}: no such device here.*use cpu, cuda"):
            load_model(ref, map_location=device)
    assert next(load_model(tiny_folder, map_location=torch.device("cpu"))[0].parameters()).device.type == "cpu"
