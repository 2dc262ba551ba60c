"""POP909's extra arrangements (versions/NNN-vK.mid) in the train split of their song only
(data_prep/pop_versions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from symusic import Note, Score, Track

from data_prep import pop_versions
from data_prep.options import prep_options
from data_prep.prepare import with_versions, write_dataset
from data_prep.sources import SourceFile, hash_split, main_of, piece_key
from musictx.io.token_store import TokenArrays


def _score(tracks: dict[str, list[tuple[int, int]]], tpq: int = 480) -> Score:
    """A score of named tracks of (quarter-note onset x 4, pitch) notes, each a 16th long."""
    score = Score(tpq)
    for name, notes in tracks.items():
        track = Track(name, 0, False)
        for q4, pitch in notes:
            track.notes.append(Note(q4 * tpq // 4, tpq // 4, pitch, 80))
        score.tracks.append(track)
    return score


MELODY = [(k * 2, 60 + (k * 5) % 12) for k in range(64)]
COMP = [(k * 4, 48 + (k * 7) % 12) for k in range(32)]


def test_main_of_and_the_split_key_of_a_version_are_its_songs():
    assert main_of("012/versions/012-v3.mid") == "012/012.mid"
    assert main_of("/x/POP909/012/versions/012-v3.MID") == "/x/POP909/012/012.MID"
    assert main_of("012/versions/013-v1.mid") is None and main_of("012/012.mid") is None
    assert main_of("versions/012-v3.mid") == "012.mid"  # input_dir given as the song's own folder
    for group_by in ("file", "parent"):
        assert piece_key("012/versions/012-v3.mid", group_by) == piece_key("012/012.mid", group_by)
    assert hash_split(piece_key("5/versions/5-v1.mid", "file"), 0.3, 0.3) == hash_split("5/5.mid", 0.3, 0.3)


def test_roles_by_name_first_then_by_place():
    assert pop_versions.roles_of(["MELODY", "CAU", "PIANO"]) == ["MELODY", "BRIDGE", "PIANO"]
    assert pop_versions.roles_of(["Melody", "Grandeur 1", "Grandeur 2"]) == ["MELODY", "BRIDGE", "PIANO"]
    assert pop_versions.roles_of(["Instrument Track 01", "CAU", "PIANO "]) == ["MELODY", "BRIDGE", "PIANO"]
    assert pop_versions.roles_of(["MELODY", "CAU", "dem"]) == ["MELODY", "BRIDGE", "PIANO"]
    assert pop_versions.roles_of(["Steinway Grand Piano", "CAU", "PIANO"]) == ["MELODY", "BRIDGE", "PIANO"]
    assert pop_versions.roles_of(["MELODY", "PIANO", "PIANO"]) == ["MELODY", "PIANO", "PIANO"]


def test_tracks_of_one_role_are_merged_and_named_as_in_the_main_files():
    score = pop_versions.with_roles(_score({"Melody": MELODY, "Piano": COMP[:10], "PIANO": COMP[10:], "cau": COMP}))
    assert [t.name for t in score.tracks] == ["MELODY", "BRIDGE", "PIANO"]
    assert [t.note_num() for t in score.tracks] == [64, 32, 32]


def test_the_melody_check_counts_onsets_in_quarters_and_allows_an_octave():
    main = _score({"MELODY": MELODY})
    assert pop_versions.melody_share(main, _score({"MELODY": MELODY}, tpq=960)) == 1.0
    assert pop_versions.melody_share(main, _score({"MELODY": [(q, p - 12) for q, p in MELODY]})) == 1.0
    assert pop_versions.melody_share(main, _score({"MELODY": [(q + 4, p) for q, p in MELODY]})) < 0.1  # a beat late
    assert pop_versions.melody_share(main, _score({"MELODY": MELODY[:20]})) == pytest.approx(20 / 64)


def test_with_versions_keeps_them_in_train_only():
    files = [SourceFile("a", "1/1.mid", "train"), SourceFile("b", "1/versions/1-v1.mid", "train"),
             SourceFile("c", "2/2.mid", "test"), SourceFile("d", "2/versions/2-v1.mid", "test"),
             SourceFile("e", "x/versions/x-v1.mid", "train")]  # no main file listed: an ordinary file
    assert [f.rel for f in with_versions(files, "train")] == ["1/1.mid", "1/versions/1-v1.mid", "2/2.mid",
                                                               "x/versions/x-v1.mid"]
    assert [f.rel for f in with_versions(files, "skip")] == ["1/1.mid", "2/2.mid", "x/versions/x-v1.mid"]


def _song_folder(root: Path, n: int) -> None:
    """Song n: a main file with a beat file, a good version (other names, an extra piano track, 960 tpq) and
    one whose melody is another tune."""
    folder = root / f"{n:03d}"
    (folder / "versions").mkdir(parents=True)
    melody = [(q, p + n % 5) for q, p in MELODY]
    _score({"MELODY": melody, "BRIDGE": COMP[::2], "PIANO": COMP}).dump_midi(str(folder / f"{n:03d}.mid"))
    # 4/4 at 120 bpm, the first downbeat on the second beat (a pickup)
    (folder / "beat_midi.txt").write_text("".join(f"{k * 0.5:.2f} {int(k % 2 == 1)} {int(k % 4 == 1)}\n"
                                                  for k in range(80)))
    _score({"Melody": melody, "Cau": COMP[::3], "Piano": COMP[:16], "PIANO": COMP[16:]},
           tpq=960).dump_midi(str(folder / "versions" / f"{n:03d}-v1.mid"))
    _score({"MELODY": [(q, 90 - p % 7) for q, p in melody], "PIANO": COMP}).dump_midi(
        str(folder / "versions" / f"{n:03d}-v2.mid"))


def test_prep_puts_checked_versions_in_train_and_leaves_validation_and_test_unchanged(tmp_path):
    for n in range(1, 13):
        _song_folder(tmp_path / "pop", n)
    common = dict(source="folder", input_dir=str(tmp_path / "pop"), tokenizer="remi", num_workers=0,
                  split={"validation": 0.2, "test": 0.2, "group_by": "file"})
    plain = write_dataset(prep_options(output_dir=str(tmp_path / "plain"), **common), progress=False)
    more = write_dataset(prep_options(output_dir=str(tmp_path / "more"), pop_versions="train", **common),
                         progress=False)
    assert plain.stats["train"].files >= 2 and plain.stats["validation"].files and plain.stats["test"].files
    for split in ("validation", "test"):
        a, b = TokenArrays(plain.out_dir, split), TokenArrays(more.out_dir, split)
        assert a.files == b.files and all("versions" not in f for f in b.files)
        assert (a.tokens == b.tokens).all()
    train = TokenArrays(more.out_dir, "train").files
    songs = [f for f in train if "versions" not in f]
    assert sorted(f for f in train if "versions" in f) == sorted(f"{s[:3]}/versions/{s[:3]}-v1.mid" for s in songs)
    reasons = dict(more.skipped)
    assert set(reasons) == {f"{s[:3]}/versions/{s[:3]}-v2.mid" for s in songs}
    assert all(r.startswith("version: melody differs") for r in reasons.values())
    # the version is tokenized with the main file's bars and the roles' programs: the same melody ids
    tr = TokenArrays(more.out_dir, "train")
    main_ids, version_ids = tr.piece(train.index(songs[0])), tr.piece(train.index(f"{songs[0][:3]}/versions/"
                                                                                     f"{songs[0][:3]}-v1.mid"))
    assert main_ids[:12].tolist() == version_ids[:12].tolist()


def test_one_songs_folder_as_input_keeps_its_versions_with_it(tmp_path):
    _song_folder(tmp_path / "pop", 7)  # input_dir=POP909/007: its versions were split as files of their own
    common = dict(source="folder", input_dir=str(tmp_path / "pop" / "007"), num_workers=0, allow_empty=True,
                  split={"validation": 0.4, "test": 0.4, "group_by": "file"})
    skip = write_dataset(prep_options(output_dir=str(tmp_path / "skip"), **common), progress=False)
    assert sum(stats.files for stats in skip.stats.values()) == 1
    assert sorted(name for name, _ in skip.left_out) == ["versions/007-v1.mid", "versions/007-v2.mid"]
    train = write_dataset(prep_options(output_dir=str(tmp_path / "train"), pop_versions="train", **common),
                          progress=False)
    together = [split for split in ("train", "validation", "test") if TokenArrays(train.out_dir, split).files]
    assert together == ["train"] and len(TokenArrays(train.out_dir, "train").files) == 3


def test_a_song_moved_to_an_empty_validation_split_leaves_its_versions_out(tmp_path):
    songs = [n for n in range(1, 60) if hash_split(f"{n:03d}/{n:03d}.mid", 0.2, 0.0) == "train"][:3]
    for n in songs:
        _song_folder(tmp_path / "pop", n)
    res = write_dataset(prep_options(source="folder", input_dir=str(tmp_path / "pop"), output_dir=str(tmp_path / "o"),
                                     tokenizer="remi", num_workers=0, pop_versions="train",
                                     split={"validation": 0.2, "test": 0.0, "group_by": "file"}), progress=False)
    (moved, split), = res.moved.items()
    assert split == "validation" and TokenArrays(res.out_dir, "validation").files == [moved]
    train = TokenArrays(res.out_dir, "train").files
    assert moved[:3] not in {f[:3] for f in train} and len(train) == 4  # 2 songs and their good versions
    assert res.stats["train"].files == 4 and res.stats["validation"].files == 1
