"""Reliability of generation, sampling and decoding on hostile inputs (issue 11, sections 3 and 4):
NaN / inf options, huge token bounds and seeds, output folders that are files or hold older samples,
seeds that open with silence, negative ids, zero-sized data options. Real files, real runs, real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pretty_midi
import pytest
import torch

from musictx.decoding.errors import GenerateError
from musictx.decoding.hooks.guard import NoteGrammarGuard
from musictx.decoding.sampling import generate
from musictx.decoding.sampling_options import SamplingOptions
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.jsonio import to_json
from musictx.io.midi_io import Notes
from musictx.io.piano_roll import plot_piano_roll
from musictx.io.tokenizer import EventTokenizer
from musictx.paths import PACKAGE_DIR, PRETRAINED_DIR
from musictx.tasks.seeds import drop_leading_silence, seed_from_midi
from musictx.training.data import MusicDataModule

from .gen_fixtures import fixture_seed_midi, fixture_tiny_checkpoint, tiny_net  # noqa: F401  (fixtures)

TOK = EventTokenizer()
LAY = TOK.layout
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}


def strict_json(text: str):
    """json.loads that fails on the bare NaN / Infinity that json.dumps writes by default."""
    def refuse(word):
        raise ValueError(f"not JSON: {word}")

    return json.loads(text, parse_constant=refuse)


def options(checkpoint, out: Path, **kwargs) -> GenerateOptions:
    base = dict(checkpoint=checkpoint and str(checkpoint), output_dir=str(out), num_samples=1, length_seconds=1.0,
                seed=3, audio=False)
    return GenerateOptions(**{**base, **kwargs})


def cli(module: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout,
                          env=ENV, cwd=ROOT)


def one_line_error(done: subprocess.CompletedProcess, command: str) -> str:
    """The run failed with one ``<command>: error: ...`` line and no traceback; return that line."""
    assert done.returncode != 0, done.stdout[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{command}: error: "), done.stderr[-3000:]
    return last


# ----- 1. NaN and inf options ----------------------------------------------------------------------------
@pytest.mark.parametrize(("option", "value"), [
    ("temperature", float("nan")), ("temperature", float("inf")), ("top_p", float("nan")),
    ("length_seconds", float("nan")), ("length_seconds", float("inf")), ("seed_seconds", float("inf")),
    ("hooks.guard.max_note_seconds", float("inf")), ("max_tokens", 1.5), ("num_samples", float("nan")),
])
def test_non_finite_or_fractional_options_are_named(option, value, tmp_path):
    out = tmp_path / "out"
    *groups, name = option.split(".")
    for group in reversed(groups):  # a hook's option, hooks.NAME.FIELD, given as nested dicts
        name, value = group, {name: value}
    with pytest.raises(GenerateError, match=rf"^{option} must be"):
        run(options("no_such_model", out, **{name: value}))  # refused before the model is looked up
    assert not out.exists()


def test_cli_temperature_nan_is_one_clear_line(tmp_path):
    done = cli("musictx.commands.generate", "temperature=nan", f"hydra.run.dir={tmp_path / 'run'}")
    assert "temperature must be a finite number, got nan" in one_line_error(done, "musictx-generate")
    assert not (tmp_path / "run").exists()


def test_records_are_strict_json():
    text, found = to_json({"nll": {"nll": float("nan"), "ppl": float("inf")}, "ok": [1.0, np.float32("-inf")]})
    assert strict_json(text) == {"nll": {"nll": None, "ppl": None}, "ok": [1.0, None]}
    assert found == ["nll.nll", "nll.ppl", "ok[1]"]


# ----- 3. huge bounds and huge seeds ---------------------------------------------------------------------
def test_ids_buffer_grows_and_both_paths_still_agree():
    # 1100 new ids cross the first buffer size (1024): the uncached path reads its windows from the grown
    # buffer, the cached one keeps its own state, so a copy that lost ids would make them differ.
    net = tiny_net("music_transformer", max_seq_len=16)
    prompt = torch.tensor([[LAY.velocity + 15, 60, LAY.time_shift + 20]] * 2)
    runs = [generate(net, None, prompt, SamplingOptions(seed=4, top_p=None, use_cache=cached,
                                                        hooks={"recall_guidance": {"strength": 0.0}}),
                     max_new_tokens=1100) for cached in (True, False)]
    assert runs[0].shape == (2, 3 + 1100) and torch.equal(runs[0], runs[1])
    assert torch.equal(runs[0][:, :3], prompt)


MEMORY_PROBE = """
import resource, sys, torch
from musictx.models import build_model
from musictx.decoding.hook import StopRule
from musictx.decoding.sampling import SpecialIds, generate
from musictx.decoding.sampling_options import SamplingOptions
net = build_model("lstm", 390, d_model=16, hidden_size=16, n_layers=1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
class AfterFive(StopRule):
    calls = 0
    def finished(self, ids):
        self.calls += 1
        return torch.full_like(ids, self.calls >= 5, dtype=torch.bool)
ids = generate(net, SpecialIds(pad_id=388), torch.tensor([[60, 300]]), SamplingOptions(), [AfterFive()],
               max_new_tokens=10**8)
unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
print(ids.shape[1], (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * unit // 2**20)
"""


def test_huge_max_tokens_allocates_only_what_is_generated():
    # A buffer for 10**8 int64 ids would be 800 MB; five ids are generated.
    done = subprocess.run([sys.executable, "-c", MEMORY_PROBE], capture_output=True,
                          text=True, timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    length, grown_mb = map(int, done.stdout.split())
    assert length == 2 + 5 and grown_mb < 100, f"peak memory grew by {grown_mb} MB"


def test_piano_roll_of_many_notes_is_fast(tmp_path):
    n = 200_000  # a patch per note took ~1 ms each (minutes here, 15+ min for 1 M notes)
    rng = np.random.default_rng(0)
    start = np.sort(rng.uniform(0, n / 10, n))
    notes = Notes(start, start + rng.uniform(0.05, 1.0, n), rng.integers(21, 109, n), rng.integers(1, 128, n))
    t0 = time.perf_counter()
    png = plot_piano_roll(notes, tmp_path / "roll.png", takeover=100.0)
    assert time.perf_counter() - t0 < 60 and png.read_bytes()[:4] == b"\x89PNG"


def test_guard_follows_a_million_id_prompt_in_seconds():
    # An id-by-id loop over the prompt took minutes; tests/test_guard.py checks the state is the same.
    prompt = torch.from_numpy(np.random.default_rng(1).integers(0, LAY.velocity, (2, 1_000_000)))
    guard = NoteGrammarGuard.of(TOK, 5.0)
    t0 = time.perf_counter()
    guard.start(prompt)
    assert time.perf_counter() - t0 < 20
    is_shift = prompt >= LAY.time_shift
    assert guard.now.tolist() == torch.where(is_shift, prompt - LAY.time_shift + 1, 0).sum(dim=1).tolist()


# ----- 4. output folders ---------------------------------------------------------------------------------
def test_output_dir_that_is_a_file_fails_before_anything(tmp_path):
    blocker = tmp_path / "out.txt"
    blocker.write_text("keep me")
    for out in (blocker, blocker / "sub"):
        with pytest.raises(GenerateError, match=r"output_dir=.*out\.txt.*a file, not a folder"):
            run(options("no_such_model", out))  # before the model: the checkpoint is not even looked up
    assert blocker.read_text() == "keep me"


def test_reused_output_dir_keeps_every_earlier_file(tiny_checkpoint, tmp_path):
    out = tmp_path / "out"
    run(options(tiny_checkpoint, out, num_samples=3))
    for name in ("sample_01.wav", "sample_07.png"):  # as an earlier run with audio / more samples left them
        (out / name).write_bytes(b"old")
    for name in ("sample_notes.txt", "sample_1.mid", "my_sample_00.mid"):  # the user's
        (out / name).write_text("user file")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    record = run(options(tiny_checkpoint, out, num_samples=1))
    listed = {record["samples"][0][k] for k in ("midi", "png")}
    assert listed == {"sample_08.mid", "sample_08.png"}  # after the highest number there
    assert sorted(p.name for p in out.iterdir()) == sorted([*before, *listed, "generation_2.json"])
    assert all((out / name).read_bytes() == data for name, data in before.items())
    assert strict_json((out / "generation_2.json").read_text())["samples"] == record["samples"]


def _inside_package(tmp_path: Path) -> dict[str, Path]:
    link = tmp_path / "looks_like_mine"
    link.symlink_to(PRETRAINED_DIR)  # a folder of the user's that is the package's in truth
    return {"beside the shipped model": PRETRAINED_DIR / "piano", "a new folder in conf/": PACKAGE_DIR / "conf" / "out",
            "a link into the package": link / "piano"}


def _package_files() -> dict[str, int | None]:
    """Every path in the package with its file's mtime. A folder's own mtime is left out (None): Python
    writing bytecode into a folder's __pycache__, as another test worker may at any moment, touches it."""
    return {str(p): (p.stat().st_mtime_ns if p.is_file() else None)
            for p in PACKAGE_DIR.rglob("*") if "__pycache__" not in p.parts}


@pytest.mark.parametrize("case", ["beside the shipped model", "a new folder in conf/", "a link into the package"])
def test_output_dir_inside_the_installed_package_is_refused(case, tmp_path):
    out = _inside_package(tmp_path)[case]
    before = _package_files()
    with pytest.raises(GenerateError, match=r"^output_dir=.*: inside the installed musictx package \("):
        run(options("no_such_model", out))  # before the model: the checkpoint is not even looked up
    assert _package_files() == before


def test_cli_output_dir_inside_the_package_is_one_line_and_writes_nothing(tmp_path):
    before = _package_files()
    done = cli("musictx.commands.generate", f"output_dir={PRETRAINED_DIR / 'piano'}", "num_samples=1",
               "length_seconds=1", f"hydra.run.dir={tmp_path / 'run'}")
    assert one_line_error(done, "musictx-generate") == (
        f"musictx-generate: error: output_dir={PRETRAINED_DIR / 'piano'}: inside the installed musictx package "
        f"({PACKAGE_DIR}); choose a folder of your own")
    assert _package_files() == before and not (tmp_path / "run").exists()


# ----- 5. seeds that open with silence -------------------------------------------------------------------
def late_midi(path: Path, first: float = 5.0) -> Path:
    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(program=0)
    inst.notes += [pretty_midi.Note(velocity=80, pitch=60 + k, start=first + 0.5 * k, end=first + 0.5 * k + 0.4)
                   for k in range(8)]
    pm.instruments.append(inst)
    pm.write(str(path))
    return path


def test_seed_counts_from_its_first_note(tiny_checkpoint, tmp_path):
    path = late_midi(tmp_path / "late.mid", first=5.0)
    seed = seed_from_midi(TOK, path, seed_seconds=2.0)
    assert seed.silence_dropped == pytest.approx(5.0) and seed.seconds == pytest.approx(2.0)
    assert TOK.decode_notes(seed.ids).start.tolist() == pytest.approx([0.0, 0.5, 1.0, 1.5])
    record = run(options(tiny_checkpoint, tmp_path / "out", seed_midi=str(path), seed_seconds=2.0))
    assert record["seed"]["silence_dropped_seconds"] == pytest.approx(5.0)
    out = TOK.read(tmp_path / "out" / "sample_00.mid")
    assert out.start.min() == pytest.approx(0.0, abs=1e-6) and 60 in out.pitch[out.start < 2.0].tolist()


def test_drop_leading_silence_keeps_the_first_velocity():
    ids = TOK.with_time_shifts(np.array([250, 300]), np.array([60, LAY.note_off + 60]),
                               np.array([True, False]), np.array([LAY.velocity + 19, 0]))
    trimmed, steps = drop_leading_silence(TOK, ids)
    assert steps == 250 and trimmed.tolist() == [LAY.velocity + 19, 60, LAY.time_shift + 49, LAY.note_off + 60]
    assert drop_leading_silence(TOK, trimmed)[1] == 0


# ----- 6. and 7. negative ids, zero-sized data options ---------------------------------------------------
@pytest.mark.parametrize(("ids", "message"), [
    ([60, 300, -1, 188], r"id -1 at position 2 outside the vocabulary"),
    ([-128], r"id -128 at position 0"),
    ([60, 390], r"id 390 at position 1 outside the vocabulary of size 390"),
])
def test_decode_refuses_ids_outside_the_vocabulary(ids, message):
    for decode in (TOK.decode_notes, TOK.decode):
        with pytest.raises(ValueError, match=message):
            decode(ids)
    assert len(TOK.decode_notes([60, 300, LAY.eos, -5])) == 1  # after EOS nothing is read


@pytest.mark.parametrize(("option", "value"), [("seq_len", 0), ("seq_len", -4), ("batch_size", 0),
                                               ("val_batch_size", -1), ("epoch_windows", 0), ("num_workers", -1)])
def test_data_options_out_of_range_are_named(option, value, prepared_dir):
    with pytest.raises(ValueError, match=rf"data\.{option} must be a whole number >= \d, got {value}"):
        MusicDataModule(prepared_dir, **{option: value})

