"""Chord files (musictx.io.chord_labels): a lead sheet's chords read from the lab format POP909 ships, and a
bad file refused in one line naming the file, the line and the problem."""

from __future__ import annotations

import pytest

from musictx.io.chord_labels import ChordFileError, Chords, chord_pitch_classes, chord_root

from .helpers import SHARED_DATA, needs_shared


def test_labels_name_their_pitch_classes():
    assert chord_pitch_classes("G:min7") == {7, 10, 2, 5}
    assert chord_pitch_classes("C") == {0, 4, 7}  # a bare root: the major triad
    assert chord_pitch_classes("Eb:sus2") == {3, 5, 10}
    assert chord_pitch_classes("F#:maj/3") == {6, 10, 1}
    assert chord_pitch_classes("N") == frozenset()
    assert chord_pitch_classes("H:maj") == frozenset()
    assert chord_pitch_classes("Cmaj7") == frozenset()  # not Harte syntax: refused, not read as C major
    assert [chord_root(x) for x in ("Eb:sus2", "F#:maj/3", "C", "N", "Cmaj7")] == [3, 6, 0, -1, -1]


def test_a_lab_file_gives_the_chord_sounding_at_each_time(tmp_path):
    lab = tmp_path / "song.lab"
    lab.write_text("# a comment\n2.0 4.0 G:maj\n0.0 2.0 C:maj\n4.0 5.0 N\n")
    chords = Chords.read(lab)
    assert chords.at(0.5) == {0, 4, 7} and chords.at(2.0) == {7, 11, 2}
    assert chords.at(4.5) == frozenset() and chords.at(9.0) == frozenset()


def test_a_lead_sheet_that_stops_before_the_span_does_is_said_in_one_line(tmp_path):
    lab = tmp_path / "sheet.lab"
    lab.write_text("0.0 2.0 N\n2.0 4.0 C:maj\n4.0 6.0 G:maj\n")
    chords = Chords.read(lab)
    assert chords.short_of(2.0, 6.0, "the new music") is None  # the last chord lasts to the end
    assert chords.short_of(0.0, 5.0, "the new music") is None  # a gap at the start is the sheet's own N
    assert chords.short_of(5.0, 9.0, "the new music") == ("the new music (5.0-9.0 s): the lead sheet's chords end at "
                                                          "6.0 s, so the last 3.0 s follow none")
    for start, end in ((7.0, 9.0), (0.0, 1.5)):  # after its last chord, or before its first (N does not count)
        said = chords.short_of(start, end, "x")
        assert said.endswith("no chord of the lead sheet falls there (its chords run 2.0-6.0 s)")


@pytest.mark.parametrize("text, problem", [
    ("0.0 2.0\n", "line 1: a line needs three fields"),
    ("0.0 2.0 C:maj\nzero 1 G\n", "line 2: START and END must be numbers"),
    ("3.0 2.0 C:maj\n", "line 1: START and END must be finite, >= 0 and in order"),
    ("0.0 2.0 C:maj\n2.0 4.0 Q:min\n", "line 2: unknown chord 'Q:min'"),
    ("0.0 2.0 N\n", "no chords in the file"),
])
def test_a_bad_lab_file_is_refused_naming_the_file_and_line(tmp_path, text, problem):
    lab = tmp_path / "bad.lab"
    lab.write_text(text)
    with pytest.raises(ChordFileError, match="bad.lab") as err:
        Chords.read(lab)
    assert problem in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ChordFileError, match="nothing.lab: cannot read"):
        Chords.read(tmp_path / "nothing.lab")


@needs_shared
def test_every_pop909_chord_file_reads():
    """POP909's own files are read for scoring without refusing a line (unknown qualities become no chord)."""
    files = sorted((SHARED_DATA / "pop" / "POP909").glob("*/chord_midi.txt"))[:80]
    assert len(files) == 80
    for path in files:
        chords = Chords.read(path, strict=False)
        assert len(chords.starts) > 10 and sum(bool(t) for t in chords.tones) > 10
