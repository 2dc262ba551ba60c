"""One-line lists (`musictx.listed`): a message names a handful of items and counts the rest."""

from __future__ import annotations

from musictx.io.score_prep import Track, TrackMap
from musictx.listed import counts_listed, listed


def test_a_long_list_names_its_first_items_and_counts_the_rest():
    assert listed(["a", "b"]) == "a, b"
    assert listed(str(k) for k in range(12)) == "0, 1, 2, 3, 4, 5, 6, 7, and 4 more"
    assert listed(["x"] * 3, "; ", most=2) == "x; x; and 1 more"
    assert counts_listed({"PIANO": 40, "MELODY": 12}) == "{'PIANO': 40, 'MELODY': 12}"
    assert counts_listed({f"t{k}": k for k in range(10)}, most=2) == "{'t0': 0, 't1': 1, ... 8 more tracks}"


def test_a_file_of_128_instruments_is_described_in_a_line_people_read():
    tracks = TrackMap(tuple(Track(k, "All GM1 Sounds", k) for k in range(128)))
    said = tracks.describe()
    assert said.startswith("All GM1 Sounds (program 0), All GM1 Sounds (program 1)") and said.endswith("and 120 more")
    assert len(said) < 400


def test_a_count_is_said_with_its_noun_singular_for_one():
    from musictx.listed import counted

    assert [counted(n, "song") for n in (0, 1, 2)] == ["0 songs", "1 song", "2 songs"]  # a scorecard said "1 songs"
