"""Fuzz: every command over ../shared/data/edge/ and over hostile files made here (a tempo of 0, a 2-hour
melody, bad lab files, a FIFO, a folder, a link into /etc, a song without chords or melody, a truncated
song). Each run must end with exit status 0, or 1 with exactly one ``<prog>: error: ...`` line, never a
traceback, and leave nothing behind: no output folder of a refused run, no Hydra folder in the working
folder, no empty or hidden temporary file. A ``kill -9`` while samples are written leaves no empty or partial
file, and the next run in that folder sweeps what the killed one left.

The runs go through tests/fuzz_runner.py, one process per command (imports and models loaded once); the
whole file takes about a minute on one busy core. Every edge file goes through the song-by-song commands
(the accompaniment scorecard, the harmonizer trainer, export); ``musictx-generate`` and ``musictx-attention``,
which sample or draw for every file they can read, take every unreadable file and every twentieth readable one
here, and all of them in the slow test at the end.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import mido
import numpy as np
import pytest

from musictx.io.token_store import write_split

from .helpers import EDGE_DIR, SHARED_DATA, needs_shared

pytestmark = needs_shared
REPO = Path(__file__).resolve().parents[1]
POP = SHARED_DATA / "pop" / "POP909"
RUNNER = Path(__file__).with_name("fuzz_runner.py")
GENERATE, EVALUATE = "musictx.commands.generate", "musictx.commands.evaluate"
ATTENTION = "musictx.commands.show_attention"
QUICK = ["num_samples=1", "audio=false", "progress_every_s=null"]


def edge_files() -> list[Path]:
    return sorted(p for p in EDGE_DIR.rglob("*") if p.suffix.lower() in (".mid", ".midi"))


def unreadable() -> set[str]:
    """The edge files pretty_midi cannot parse (EDGE_NOTES.tsv)."""
    with open(EDGE_DIR / "EDGE_NOTES.tsv", newline="") as f:
        return {row["file"] for row in csv.DictReader(f, delimiter="\t") if row["pretty_midi_ok"] != "True"}


def some_edge_files() -> list[Path]:
    """Every unreadable edge file and every twentieth readable one: the default suite's share of the sampling runs."""
    bad = unreadable()
    readable = [p for p in edge_files() if str(p.relative_to(EDGE_DIR)) not in bad]
    return [p for p in edge_files() if str(p.relative_to(EDGE_DIR)) in bad] + readable[::20]


