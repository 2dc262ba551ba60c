"""musictx-prep never loses data: it replaces only its own datasets, refuses bad options before any work,
keeps odd file names mapped to their pieces, lists every unused input, and leaves nothing behind when
killed. Real MIDI files written in tmp_path; the console script where the exit status matters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from data_prep import safety, sources
from data_prep.prepare import write_dataset
from data_prep.safety import PrepError
from musictx.commands.prep import compose_options
from musictx.io.token_store import SPLITS, TokenArrays, read_file_names
from musictx.io.tokenizer import EventTokenizer
from tests.helpers import write_random_midi

REPO = Path(__file__).resolve().parents[1]


def make_midi(folder: Path, n: int = 4, **kwargs) -> Path:
    for i in range(n):
        write_random_midi(folder / f"piece{i}.mid", seed=i, n_notes=12, **kwargs)
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` with its bytes: equal snapshots mean nothing was lost or changed."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def prep(*overrides: str):
    return write_dataset(compose_options(["source=folder", *overrides]), progress=False)


def prep_cli(cwd: Path, *overrides: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "musictx-prep"
    cmd = [str(exe) if exe.exists() else "musictx-prep", *overrides, f"hydra.run.dir={cwd / 'hydra'}"]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_output_dir_equal_to_input_is_refused_and_input_kept(tmp_path):
    src = make_midi(tmp_path / "midi")
    before = snapshot(src)
    run = prep_cli(tmp_path, "source=folder", "input_dir=midi", "output_dir=midi")
    assert run.returncode != 0
    assert "musictx-prep: error: output_dir=midi is input_dir=midi" in run.stderr
    assert "Traceback" not in run.stderr and not run.stdout
    assert snapshot(src) == before


def test_default_output_dir_never_deletes_a_maestro_download(tmp_path):
    root = tmp_path / "data" / "maestro"
    write_random_midi(root / "2004" / "a.midi", seed=0, n_notes=12)
    (root / "maestro-v3.0.0.csv").write_text("split,midi_filename\ntrain,2004/a.midi\n")
    before = snapshot(root)
    run = prep_cli(tmp_path, "source=maestro", "input_dir=data/maestro")  # output_dir defaults to data/maestro
    assert run.returncode != 0 and "output_dir=data/maestro is input_dir=data/maestro" in run.stderr
    assert snapshot(root) == before


@pytest.mark.parametrize("out, why", [(".", "is a parent of input_dir"), ("midi/out", "is inside input_dir")])
def test_output_dir_above_or_inside_the_input_is_refused(tmp_path, out, why):
    src = make_midi(tmp_path / "midi")
    (tmp_path / "notes.txt").write_text("a file beside the input")
    before = snapshot(tmp_path)
    with pytest.raises(PrepError, match=why):
        prep(f"input_dir={src}", f"output_dir={tmp_path / out}")
    assert snapshot(tmp_path) == before


def test_output_dir_around_the_bach_cache_is_refused_before_export(tmp_path):
    cache = tmp_path / "data" / "bach_midi"
    cache.mkdir(parents=True)
    (cache / "keep.txt").write_text("cached")
    opts = compose_options([f"output_dir={tmp_path / 'data'}", f"bach_cache_dir={cache}", "bach_limit=1"])
    with pytest.raises(PrepError, match="is a parent of bach_cache_dir"):
        write_dataset(opts, progress=False)
    assert sorted(p.name for p in cache.iterdir()) == ["keep.txt"]  # nothing exported, nothing deleted


def test_only_an_empty_folder_or_a_prep_dataset_is_replaced(tmp_path):
    src = make_midi(tmp_path / "midi")
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("months of work")
    with pytest.raises(PrepError, match="is not a musictx dataset"):
        prep(f"input_dir={src}", f"output_dir={other}")
    assert snapshot(other) == {"thesis.tex": b"months of work"}
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(PrepError, match="exists and is not a folder"):
        prep(f"input_dir={src}", f"output_dir={tmp_path / 'a_file'}")
    (tmp_path / "empty").mkdir()
    out = prep(f"input_dir={src}", f"output_dir={tmp_path / 'empty'}").out_dir
    assert (out / "manifest.json").exists()
    prep(f"input_dir={src}", f"output_dir={out}", "reader=pretty_midi")  # a prep dataset: replaced
    assert json.loads((out / "manifest.json").read_text())["reader"] == "pretty_midi"
    (out / "my_notes.md").write_text("kept by the user inside the dataset")
    with pytest.raises(PrepError, match=r"holds files musictx-prep did not write \(my_notes.md\)"):
        prep(f"input_dir={src}", f"output_dir={out}")
    assert (out / "my_notes.md").exists()


@pytest.fixture
def dataset(tmp_path) -> tuple[Path, Path, dict]:
    """(input folder, a prepared dataset, its snapshot)."""
    src = make_midi(tmp_path / "midi", n=6)
    out = prep(f"input_dir={src}", f"output_dir={tmp_path / 'out'}").out_dir
    return src, out, snapshot(out)


@pytest.mark.parametrize("override, message", [
    ("reader=symusik", "reader='symusik' is not a MIDI reader"),
    ("fallback_reader=prettymidi", "fallback_reader='prettymidi' is not a MIDI reader"),
    ("timeout_s=0", "timeout_s must be > 0"),
    ("timeout_s=-5", "timeout_s must be > 0"),
    ("num_workers=-1", "num_workers must be a whole number >= 0"),
    ("num_workers=1.5", "num_workers must be a whole number >= 0"),
    ("max_memory_gb=-1", "max_memory_gb must be >= 0"),
    ("folk_plays=0", "folk_plays must be a whole number >= 1"),
    ("folk_plays=1.5", "folk_plays must be a whole number >= 1"),
    ("split.validation=1.0", r"split.validation must be a fraction in \[0, 1\)"),
    ("split.test=-0.1", r"split.test must be a fraction in \[0, 1\)"),
    ("split.validation=0", "split.validation=0 leaves no validation split"),
    ("+readr=pretty_midi", "unknown option.*: readr"),
    ("+split.grup_by=parent", "unknown option.*: split.grup_by"),
])
def test_bad_options_are_refused_before_any_work(dataset, override, message):
    src, out, before = dataset
    with pytest.raises(PrepError, match=message):
        prep(f"input_dir={src}", f"output_dir={out}", override)
    # refused up front: no temporary dataset folder was ever made (a run makes one before reading any file),
    # which a wall-clock bound on a shared machine could not show reliably
    assert snapshot(out) == before and sorted(p.name for p in out.parent.iterdir()) == ["midi", "out"]


def test_a_dataset_without_pieces_never_replaces_the_previous_one(dataset, tmp_path):
    src, out, before = dataset
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.mid").write_bytes(b"MThd garbage")
    (bad / "b.mid").write_bytes(b"")
    with pytest.raises(PrepError, match=r"has no piece at all: 2 input\(s\) skipped.*previous dataset there is kept"):
        prep(f"input_dir={bad}", f"output_dir={out}")
    assert snapshot(out) == before
    # Every file hashing to the test split: pieces, but none to train on.
    names = [n for n in (f"t{i}.mid" for i in range(200)) if sources.hash_split(n, 0.1, 0.1) == "test"][:2]
    only_test = tmp_path / "only_test"
    for i, name in enumerate(names):
        write_random_midi(only_test / name, seed=i, n_notes=12)
    with pytest.raises(PrepError, match=r"no piece in the train split \(2 in the others\)"):
        prep(f"input_dir={only_test}", f"output_dir={out}")
    assert snapshot(out) == before
    res = prep(f"input_dir={bad}", f"output_dir={out}", "allow_empty=true")  # asked for: written
    assert sum(s.files for s in res.stats.values()) == 0 and len(res.skipped) == 2


ODD_NAMES = [b"caf\xe9.mid", "line\u2028sep.mid".encode(), b"cr\rname.mid", b"nl\nname.mid", b"tab\tname.mid",
             "para\u2029graph\x85.mid".encode(), b"plain.mid"]


def test_odd_file_names_keep_their_pieces(tmp_path):
    src = tmp_path / "midi"
    for i, name in enumerate(ODD_NAMES):  # each file its own music, so a shifted mapping shows
        write_random_midi(Path(os.fsdecode(os.fsencode(src) + b"/" + name)), seed=i, n_notes=12 + i)
    (src / "bad\nfile.mid").write_bytes(b"not midi")
    run = prep_cli(tmp_path, "source=folder", f"input_dir={src}", f"output_dir={tmp_path / 'out'}",
                   "split.validation=0.3", "split.test=0.3", "num_workers=1")
    assert run.returncode == 0, run.stderr
    assert "bad\\nfile.mid" in run.stdout
    out, tok, seen = tmp_path / "out", EventTokenizer(), []
    for split in SPLITS:
        arrays = TokenArrays(out, split)
        assert len(arrays.files) == len(arrays)
        for i, rel in enumerate(arrays.files):
            np.testing.assert_array_equal(arrays.piece(i), np.append(tok.encode(src / rel), tok.eos_id))
            seen.append(os.fsencode(rel))
    assert sorted(seen) == sorted(ODD_NAMES)
    skipped = (out / "skipped.tsv").read_bytes().decode("utf-8").split("\n")
    assert skipped[1].startswith("bad\\nfile.mid\t") and skipped[2:] == [""]


def test_old_files_txt_is_read_without_splitting_inside_names(tmp_path):
    names = ["a\u2028b.mid", "c\rd.mid", "e\x85f.mid", "plain.mid"]
    (tmp_path / "old.files.txt").write_bytes("".join(f"{n}\n" for n in names).encode())
    assert read_file_names(tmp_path / "old.files.txt") == names


def test_every_unusable_input_is_listed_with_a_reason(tmp_path):
    src = make_midi(tmp_path / "midi", n=2)
    write_random_midi(src / "folder.mid" / "inner.mid", seed=7, n_notes=12)  # the folder skipped, inner used
    os.mkfifo(src / "fifo.mid")
    (src / "broken.mid").symlink_to("nowhere.mid")
    (src / "loop.mid").symlink_to("loop.mid")
    (src / "linked").symlink_to(src / "folder.mid")
    (src / "alias.mid").symlink_to(src / "piece0.mid")  # a link to a file is read like the file
    res = prep(f"input_dir={src}", f"output_dir={tmp_path / 'out'}", "split.validation=0.3")
    assert dict(res.skipped) == {
        "broken.mid": "broken symlink", "loop.mid": "symlink loop", "folder.mid": "a folder, not a MIDI file",
        "fifo.mid": "not a regular file (a FIFO)", "linked": "symlink to a folder: not followed"}
    used = sorted(f for s in SPLITS for f in TokenArrays(res.out_dir, s).files)
    assert used == ["alias.mid", "folder.mid/inner.mid", "piece0.mid", "piece1.mid"]
    assert (res.out_dir / "skipped.tsv").read_text().count("\n") == 1 + 5


def _scan_as_nobody(tmp_path: Path) -> dict:
    """scan_folder("midi") in a child process that has dropped root (root reads a mode-000 folder):
    {"skipped": rows}, {"error": text}, or {} when privileges could not be dropped."""
    tmp_path.chmod(0o711)  # nobody may pass through tmp_path (the child's working folder), not list it
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            os.chdir(tmp_path)
            os.setgid(65534)
            os.setuid(65534)
        except OSError:
            os._exit(0)
        try:
            answer = {"skipped": sources.scan_folder("midi")[1]}
        except BaseException as err:
            answer = {"error": repr(err)}
        os.write(write, json.dumps(answer).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data) if data else {}


def test_an_unreadable_subfolder_is_listed(tmp_path):
    src = make_midi(tmp_path / "midi", n=1)
    write_random_midi(src / "locked" / "hidden.mid", seed=3, n_notes=12)
    (src / "locked").chmod(0)
    try:
        if os.geteuid() != 0:
            skipped = sources.scan_folder(src)[1]
        elif hasattr(os, "fork"):
            answer = _scan_as_nobody(tmp_path)
            if not answer:
                pytest.skip("running as root and could not drop privileges: every folder is readable")
            assert "error" not in answer, answer.get("error")
            skipped = [tuple(row) for row in answer["skipped"]]
        else:
            pytest.skip("running as root without fork: every folder is readable")
    finally:
        (src / "locked").chmod(0o755)
    assert skipped == [("locked/", "folder cannot be read: Permission denied")]


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc to find the workers")
def test_killed_prep_leaves_no_workers_and_a_later_run_cleans_up(tmp_path):
    src = tmp_path / "midi"
    for i in range(30):
        write_random_midi(src / f"p{i:02d}.mid", seed=i, n_notes=1000, seconds=200)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "musictx.commands.prep", "source=folder", f"input_dir={src}", f"output_dir={out}",
           "reader=pretty_midi", "num_workers=2", f"hydra.run.dir={tmp_path / 'hydra'}"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            workers = _children(proc.pid)
        assert len(workers) == 2, "the run ended before its workers were seen"
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while any(map(_running, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(_running, workers)), "workers outlived their killed parent"
    finally:
        for pid in filter(_running, workers):  # only this test's own worker processes
            os.kill(pid, signal.SIGKILL)
    stale = list(tmp_path.glob(".out.tmp-*"))
    assert stale, "the killed run left no temporary folder to clean"
    live = tmp_path / f".out.tmp-{safety._host()}-1"  # pid 1 is alive: its folder must stay
    legacy = tmp_path / ".out.tmp-999999999"  # the older naming, a pid that cannot exist
    live.mkdir()
    legacy.mkdir()
    prep(f"input_dir={make_midi(tmp_path / 'small')}", f"output_dir={out}")
    assert sorted(p.name for p in tmp_path.glob(".out.*")) == [live.name]


def test_a_dataset_left_aside_by_a_dead_run_is_moved_back(dataset):
    src, out, before = dataset
    aside = out.parent / f".out.old-{safety._host()}-999999999"  # killed between its two renames
    os.replace(out, aside)
    safety.clean_stale(out)
    assert snapshot(out) == before and not aside.exists()
