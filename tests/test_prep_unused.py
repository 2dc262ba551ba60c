"""musictx-prep names every input it does not use, and says so in one line: POP909's versions left out by
``pop_versions`` or because their song is held out (moved there included), a split too small to fill, and
byte-identical files, which share one split. On real POP909 songs (../shared/data)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from data_prep.identical import identical_groups
from data_prep.options import prep_options
from data_prep.prepare import run, write_dataset
from data_prep.safety import PrepError
from data_prep.sources import hash_split, main_of
from musictx.io.token_store import SPLITS, TokenArrays
from tests.helpers import SHARED_DATA

POP909 = SHARED_DATA / "pop" / "POP909"
pytestmark = pytest.mark.skipif(not POP909.is_dir(), reason=f"POP909 not found at {POP909} (CI and dev machines only)")
VAL, TEST = 0.1, 0.1  # prepare.yaml's split fractions


def songs_in(split: str, count: int, most_versions: int = 2) -> list[str]:
    """The first ``count`` POP909 songs ('NNN') the split hash sends to ``split``, each with 1 to
    ``most_versions`` versions (few: the test stays fast)."""
    found = []
    for n in range(1, 200):
        song = f"{n:03d}"
        versions = len(list((POP909 / song / "versions").glob("*.mid")))
        if 1 <= versions <= most_versions and hash_split(f"{song}/{song}.mid", VAL, TEST) == split:
            found.append(song)
        if len(found) == count:
            return found
    raise AssertionError(f"fewer than {count} POP909 songs in {split}")


def copy_songs(songs: list[str], root: Path) -> Path:
    for song in songs:
        shutil.copytree(POP909 / song, root / song)
    return root


def options(src: Path, out: Path, **overrides):
    return prep_options(source="folder", input_dir=str(src), output_dir=str(out), tokenizer="remi", num_workers=0,
                        **overrides)


def skipped_tsv(out: Path) -> dict[str, str]:
    return dict(line.split("\t") for line in (out / "skipped.tsv").read_text().splitlines()[1:])


def used(out: Path) -> dict[str, str]:
    """{name: split} of every piece written."""
    return {name: split for split in SPLITS for name in TokenArrays(out, split).files}


def assert_every_input_named_once(src: Path, out: Path) -> None:
    """Each MIDI file of ``src`` is in exactly one split or in skipped.tsv: nothing is dropped silently."""
    inputs = sorted(p.relative_to(src).as_posix() for p in src.rglob("*.mid"))
    named = list(used(out)) + list(skipped_tsv(out))
    assert sorted(named) == inputs


def summary_line(out: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith("skipped ")]
    return line


def versions_under(src: Path) -> list[str]:
    return sorted(p.relative_to(src).as_posix() for p in src.glob("*/versions/*.mid"))


def test_versions_left_out_by_pop_versions_skip_are_listed_and_counted_in_one_line(tmp_path, capsys):
    src = copy_songs(songs_in("train", 2) + songs_in("validation", 1) + songs_in("test", 1), tmp_path / "pop")
    res = run(options(src, tmp_path / "out"))
    versions = versions_under(src)
    rows = skipped_tsv(res.out_dir)
    assert {v: rows.get(v) for v in versions} == {v: "version not used: pop_versions=skip (pop_versions=train puts "
                                                    "the versions of train songs in train)" for v in versions}
    assert_every_input_named_once(src, res.out_dir)
    out = capsys.readouterr().out
    songs = len({main_of(v) for v in versions})
    assert summary_line(out) == (f"skipped {len(versions)} file(s), reasons in {res.out_dir / 'skipped.tsv'}: "
                                 f"{len(versions)} version(s) of {songs} song(s) not used (pop_versions=skip)")
    assert not [line for line in out.splitlines() if "versions/" in line]  # never one line a version


def test_the_versions_of_held_out_songs_are_listed_with_why(tmp_path, capsys):
    held = songs_in("validation", 1) + songs_in("test", 1)
    src = copy_songs(songs_in("train", 2) + held, tmp_path / "pop")
    res = run(options(src, tmp_path / "out", pop_versions="train"))
    rows, where = skipped_tsv(res.out_dir), used(res.out_dir)
    held_versions = [v for v in versions_under(src) if v[:3] in held]
    for v in held_versions:
        split = hash_split(main_of(v), VAL, TEST)
        assert rows[v] == f"version not used: its song is in {split} (in train it would leak its held-out song into " \
                          "training)"
    assert {split for name, split in where.items() if "versions/" in name} == {"train"}
    assert_every_input_named_once(src, res.out_dir)
    line = summary_line(capsys.readouterr().out)
    assert f": {len(held_versions)} version(s) of 2 validation/test song(s) not used (in train they would leak " \
           "held-out songs into training)" in line


def test_the_versions_of_a_song_moved_to_an_empty_split_follow_it(tmp_path, capsys):
    songs = songs_in("train", 3)  # validation and test come out empty: a song is moved to each
    src = copy_songs(songs, tmp_path / "pop")
    res = run(options(src, tmp_path / "out", pop_versions="train"))
    assert sorted(res.moved.values()) == ["test", "validation"]
    rows, where = skipped_tsv(res.out_dir), used(res.out_dir)
    for main, split in res.moved.items():
        assert where[main] == split
        for v in versions_under(src):
            if main_of(v) == main:
                assert v not in where
                assert rows[v] == (f"version not used: its song was moved to the empty {split} split (in train it "
                                   "would leak its held-out song into training)")
    kept = [v for v in versions_under(src) if main_of(v) not in res.moved]
    assert all(where.get(v) == "train" or rows[v].startswith("version: ") for v in kept) and kept
    assert_every_input_named_once(src, res.out_dir)
    out = capsys.readouterr().out
    moved = sum(main_of(v) in res.moved for v in versions_under(src))
    assert f": {moved} version(s) of 2 validation/test song(s) not used" in summary_line(out)
    assert [line for line in out.splitlines() if line.startswith("moved ")] == [
        f"moved {main} from train to {split}: the split hash sent {split} none of the {len(where) + len(rows)} "
        f"input file(s) in 3 split group(s)" for main, split in res.moved.items()]


def names_in(split: str, count: int, prefix: str, val: float = VAL, test: float = TEST) -> list[str]:
    """``count`` file names the split hash sends to ``split``."""
    names = (f"{prefix}{i}.mid" for i in range(10_000))
    return [n for n in names if hash_split(n, val, test) == split][:count]


def test_a_split_too_small_to_fill_says_why_in_one_line(tmp_path, capsys):
    src = tmp_path / "midi"
    src.mkdir()
    for song, name in zip(("003", "004"), names_in("train", 2, "song"), strict=True):
        shutil.copy(POP909 / song / f"{song}.mid", src / name)
    # the hash sends test (split.test=0.05) only a file that is not MIDI; validation gets train's nearest piece,
    # and train keeps its last one
    (bad,) = names_in("test", 1, "junk", test=0.05)
    (src / bad).write_text("not MIDI")
    split = {"validation": VAL, "test": 0.05, "group_by": "file"}
    with pytest.raises(PrepError) as err:
        write_dataset(options(src, tmp_path / "out", split=split), progress=False)
    message = str(err.value)
    assert "\n" not in message and message.startswith(
        "split.test=0.05 left the test split without a piece: the split hash sent test 1 input file(s), all skipped "
        "(unreadable MIDI") and not (tmp_path / "out").exists()
    assert ", and train had none to spare (its 1 piece(s) make 1 split group(s), and it keeps one); " in message
    res = run(options(src, tmp_path / "out", allow_empty=True, split=split))
    assert res.stats["test"].files == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("split.test=")]
    assert lines == [message.split("; 2 usable")[0] + "; written anyway (allow_empty=true)"]


def test_identical_files_share_a_split_and_are_named_in_one_line(tmp_path, capsys):
    src = tmp_path / "midi"
    src.mkdir()
    # each song twice, under names the hash alone would send to train and to test: a leak of the test set
    songs = ("003", "004", "005", "007", "009")
    for song, a, b in zip(songs, names_in("train", 5, "a"), names_in("test", 5, "b"), strict=True):
        shutil.copy(POP909 / song / f"{song}.mid", src / a)
        shutil.copy(POP909 / song / f"{song}.mid", src / b)
    res = run(options(src, tmp_path / "out"))
    where = used(res.out_dir)
    groups = identical_groups((str(p), p.name) for p in src.iterdir())
    assert len(groups) == len(songs) and all(len({where[name] for name in g}) == 1 for g in groups)
    assert_every_input_named_once(src, res.out_dir)
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "byte-identical" in line]
    shown = ", ".join(" = ".join(g) for g in groups[:4])
    assert line == (f"{len(groups)} group(s) of byte-identical input files ({2 * len(groups)} files), each group kept "
                    f"in one split (copies are not merged): {shown}, and {len(groups) - 4} more")


def test_identical_files_in_two_folders_keep_both_folders_in_one_split(tmp_path):
    # group_by=parent: a folder is one work, so a copy shared by two folders puts both folders in one split
    src = tmp_path / "works"
    folders = (f"work{i}" for i in range(10_000))
    train = next(f for f in folders if hash_split(f, 0.3, 0.3) == "train")
    test = next(f for f in folders if hash_split(f, 0.3, 0.3) == "test")
    others = [f"other{n}/{song}.mid" for n, song in enumerate(("010", "011", "012"))]  # train keeps some
    for rel in [f"{train}/003.mid", f"{train}/004.mid", f"{test}/005.mid", f"{test}/003.mid", *others]:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(POP909 / rel[-7:-4] / rel[-7:], src / rel)
    res = write_dataset(options(src, tmp_path / "out", split={"validation": 0.3, "test": 0.3, "group_by": "parent"}),
                        progress=False)
    where = used(res.out_dir)
    assert len({where[f"{train}/003.mid"], where[f"{train}/004.mid"], where[f"{test}/005.mid"],
                where[f"{test}/003.mid"]}) == 1
    assert_every_input_named_once(src, res.out_dir)
