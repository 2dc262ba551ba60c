"""POP909's versions with the performance tokenizer (the default) and ``pop_versions=train``: each is read as
every file is, its tracks merged into one piano stream whatever their names, none left out for its melody,
and the run says so in one line (data_prep/pop_versions.py). On real POP909 songs (../shared/data)."""

from __future__ import annotations

import shutil

import numpy as np
from symusic import Score

from data_prep.options import prep_options
from data_prep.prepare import run, tokenize_file
from musictx.io.token_store import TokenArrays, load_tokenizer
from tests.helpers import SHARED_DATA, needs_shared

POP909 = SHARED_DATA / "pop" / "POP909"
# 002-v1 names its tracks 'Melody', 'Grandeur 1', 'Grandeur 2' and has the melody 1.5 quarter notes later and an
# octave down (REMI's melody check leaves it out); 352-v3 holds one 'CAU' track
SONGS = ("002", "352")


@needs_shared
def test_versions_are_one_piano_stream_whatever_their_track_names_and_the_run_says_so(tmp_path, capsys):
    src = tmp_path / "pop"
    for song in SONGS:
        shutil.copytree(POP909 / song, src / song)
    opts = prep_options(source="folder", input_dir=str(src), output_dir=str(tmp_path / "out"), num_workers=0,
                        pop_versions="train", allow_empty=True, split={"validation": 0.0, "test": 0.0,
                                                                       "group_by": "file"})
    res = run(opts)
    versions = sorted(p.relative_to(src).as_posix() for p in src.glob("*/versions/*.mid"))
    train = TokenArrays(res.out_dir, "train")
    assert sorted(n for n in train.files if "versions/" in n) == versions and not res.skipped
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("pop_versions=train:")]
    assert lines == [f"pop_versions=train: {len(versions)} version(s) of 2 POP909 song(s) in train, their tracks "
                     "merged into one piano stream as in every file (the performance tokenizer has no roles, so their "
                     "track names need no mapping and their melodies no check; tokenizer=remi does both)"]
    # the roles change nothing: renamed as in the main files, 002-v1 gives the same ids, from all its tracks' notes
    name = "002/versions/002-v1.mid"
    score = Score(str(src / name))
    assert [t.name for t in score.tracks] == ["Melody", "Grandeur 1", "Grandeur 2"]
    for track, role in zip(score.tracks, ("MELODY", "BRIDGE", "PIANO"), strict=True):
        track.name = role
    score.dump_midi(str(tmp_path / "renamed.mid"))
    tok = load_tokenizer(res.out_dir)
    assert tok.to_dict()["kind"] == "performance"
    renamed = tokenize_file((str(tmp_path / "renamed.mid"), tok.to_dict(), "symusic", "pretty_midi", 0))
    assert np.array_equal(renamed["ids"], train.piece(train.files.index(name)))
    assert renamed["notes"] == score.note_num() == 1420
