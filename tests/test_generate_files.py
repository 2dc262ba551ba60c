"""What ``musictx-generate`` does to the files around it and says about its seed: a run never deletes or
overwrites a file it did not write (continuing a result in its own folder keeps the seed, the user's files
and the earlier record), a folder or a pipe given as the seed is named as such, ``num_samples`` has a bound,
``seed_from`` starts the seed mid-file, and one line says which tracks were merged into the piano stream and
what was dropped. The model is a tiny random net saved as a model folder (nothing is trained)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pretty_midi
import pytest

from musictx.checkpoints.model_store import save_model_folder
from musictx.decoding.errors import GenerateError
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.generation.output_folder import Claims
from musictx.io.tokenizer import EventTokenizer
from musictx.tasks.seeds import seed_from_midi

from .gen_fixtures import tiny_net

TOK = EventTokenizer()
PROG = "musictx-generate"


@pytest.fixture(name="model_dir", scope="module")
def fixture_model_dir(tmp_path_factory) -> Path:
    net = tiny_net("music_transformer", max_seq_len=64)
    return save_model_folder(net, EventTokenizer(), tmp_path_factory.mktemp("tiny_model"), dtype="float32")


def options(model_dir: Path, out: Path, **kwargs) -> GenerateOptions:
    base = dict(checkpoint=str(model_dir), output_dir=str(out), num_samples=1, length_seconds=1.0, seed=3,
                audio=False, threads=1, progress_every_s=None)
    return GenerateOptions(**{**base, **kwargs})


def motif(path: Path, first_pitch: int = 60, notes: int = 8) -> Path:
    """A one-track piano file: a note every 0.5 s from 0 s, each 0.4 s long."""
    pm = pretty_midi.PrettyMIDI()
    piano = pretty_midi.Instrument(program=0)
    piano.notes += [pretty_midi.Note(80, first_pitch + k, 0.5 * k, 0.5 * k + 0.4) for k in range(notes)]
    pm.instruments.append(piano)
    pm.write(str(path))
    return path


def console(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / PROG
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "musictx.commands.generate"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


# ----- the output folder only grows ----------------------------------------------------------------------
def test_continuing_a_result_in_its_own_folder_keeps_every_file(model_dir, tmp_path):
    out = tmp_path / "D"
    run(options(model_dir, out, num_samples=2))  # sample_00, sample_01, generation.json
    seed = motif(out / "sample_03.mid")  # a result copied back in, to be continued in place
    motif(out / "sample_07.mid", first_pitch=40)  # the user's own file
    before = contents(out)
    done = console(f"checkpoint={model_dir}", f"seed_midi={seed}", f"output_dir={out}", "num_samples=1",
                   "length_seconds=1", "audio=false", f"hydra.run.dir={tmp_path / 'hydra'}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    after = contents(out)
    assert {name: after.get(name) for name in before} == before, "a file the run did not write was changed"
    assert sorted(set(after) - set(before)) == ["generation_2.json", "sample_08.mid", "sample_08.png"]
    lines = done.stdout.splitlines()
    assert (f"{out} already holds earlier files: this run writes sample_08 and generation_2.json beside them "
            "(nothing there is replaced or removed)") in lines
    assert f"wrote 1 sample(s) and generation_2.json to {out.resolve()}" in lines
    assert not [line for line in lines if line.startswith("removed")]
    record = json.loads(after["generation_2.json"])
    assert [s["midi"] for s in record["samples"]] == ["sample_08.mid"]
    assert record["seed"]["midi"] == str(seed.resolve())


def test_runs_into_one_folder_add_numbers_and_records(model_dir, tmp_path, capsys):
    out = tmp_path / "out"
    first = run(options(model_dir, out, num_samples=2))
    assert "already holds" not in capsys.readouterr().out  # a fresh folder: nothing to say
    (out / "sample_04_notes.txt").write_text("mine")  # any name that starts like a sample's counts
    second = run(options(model_dir, out, num_samples=2))
    third = run(options(model_dir, out, num_samples=1))
    assert [s["midi"] for s in first["samples"]] == ["sample_00.mid", "sample_01.mid"]
    assert [s["midi"] for s in second["samples"]] == ["sample_05.mid", "sample_06.mid"]
    assert [s["midi"] for s in third["samples"]] == ["sample_07.mid"]
    for name, record in [("generation.json", first), ("generation_2.json", second), ("generation_3.json", third)]:
        assert json.loads((out / name).read_text())["samples"] == record["samples"]
    assert (out / "sample_04_notes.txt").read_text() == "mine"


def test_names_taken_by_links_or_folders_are_skipped_not_followed(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / "generation.json").symlink_to(target)
    (out / "sample_00.mid").symlink_to(tmp_path / "missing.mid")  # a dangling link still holds its name
    (out / "sample_01").mkdir()
    claims = Claims(out, 2)
    assert claims.numbers == [2, 3]
    assert claims.record.name == "generation_2.json"
    assert target.read_text() == "keep" and not (tmp_path / "missing.mid").exists()


# ----- what seed_midi names, and num_samples ----------------------------------------------------------
def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def folder(path: Path) -> Path:
    path.mkdir()
    return path


NOT_FILES = {
    "folder": (folder, "is a folder, not a MIDI file"),
    "named pipe": (fifo, r"not a regular file \(a named pipe\), so not a MIDI file"),
    "device": (lambda _: Path("/dev/zero"), r"not a regular file \(a device\), so not a MIDI file"),
}


@pytest.mark.parametrize("case", list(NOT_FILES))
def test_a_seed_that_is_not_a_file_is_named_for_what_it_is(case, tmp_path):
    make, reason = NOT_FILES[case]
    seed = make(tmp_path / "seed.mid")
    with pytest.raises(GenerateError, match=rf"^seed_midi={seed}: {reason}$"):
        run(options("no_such_model", tmp_path / "out", seed_midi=str(seed)))  # before the model is looked up
    assert not (tmp_path / "out").exists()


def test_the_console_says_a_pipe_is_a_pipe_without_waiting_on_it(tmp_path):
    pipe = fifo(tmp_path / "live.mid")
    done = console(f"seed_midi={pipe}", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"{PROG}: error: seed_midi={pipe}: not a regular file (a named pipe), so not a MIDI file")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("count", [65, 100000])
def test_num_samples_past_the_bound_is_refused_with_the_number(count, tmp_path):
    with pytest.raises(GenerateError, match=rf"^num_samples must be in 1\.\.64 \(they are generated as one "
                                            rf"batch\), got {count}$"):
        run(options("no_such_model", tmp_path / "out", num_samples=count))
    GenerateOptions(output_dir=str(tmp_path / "out"), num_samples=64).check()  # the bound itself is fine


# ----- seed_from ----------------------------------------------------------------------------------------
def test_seed_from_starts_the_seed_at_the_first_note_from_there(tmp_path):
    path = motif(tmp_path / "motif.mid")  # notes at 0, 0.5, ..., 3.5 s
    seed = seed_from_midi(TOK, path, seed_seconds=1.0, seed_from=1.3)
    assert seed.silence_dropped == pytest.approx(1.5) and seed.seconds == pytest.approx(1.0)
    notes = TOK.decode_notes(seed.ids)
    assert notes.start.tolist() == pytest.approx([0.0, 0.5]) and notes.pitch.tolist() == [63, 64]
    whole = seed_from_midi(TOK, path, seed_from=1.5)  # a note on seed_from is in
    assert whole.silence_dropped == pytest.approx(1.5) and TOK.decode_notes(whole.ids).pitch.tolist() == [
        63, 64, 65, 66, 67]
    assert np.array_equal(seed_from_midi(TOK, path, seed_from=0).ids, seed_from_midi(TOK, path).ids)


SEED_FROM_ERRORS = {
    "past the last note": (dict(seed_from=3.6),
                           r"no note starts at or after seed_from=3.6 s \(its last note starts at 3.50 s\); "
                           r"lower seed_from\.$"),
    "negative": (dict(seed_from=-1.0), r"^seed_from must be >= 0 \(seconds into the seed file\), got -1.0$"),
    "without a seed": (dict(seed_from=2.0, seed_midi=None), r"^seed_from=2 needs a seed_midi to start in$"),
}


@pytest.mark.parametrize("case", list(SEED_FROM_ERRORS))
def test_bad_seed_from_is_refused(case, model_dir, tmp_path):
    kwargs, message = SEED_FROM_ERRORS[case]
    kwargs = {"seed_midi": str(motif(tmp_path / "motif.mid")), **kwargs}
    with pytest.raises(GenerateError, match=message):
        run(options(model_dir, tmp_path / "out", **kwargs))
    assert not (tmp_path / "out").exists()


# ----- which tracks became the piano stream -------------------------------------------------------------
def band(path: Path) -> Path:
    """Flute melody, string pad and piano (12 notes in all) and a drum kit of 412 hits."""
    pm = pretty_midi.PrettyMIDI()
    for name, program, pitches in [("melody", 73, [72, 74, 76, 77]), ("bridge", 48, [55, 57, 59]),
                                   ("piano", 0, [48, 52, 55, 60, 64])]:
        inst = pretty_midi.Instrument(program=program, name=name)
        inst.notes += [pretty_midi.Note(90, p, 0.5 * k, 0.5 * k + 0.45) for k, p in enumerate(pitches)]
        pm.instruments.append(inst)
    kit = pretty_midi.Instrument(program=0, is_drum=True, name="kit")
    kit.notes += [pretty_midi.Note(100, 36, 0.05 * k, 0.05 * k + 0.03) for k in range(412)]
    pm.instruments.append(kit)
    pm.write(str(path))
    return path


BAND_LINE = ("band.mid: merged 3 tracks (melody [Flute], bridge [String Ensemble 1], piano; 12 notes) into one "
             "piano stream; dropped 1 drum track (kit, 412 notes)")


def test_the_console_says_which_tracks_were_merged_and_what_was_dropped(model_dir, tmp_path):
    seed = band(tmp_path / "band.mid")
    done = console(f"checkpoint={model_dir}", f"seed_midi={seed}", "num_samples=1", "length_seconds=1",
                   "audio=false", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert BAND_LINE in done.stdout.splitlines()
    record = json.loads((tmp_path / "run" / "generation.json").read_text())
    assert record["seed"]["tracks"] == BAND_LINE


def test_a_single_piano_track_is_said_to_be_read_as_it_is(model_dir, tmp_path, capsys):
    record = run(options(model_dir, tmp_path / "out", seed_midi=str(motif(tmp_path / "motif.mid"))))
    line = "motif.mid: 1 track (Acoustic Grand Piano, 8 notes) read as one piano stream; nothing dropped"
    assert line in capsys.readouterr().out.splitlines() and record["seed"]["tracks"] == line
