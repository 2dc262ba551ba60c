"""Data prep end to end: real MIDI files in, token arrays out; bad files skipped; deterministic; atomic."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from data_prep.prepare import write_dataset
from data_prep.safety import PrepError
from data_prep.sources import hash_position, hash_split
from musictx.commands.prep import compose_options
from musictx.io.token_store import SPLITS, TokenArrays, load_manifest, load_tokenizer
from musictx.io.tokenizer import EventTokenizer
from musictx.training.data import MusicDataModule
from tests.helpers import EDGE_DIR, needs_shared, write_random_midi

REPO = Path(__file__).resolve().parents[1]


def make_folder(root: Path, n_good: int = 12) -> Path:
    for i in range(n_good):
        write_random_midi(root / f"set{i % 3}" / f"piece{i}.mid", seed=i)
    write_random_midi(root / "UPPER.MIDI", seed=99)  # suffix case must not matter
    (root / "broken.mid").write_bytes(b"MThd\x00\x00\x00\x06\x00\x01\x00\x02\x01")  # truncated header
    (root / "empty.mid").write_bytes(b"")
    (root / "notes.txt.mid").write_text("this is not MIDI")
    (root / "readme.txt").write_text("ignored: not a MIDI suffix")
    return root


def prep(tmp_path: Path, input_dir: Path, out_name: str = "out", *extra: str):
    opts = compose_options(["source=folder", f"input_dir={input_dir}", f"output_dir={tmp_path / out_name}",
                            *extra])
    return write_dataset(opts, progress=False)


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_folder_prep_writes_arrays_that_match_the_tokenizer(tmp_path):
    src = make_folder(tmp_path / "midi")
    res = prep(tmp_path, src, "out", "num_workers=2")
    out = res.out_dir
    skipped = dict(line.split("\t") for line in (out / "skipped.tsv").read_text().splitlines()[1:])
    assert set(skipped) == {"broken.mid", "empty.mid", "notes.txt.mid"}
    assert skipped["empty.mid"] == "empty file (0 bytes)"
    assert "unreadable MIDI" in skipped["notes.txt.mid"]
    tok = load_tokenizer(out)
    manifest = load_manifest(out)
    assert manifest["tokenizer"] == tok.to_dict() and manifest["skipped"] == 3
    total = 0
    for split in SPLITS:
        arrays = TokenArrays(out, split)
        assert manifest["splits"][split]["files"] == len(arrays) == len(arrays.files)
        assert manifest["splits"][split]["tokens"] == arrays.num_tokens
        for i, rel in enumerate(arrays.files):
            expected = np.append(tok.encode(src / rel), tok.eos_id)
            np.testing.assert_array_equal(arrays.piece(i), expected)
            assert split == res.moved.get(rel, hash_split(rel, 0.1, 0.1))
        total += len(arrays)
    assert total == 13


def test_rerun_is_byte_identical_whatever_the_worker_count(tmp_path):
    src = make_folder(tmp_path / "midi")
    a = digest(prep(tmp_path, src, "a", "num_workers=2").out_dir)
    b = digest(prep(tmp_path, src, "b", "num_workers=1").out_dir)
    c = digest(prep(tmp_path, src, "c", "num_workers=0").out_dir)
    assert a == b == c and "train.bin" in a


def test_group_by_parent_keeps_a_folder_in_one_split(tmp_path):
    src = tmp_path / "works"
    for w in range(8):
        for perf in range(3):
            write_random_midi(src / f"work{w}" / f"perf{perf}.mid", seed=10 * w + perf, n_notes=10)
    out = prep(tmp_path, src, "out", "split.group_by=parent", "split.validation=0.3", "split.test=0.3").out_dir
    where = {}
    for split in SPLITS:
        for rel in TokenArrays(out, split).files:
            where.setdefault(Path(rel).parent.name, set()).add(split)
    assert len(where) == 8 and all(len(s) == 1 for s in where.values())
    assert len({next(iter(s)) for s in where.values()}) >= 2


def test_a_split_left_empty_by_the_hash_gets_the_nearest_train_piece(tmp_path):
    # 12 usable files of which the hash sends none to validation=0.2 (about one time in 15), and two that
    # it does send there but that are not MIDI: validation would be written empty and training refuse it.
    good = [n for n in (f"p{i:03d}.mid" for i in range(300)) if hash_split(n, 0.2, 0.1) != "validation"][:12]
    bad = [n for n in (f"bad{i}.mid" for i in range(300)) if hash_split(n, 0.2, 0.1) == "validation"][:2]
    src = tmp_path / "midi"
    for i, name in enumerate(good):
        write_random_midi(src / name, seed=i, n_notes=12)
    for name in bad:
        (src / name).write_text("not MIDI")
    res = prep(tmp_path, src, "out", "split.validation=0.2")
    nearest = min((n for n in good if hash_split(n, 0.2, 0.1) == "train"), key=hash_position)
    assert TokenArrays(res.out_dir, "validation").files == [nearest] and res.moved[nearest] == "validation"
    assert load_manifest(res.out_dir)["moved_to_empty_splits"] == res.moved
    tok = load_tokenizer(res.out_dir)
    for split in SPLITS:  # every other piece stays where its hash put it, and the arrays match the names
        arrays = TokenArrays(res.out_dir, split)
        assert load_manifest(res.out_dir)["splits"][split]["files"] == len(arrays) >= 1
        for i, rel in enumerate(arrays.files):
            assert split == res.moved.get(rel, hash_split(rel, 0.2, 0.1))
            np.testing.assert_array_equal(arrays.piece(i), np.append(tok.encode(src / rel), tok.eos_id))
    assert sorted(dict(res.skipped)) == sorted(bad)
    MusicDataModule(res.out_dir, seq_len=32, num_workers=0).setup("fit")  # training takes it


def test_a_split_too_small_to_fill_is_refused_with_the_numbers(tmp_path):
    names = [n for n in (f"p{i:03d}.mid" for i in range(300)) if hash_split(n, 0.1, 0.1) == "train"][:2]
    src = tmp_path / "midi"
    for i, name in enumerate(names):
        write_random_midi(src / name, seed=i, n_notes=12)
    # one line: the split, why it is empty (what the hash sent it, why train gave it nothing), the numbers
    message = (r"split\.test=0\.1 left the test split without a piece: the split hash sent test none of the 2 "
               r"input file\(s\) in 2 split group\(s\), and train had none to spare \(its 1 piece\(s\) make 1 "
               r"split group\(s\), and it keeps one\); 2 usable piece\(s\) \(1 train, 1 validation, 0 test\), 0 "
               r"input\(s\) skipped; nothing was written\. Add pieces, set split\.test=0")
    with pytest.raises(PrepError, match=message):
        prep(tmp_path, src, "out")
    assert not (tmp_path / "out").exists()
    res = prep(tmp_path, src, "out", "split.test=0")
    assert [s.files for s in res.stats.values()] == [1, 1, 0]


def test_maestro_source_follows_the_csv(tmp_path):
    root = tmp_path / "maestro-v3.0.0"
    rows = [("2004/a.midi", "train"), ("2004/b.midi", "validation"), ("2006/c.midi", "test"),
            ("2006/gone.midi", "train")]
    for i, (rel, _) in enumerate(rows[:3]):
        write_random_midi(root / rel, seed=i, n_notes=10)
    lines = ["canonical_composer,canonical_title,split,year,midi_filename,audio_filename,duration"]
    lines += [f"X,Y,{split},2004,{rel},{rel[:-5]}.wav,10.0" for rel, split in rows]
    (root / "maestro-v3.0.0.csv").write_text("\n".join(lines) + "\n")
    opts = compose_options(["source=maestro", f"input_dir={root}", f"output_dir={tmp_path / 'out'}"])
    out = write_dataset(opts, progress=False).out_dir
    assert TokenArrays(out, "train").files == ["2004/a.midi"]
    assert TokenArrays(out, "validation").files == ["2004/b.midi"]
    assert TokenArrays(out, "test").files == ["2006/c.midi"]
    assert "2006/gone.midi\tlisted in maestro-v3.0.0.csv but missing" in (out / "skipped.tsv").read_text()


def test_clear_errors_for_bad_options(tmp_path):
    with pytest.raises(ValueError, match="needs input_dir"):
        write_dataset(compose_options(["source=folder"]), progress=False)
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        prep(tmp_path, tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no MIDI files"):
        prep(tmp_path, tmp_path / "empty")
    with pytest.raises(ValueError, match="split fractions"):
        prep(tmp_path, make_folder(tmp_path / "m", 1), "o", "split.validation=0.7", "split.test=0.5")
    assert not (tmp_path / "o").exists()


@pytest.mark.slow  # 35-80 s of subprocesses on a Zen 3; make test-all runs it
def test_interrupted_run_keeps_the_previous_dataset(tmp_path):
    src = tmp_path / "midi"
    for i in range(40):
        write_random_midi(src / f"p{i:03d}.mid", seed=i, n_notes=1500, seconds=300)
    out = prep(tmp_path, src, "out", "num_workers=2").out_dir
    before = digest(out)
    # One long performance (150k notes, ~3 s to parse here) keeps the second run tokenizing for seconds, so the
    # interruption lands inside that phase on a loaded machine too (the 40 small files alone take ~0.6 s).
    write_random_midi(src / "zz_long.mid", seed=99, n_notes=150_000, seconds=3000)
    cmd = [sys.executable, "-m", "musictx.commands.prep", "source=folder", f"input_dir={src}", f"output_dir={out}",
           "reader=pretty_midi", "num_workers=1", f"hydra.run.dir={tmp_path / 'hydra'}", "split.test=0.2"]
    # A runner started in the background (`cmd &`, nohup) hands its children SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler: give the run a terminal's Ctrl-C, as a user's run has.
    # The temporary folder exists only from the start of tokenizing to the swap: interrupt as soon as it
    # appears. Should the poll still miss it, the run completes (a new dataset) and the interruption is tried again.
    for _attempt in range(3):
        proc = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".out.tmp-*")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            break
        before = digest(out)  # the completed run replaced the dataset; the next attempt must keep this one
    assert proc.returncode != 0, f"the run finished before it could be interrupted, three times:\n{err[-3000:]}"
    assert digest(out) == before
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_console_script_runs_with_overrides(tmp_path):
    src = make_folder(tmp_path / "midi", n_good=3)
    exe = Path(sys.executable).parent / "musictx-prep"
    cmd = [str(exe) if exe.exists() else "musictx-prep", "source=folder", f"input_dir={src.name}",  # relative
           f"output_dir={tmp_path / 'out'}", f"hydra.run.dir={tmp_path / 'hydra'}"]
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "skipped 3 file(s)" in run.stdout and "broken.mid" in run.stdout
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["splits"]["train"]["files"] >= 1
    assert manifest["input_dir"] == str(src.resolve())  # the scorecard reads the songs from any folder


@needs_shared
def test_every_edge_file_is_used_or_skipped_with_a_reason(tmp_path):
    res = prep(tmp_path, EDGE_DIR, "edge", "num_workers=2", "timeout_s=30")
    n_files = len([p for p in EDGE_DIR.rglob("*") if p.suffix.lower() in (".mid", ".midi")])
    used = sum(s.files for s in res.stats.values())
    assert used + len(res.skipped) == n_files
    assert used > 30 and all(reason for _, reason in res.skipped)
    reasons = dict(res.skipped)
    assert reasons["jazz-soft-test-midi-files/test-empty-file.mid"] == "empty file (0 bytes)"
    assert reasons["Tonejs-Midi/beat.mid"] == "only drum notes"


def test_bach_source_exports_chorales_with_unique_names(tmp_path):
    pytest.importorskip("music21")
    from data_prep.bach import chorale_names

    names = chorale_names()
    assert len(names) > 300 and len({Path(n).name for n in names}) == len(names)
    assert any(Path(n).name.count(".") for n in names)  # e.g. bwv144.3: a stem would collide
    opts = compose_options([f"output_dir={tmp_path / 'bach'}", f"bach_cache_dir={tmp_path / 'cache'}",
                            "bach_limit=4", "split.validation=0.25", "split.test=0.25"])
    res = write_dataset(opts, progress=False)
    assert sum(s.files for s in res.stats.values()) + len(res.skipped) == 4
    exported = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert exported == sorted(f"{Path(n).name}.mid" for n in names[:4])
    assert EventTokenizer.load(res.out_dir / "tokenizer.json").vocab_size == 390