def run_batch(module: str, prog: str, argvs: list[list[str]], cwd: Path, timeout: float = 600) -> list[dict]:
    """Each argv run by ``module``'s main() in one process (tests/fuzz_runner.py), from ``cwd``."""
    cases = cwd / "cases.json"
    cases.write_text(json.dumps([{"module": module, "prog": prog, "argv": a} for a in argvs]))
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
    env.pop("MUSICTX_DEBUG", None)
    done = subprocess.run([sys.executable, str(RUNNER), str(cases)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    cases.unlink()
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(argvs), done.stderr[-3000:]
    return results


def assert_one_line(result: dict, prog: str) -> None:
    """Status 0, or 1 (130: Ctrl-C) with one ``<prog>: error:`` line; no traceback either way."""
    said = result["stdout"] + result["stderr"]
    assert result["status"] in (0, 1), (result["argv"], result["status"], said[-3000:])
    assert "Traceback" not in said and "Error executing job" not in said, (result["argv"], said[-3000:])
    assert "MUSICTX_DEBUG" not in said, (result["argv"], said[-2000:])  # an error no check foresaw
    if result["status"] == 1:
        lines = [line for line in result["stderr"].splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith(f"{prog}: error: ")]
        assert len(errors) == 1 and errors[0] == lines[-1], (result["argv"], lines[-5:])


def assert_nothing_left(folder: Path, refused: bool) -> None:
    """A refused run's folder is not there; a finished one holds no empty file and no hidden temporary."""
    if refused:
        assert not folder.exists(), sorted(p.name for p in folder.iterdir())
        return
    for path in folder.rglob("*"):
        assert not path.name.startswith("."), path
        assert not path.is_file() or path.stat().st_size > 0, path


def check_all(results: list[dict], prog: str, outputs: list[Path], cwd: Path) -> None:
    for result, out in zip(results, outputs, strict=True):
        assert_one_line(result, prog)
        assert_nothing_left(out, refused=result["status"] != 0)
    assert not (cwd / "outputs").exists(), "Hydra made a run folder in the working folder"


# ----- hostile files made here -----------------------------------------------------------------------
def tempo_zero(path: Path) -> Path:
    """POP909 song 003's melody with every set_tempo 0 (pretty_midi divides by it)."""
    src = mido.MidiFile(POP / "003" / "003.mid")
    out = mido.MidiFile(ticks_per_beat=src.ticks_per_beat)
    for track in src.tracks[:2]:
        out.tracks.append(mido.MidiTrack(m.copy(tempo=0) if m.type == "set_tempo" else m for m in track))
    out.save(path)
    return path


def long_melody(path: Path, hours: float = 2.0) -> Path:
    """A MELODY track of one note a beat at 120 bpm for ``hours``."""
    out = mido.MidiFile(ticks_per_beat=480)
    track = mido.MidiTrack([mido.MetaMessage("track_name", name="MELODY"),
                            mido.MetaMessage("set_tempo", tempo=500_000)])
    for i in range(int(hours * 7200)):
        pitch = 60 + (0, 2, 4, 5, 7, 5, 4, 2)[i % 8]
        track += [mido.Message("note_on", note=pitch, velocity=80), mido.Message("note_off", note=pitch, time=480)]
    out.tracks.append(track)
    out.save(path)
    return path


def hostile_files(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {"tempo0": tempo_zero(folder / "tempo0.mid"), "long": long_melody(folder / "melody_2h.mid")}
    for name, text in {"overlap": "0 2 C:maj\n1 3 G:maj\n", "far": "0 1e12 C:maj\n", "bad": "0 1 Q:maj\n",
                       "empty": ""}.items():
        (folder / f"{name}.lab").write_text(text)
        files[f"lab_{name}"] = folder / f"{name}.lab"
    os.mkfifo(folder / "fifo.mid")
    os.mkfifo(folder / "fifo.lab")
    (folder / "folder.mid").mkdir()
    (folder / "etc").symlink_to("/etc")
    files.update(fifo=folder / "fifo.mid", fifo_lab=folder / "fifo.lab", folder=folder / "folder.mid",
                 etc=folder / "etc")
    return files


# ----- musictx-generate -------------------------------------------------------------------------------
@pytest.mark.slow  # 35-80 s of subprocesses on a Zen 3; make test-all runs it
def test_generate_over_edge_and_hostile_files(tmp_path):
    files = hostile_files(tmp_path / "in")
    seeds = some_edge_files()
    argvs, outs = [], []

    def case(*args: str, out: Path | None = None) -> None:
        outs.append(tmp_path / f"out{len(outs)}")
        argvs.append([*args, f"output_dir={out or outs[-1]}", *QUICK])

    for seed in seeds:
        case(f"seed_midi={seed}", "length_seconds=1", "max_tokens=32")
    for seed in seeds[:: max(len(seeds) // 4, 1)]:
        case("task=accompany", f"seed_midi={seed}", "bars=1-1")
    case("task=accompany", f"seed_midi={files['tempo0']}", "bars=1-1")  # runs: the zero tempos left out
    case("task=infill", f"seed_midi={files['tempo0']}", "bars=1-1", "checkpoint=pop_infill")
    case("task=accompany", f"seed_midi={files['long']}")  # 3600 bars: refused, naming the bound
    for name in ("lab_overlap", "lab_far", "lab_bad", "lab_empty", "fifo_lab", "folder"):
        case("task=accompany", f"seed_midi={files['tempo0']}", f"chords={files[name]}")
    for name in ("fifo", "folder"):
        case(f"seed_midi={files[name]}")
    case(f"seed_midi={REPO / 'musictx/assets/motif.mid'}", "length_seconds=1",
         out=files["etc"] / "musictx-out")  # through a link into /etc: refused
    results = run_batch(GENERATE, "musictx-generate", argvs, tmp_path)
    check_all(results, "musictx-generate", outs, tmp_path)
    said = {" ".join(r["argv"]): r for r in results}

    def run_of(*words: str) -> dict:
        return next(r for k, r in said.items() if all(w in k for w in words))

    assert run_of("task=accompany", f"seed_midi={files['tempo0']}", "bars=1-1")["status"] == 0
    assert run_of("task=infill", f"seed_midi={files['tempo0']}")["status"] == 0
    assert "3600 bars" in run_of(str(files["long"]))["stderr"]
    assert "overlap" in run_of("overlap.lab")["stderr"] and "FIFO" in run_of("fifo.lab")["stderr"]
    assert "folder" in run_of("chords=" + str(files["folder"]))["stderr"]
    assert "system folder /etc" in run_of("musictx-out")["stderr"] and not Path("/etc/musictx-out").exists()


# ----- musictx-evaluate (the song-by-song modes) and the harmonizer trainer ---------------------------------
def song_split(tmp_path: Path, extra: list[Path]) -> Path:
    """A prepared-looking folder whose splits list two POP909 songs, a truncated song, one without its chord
    file, one without its melody, and ``extra`` (edge files), all under one input folder."""
    import symusic

    from musictx.checkpoints.model_store import load_model

    songs = tmp_path / "songs"
    for name, source in (("003", "003"), ("006", "006"), ("900", "008"), ("901", "010"), ("902", "012")):
        shutil.copytree(POP / source, songs / name, ignore=shutil.ignore_patterns("versions"))
        (songs / name / f"{source}.mid").rename(songs / name / f"{name}.mid")
    cut = songs / "900" / "900.mid"
    cut.write_bytes(cut.read_bytes()[:3000])
    (songs / "901" / "chord_midi.txt").unlink()
    score = symusic.Score(str(songs / "902" / "902.mid"))
    score.tracks = [t for t in score.tracks if t.name.upper() != "MELODY"]
    score.dump_midi(str(songs / "902" / "902.mid"))
    (songs / "edge").symlink_to(EDGE_DIR)
    names = [f"{n}/{n}.mid" for n in ("003", "900", "901", "902", "006")] + \
        [f"edge/{p.relative_to(EDGE_DIR)}" for p in extra] + ["gone/gone.mid"]
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "validation", "test"):
        write_split(data, split, [np.array([1, 2, 3])] * len(names), names)
    load_model("pop")[1].save(data / "tokenizer.json")
    (data / "manifest.json").write_text(json.dumps({"input_dir": str(songs), "splits": {}}))
    return data


@pytest.mark.slow  # 12-25 s of subprocesses on a Zen 3; make test-all runs it
def test_evaluate_and_harmonizer_skip_each_bad_song_and_refuse_bad_options(tmp_path):
    data = song_split(tmp_path, edge_files())
    n_songs = len((data / "test.files.txt").read_text().splitlines())
    base = [f"data.dir={data}", "checkpoint=pop_infill", "progress=false"]
    refusals = [["mode=infill", "infill.bars=0"], ["mode=infill", "infill.bars=-2"],
                ["mode=infill", "infill.max_songs=0"],
                ["mode=accompany", "infill.seconds=-5"], ["mode=infill", "infill.first_bar=100000"],
                ["mode=infill", "infill.first_bar=0"], ["mode=accompany", "infill.accompany_from=middle"],
                ["mode=accompany", "infill.accompany_scheme=foo"], ["mode=infill", "checkpoint=pop"],
                ["mode=infill", "checkpoint=piano"], ["mode=accompany", "checkpoint=piano"],
                ["mode=continuation", "scorecard.max_songs=0"], ["mode=accompany", "output_dir=/etc/musictx"]]
    argvs = [[*base, *r, f"output_dir={tmp_path / f'e{k}'}"] if not any("output_dir" in a for a in r)
             else [*base, *r] for k, r in enumerate(refusals)]
    whole = tmp_path / "whole"
    argvs.append([*base, "mode=accompany", "infill.seconds=4", "infill.accompany_chords=true", f"output_dir={whole}"])
    results = run_batch(EVALUATE, "musictx-evaluate", argvs, tmp_path)
    for result, option in zip(results, refusals, strict=False):
        assert_one_line(result, "musictx-evaluate")
        assert result["status"] == 1 and option[-1].split("=")[0] in result["stderr"], (option, result["stderr"])
    assert not [p for p in tmp_path.glob("e*")] and not (tmp_path / "outputs").exists()
    assert_one_line(results[-1], "musictx-evaluate")
    assert results[-1]["status"] == 0, results[-1]["stderr"][-2000:]
    skipped = (whole / "skipped.tsv").read_text().splitlines()[1:]
    used = json.loads((whole / "metrics.json").read_text())["task_scorecard"]["songs"]
    assert len(skipped) + len(used) == n_songs and len(used) >= 2  # every song used or skipped, with a reason
    reasons = dict(line.split("\t") for line in skipped)
    assert "chord_midi.txt" in reasons[str(tmp_path / "songs/901/901.mid")]
    assert "not found" in reasons[str(tmp_path / "songs/gone/gone.mid")] or "no such file" in \
        reasons[str(tmp_path / "songs/gone/gone.mid")]
    assert sorted(p.name for p in whole.iterdir()) == ["evaluate_config.yaml", "metrics.json", "skipped.tsv"]

    out = tmp_path / "h" / "w.npz"
    missing, trained, again = run_batch("musictx.commands.harmonizer", "python -m musictx.commands.harmonizer", [
        ["--data", str(tmp_path / "nope"), "--out", str(out)], ["--data", str(data), "--out", str(out)],
        ["--data", str(data), "--out", str(out)]], tmp_path)
    for result in (missing, trained, again):
        assert_one_line(result, "python -m musictx.commands.harmonizer")
    assert missing["status"] == 1 and "--data" in missing["stderr"]
    assert trained["status"] == 0 and "skipped" in trained["stdout"] + trained["stderr"] and out.stat().st_size > 0
    assert again["status"] == 1 and "--overwrite" in again["stderr"] and "overwrite=true" not in again["stderr"]


# ----- musictx-attention and musictx-export ---------------------------------------------------------------------
@pytest.mark.slow  # 35-80 s of subprocesses on a Zen 3; make test-all runs it
def test_attention_and_export_over_edge_files(tmp_path):
    bad = unreadable()
    seeds = [p for p in some_edge_files() if str(p.relative_to(EDGE_DIR)) in bad] + some_edge_files()[-2:]
    outs = [tmp_path / f"a{k}" / "arcs.png" for k in range(len(seeds))]
    argvs = [[f"midi={s}", f"output={o}"] for s, o in zip(seeds, outs, strict=True)]
    results = run_batch(ATTENTION, "musictx-attention", argvs, tmp_path)
    for result, out in zip(results, outs, strict=True):
        assert_one_line(result, "musictx-attention")
        assert_nothing_left(out.parent, refused=result["status"] != 0)
    assert not (tmp_path / "outputs").exists()
    exports = [[str(p), str(tmp_path / f"x{k}")] for k, p in enumerate(edge_files()[::8])]
    results = run_batch("musictx.commands.export", "musictx-export", exports, tmp_path)
    for result, (_, out) in zip(results, exports, strict=True):
        assert_one_line(result, "musictx-export")
        assert result["status"] == 1 and not Path(out).exists()


# ----- kill -9 while a run writes --------------------------------------------------------------------------
@pytest.mark.slow  # 6-24 s of real processes; in `make test-all` (the fast suite stays under 10 min)
def test_kill_9_while_writing_leaves_no_empty_or_partial_file(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "musictx.commands.generate", "task=infill", "checkpoint=pop_infill",
           f"seed_midi={POP / '003' / '003.mid'}", "bars=9-9", "audio=false", f"output_dir={out}"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([*cmd, "num_samples=4"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while proc.poll() is None and not (out / "sample_01.png").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    visible = [p for p in out.iterdir() if not p.name.startswith(".")]
    assert visible and all(p.stat().st_size > 0 for p in visible), [(p.name, p.stat().st_size) for p in visible]
    assert not (out / "generation.json").exists() or json.loads((out / "generation.json").read_text())
    again = subprocess.run([*cmd, "num_samples=1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    left = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert not left, left  # the killed run's claims and temporaries were swept
    if any(p for p in visible if p.suffix == ".mid"):
        assert "already holds earlier files" in again.stdout


@pytest.mark.slow
def test_generate_over_every_edge_file(tmp_path):
    seeds = edge_files()
    outs = [tmp_path / f"g{k}" for k in range(len(seeds))]
    argvs = [[f"seed_midi={s}", f"output_dir={o}", "length_seconds=1", "max_tokens=32", *QUICK]
             for s, o in zip(seeds, outs, strict=True)]
    check_all(run_batch(GENERATE, "musictx-generate", argvs, tmp_path), "musictx-generate", outs, tmp_path)
    outs = [tmp_path / f"t{k}" for k in range(len(seeds))]
    argvs = [["task=accompany", f"seed_midi={s}", f"output_dir={o}", "bars=1-1", *QUICK]
             for s, o in zip(seeds, outs, strict=True)]
    check_all(run_batch(GENERATE, "musictx-generate", argvs, tmp_path), "musictx-generate", outs, tmp_path)


# ----- the app's refusals ---------------------------------------------------------------------------------
def test_app_refuses_a_large_upload_as_too_large_and_out_of_range_values_quietly():
    import gradio as gr

    from musictx.app.core import Continuer
    from musictx.app.page import quiet_bounds

    class Room:  # the allowance has room: only the size can refuse
        max_upload_mb = 5.0

        def check_room(self, incoming: int) -> None:
            return None

    assert "too large (60.0 MB; a seed file may be at most 5 MB)" in Continuer.upload_problem(Room(), 60 * 2**20)
    assert Continuer.upload_problem(Room(), 4 * 2**20) is None
    quiet_bounds()
    for component, value in ((gr.Slider(1, 60), 1e9), (gr.Number(minimum=0), -5)):
        with pytest.raises(gr.Error) as refused:
            component.preprocess(value)
        assert not refused.value.print_exception  # the page says it; the server's log gets no traceback


# ----- Ctrl-C ------------------------------------------------------------------------------------------------
def test_ctrl_c_during_evaluation_is_one_line_and_leaves_no_folder(tmp_path):
    data = song_split(tmp_path, [])
    out = tmp_path / "eval"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    # a runner started in the background hands its children SIGINT ignored: give the run a terminal's Ctrl-C
    proc = subprocess.Popen([sys.executable, "-m", "musictx.commands.evaluate", f"data.dir={data}", "mode=accompany",
                             "checkpoint=pop_infill", "infill.seconds=30", f"output_dir={out}"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for line in proc.stdout:  # the first song's line: the model is loaded and the scorecard runs
        if "accompany scorecard: 1/" in line:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("musictx-evaluate: interrupted")
    assert not out.exists() and not (tmp_path / "outputs").exists()
