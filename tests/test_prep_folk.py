"""source=folk: ABC folk tunes from the music21 corpus, played with their repeats, as a prep source; the
composers' MusicXML folders of the same corpus (held-out music no model trained on) through the same path."""

from __future__ import annotations

import json

import numpy as np
import pretty_midi
import pytest

from data_prep.prepare import write_dataset
from data_prep.safety import PrepError
from musictx.commands.prep import compose_options
from musictx.io.token_store import TokenArrays

music21 = pytest.importorskip("music21", reason="source=folk needs music21 (the corpus extra)")

from data_prep.folk import (  # noqa: E402
    DOWNBEAT,
    OFF_BEAT,
    ON_BEAT,
    collection_files,
    one_format_each,
    tune_to_midi,
)

TUNE = """X:1
T:Test tune
M:4/4
L:1/8
K:C
|:C2 D2 E2 F2|G A B c d2 e2:|
|c8|]
"""


def test_repeat_marks_are_played_out_with_accents_and_tempo():
    score = music21.converter.parse(TUNE, format="abc")
    pm, expanded = tune_to_midi(score, default_bpm=120)
    notes = pm.instruments[0].notes
    assert expanded and len(notes) == 2 * 10 + 1  # the section, the section again, the last note
    first, again = notes[:10], notes[10:20]
    assert [n.pitch for n in first] == [n.pitch for n in again] == [60, 62, 64, 65, 67, 69, 71, 72, 74, 76]
    # 120 quarter notes a minute: a bar of 4/4 lasts 2 s, so the repeat starts 4 s in (two bars)
    assert again[0].start == pytest.approx(4.0) and first[1].start == pytest.approx(0.5)
    assert [n.velocity for n in first[:4]] == [DOWNBEAT, ON_BEAT, ON_BEAT, ON_BEAT]
    assert [n.velocity for n in first[4:6]] == [DOWNBEAT, OFF_BEAT]  # G on beat 1, A an eighth after it
    assert first[0].end - first[0].start == pytest.approx(0.5 * 0.95)  # detached a little


def test_a_tune_played_twice_starts_again_where_its_last_bar_ends():
    # A pickup (one eighth) and a short last bar: once through lasts 2 bars of 4/4, 4 s at 120 bpm.
    score = music21.converter.parse("X:1\nT:t\nM:4/4\nL:1/8\nK:C\nG|c2 e2 g2 e2|c6 z|]\n", format="abc")
    once, _ = tune_to_midi(score, default_bpm=120)
    twice, _ = tune_to_midi(score, default_bpm=120, plays=2)
    a, b = once.instruments[0].notes, twice.instruments[0].notes
    assert len(b) == 2 * len(a) == 12
    assert [n.pitch for n in b[6:]] == [n.pitch for n in a] == [67, 72, 76, 79, 76, 72]
    assert [n.velocity for n in b[6:]] == [n.velocity for n in a]
    length = b[6].start - a[0].start  # the pickup again, on the same beat of the bar as the first time
    assert length == pytest.approx(4.0)
    assert [n.start - length for n in b[6:]] == pytest.approx([n.start for n in a])
    assert b[7].start == pytest.approx(4.25) and b[7].velocity == DOWNBEAT  # the second time's first downbeat


def test_a_cache_rendered_otherwise_is_rendered_again(tmp_path):
    from data_prep.folk import export_folk

    cache = tmp_path / "cache"
    export_folk(cache, ["ryansMammoth"], bpm=120, num_workers=0, limit=2)
    once = sorted(cache.rglob("*.mid"))
    n_once = [len(pretty_midi.PrettyMIDI(str(p)).instruments[0].notes) for p in once]
    export_folk(cache, ["ryansMammoth"], bpm=120, num_workers=0, limit=2, plays=2)
    twice = sorted(cache.rglob("*.mid"))
    assert twice == once  # the same tunes, written again, none left over from the first rendering
    assert [len(pretty_midi.PrettyMIDI(str(p)).instruments[0].notes) for p in twice] == \
        [2 * n for n in n_once]
    with pytest.raises(ValueError, match="folk_plays must be >= 1"):
        export_folk(cache, ["ryansMammoth"], bpm=120, plays=0)


@pytest.mark.parametrize("body", ["|:CDEF|GABc|", "|:CDEF|:GABc:|"])  # a start without an end; two starts
def test_malformed_repeats_keep_the_tune_as_written(body):
    score = music21.converter.parse(f"X:1\nT:t\nM:4/4\nL:1/4\nK:C\n{body}\n", format="abc")
    pm, expanded = tune_to_midi(score, default_bpm=120)
    notes = pm.instruments[0].notes
    assert not expanded and [n.pitch for n in notes] == [60, 62, 64, 65, 67, 69, 71, 72]
    assert [n.start for n in notes] == pytest.approx([0.5 * i for i in range(8)])
    assert [n.velocity for n in notes[:5]] == [DOWNBEAT, ON_BEAT, ON_BEAT, ON_BEAT, DOWNBEAT]


def test_unknown_collection_is_named():
    with pytest.raises(FileNotFoundError, match="'nosuchfolk' is not a music21 corpus collection"):
        collection_files(["nosuchfolk"])


def test_folk_source_prepares_tunes_whose_sections_come_back(tmp_path):
    opts = compose_options(["source=folk", f"output_dir={tmp_path / 'folk'}", f"folk_cache_dir={tmp_path / 'cache'}",
                            "folk_collections=[ryansMammoth]", "folk_limit=6", "num_workers=0",
                            "split.validation=0.2", "split.test=0.2"])
    res = write_dataset(opts, progress=False)
    assert sum(s.files for s in res.stats.values()) + len(res.skipped) == 6
    assert sum(s.files for s in res.stats.values()) >= 5
    records = [json.loads(p.read_text()) for p in (tmp_path / "cache" / "ryansMammoth").glob("*/export.json")]
    assert len(records) == 6 and sum(len(r["written"]) for r in records) >= 5
    # Played-out repeats: most tunes hold a passage of 32 tokens that comes back literally later in the piece.
    arr = TokenArrays(res.out_dir, "train")
    with_repeat = 0
    for i in range(len(arr.lengths)):
        ids = np.asarray(arr.tokens[arr.offsets[i]:arr.offsets[i + 1]])
        grams = {tuple(ids[j:j + 32]) for j in range(0, len(ids) // 2, 4)}
        with_repeat += any(tuple(ids[j:j + 32]) in grams for j in range(len(ids) // 2, len(ids) - 32))
    assert with_repeat >= len(arr.lengths) // 2
    # a second run reads the cache only: no tune is written again
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "cache").rglob("*.mid")}
    write_dataset(opts, progress=False)
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "cache").rglob("*.mid")} == stamps


def test_a_work_in_two_formats_is_kept_once_and_nested_movements_keep_their_own_folders():
    files = collection_files(["beethoven"])
    names = {str(p).split("beethoven/", 1)[1] for _, p in files}
    assert {"opus18no1/movement3.krn", "opus18no1/movement3.mxl", "opus59no1/movement3.mxl"} <= names
    kept, left = one_format_each(files)
    assert "beethoven/opus18no1/movement3.krn" in left and len(kept) + len(left) == len(files)
    kept_names = [str(p).split("beethoven/", 1)[1] for _, p in kept]
    assert "opus18no1/movement3.mxl" in kept_names and "opus18no1/movement3.krn" not in kept_names
    assert len({n.rsplit(".", 1)[0] for n in kept_names}) == len(kept_names)  # one file per work


def test_a_musicxml_score_is_prepared_as_a_performance(tmp_path, capsys):
    """A composer's folder (Joplin's Maple Leaf Rag, MusicXML): played at its marked tempo with the accent
    rule, tokenized, and said so in the summary line."""
    opts = compose_options(["source=folk", f"output_dir={tmp_path / 'rag'}", f"folk_cache_dir={tmp_path / 'cache'}",
                            "folk_collections=[joplin]", "num_workers=0", "split.validation=0", "split.test=0",
                            "allow_empty=true"])
    res = write_dataset(opts, progress=False)
    assert "1 tunes from 1 score files" in capsys.readouterr().out
    [midi] = (tmp_path / "cache" / "joplin").rglob("*.mid")
    notes = pretty_midi.PrettyMIDI(str(midi)).instruments[0].notes
    assert len(notes) > 1000 and {n.velocity for n in notes} <= {DOWNBEAT, ON_BEAT, OFF_BEAT}
    assert res.stats["train"].files == 1 and res.stats["train"].tokens > 5000


def test_folk_cache_must_not_be_the_output(tmp_path):
    opts = compose_options(["source=folk", f"output_dir={tmp_path / 'data'}",
                            f"folk_cache_dir={tmp_path / 'data' / 'c'}", "folk_limit=1"])
    with pytest.raises(PrepError, match="is a parent of folk_cache_dir"):
        write_dataset(opts, progress=False)


def test_music21_melodies_take_the_melody_role_in_metrical_tokens():
    """A folk tune is one track named as a melody, and a chorale's soprano is its melody: in a pop model's
    tokens they take MELODY's program (80), the chorale's lower voices the piano's family."""
    from symusic import Note, Score, Track

    from musictx.io.score_prep import ROLE_PROGRAMS, assign_programs, role_of

    pm, _ = tune_to_midi(music21.converter.parse(TUNE, format="abc"), default_bpm=120)
    assert role_of(pm.instruments[0].name) == "MELODY"
    chorale = Score(480)
    for k, name in enumerate(("Soprano", "Alto", "Tenor", "Bass")):
        track = Track(name, 0, False)
        track.notes.append(Note(0, 480, 72 - 5 * k, 80))
        chorale.tracks.append(track)
    mapping = assign_programs(chorale)
    assert [t.program for t in mapping.tracks] == [ROLE_PROGRAMS["MELODY"], 0, 1, 2]
    assert [t.name for t in mapping.tracks] == ["Soprano", "Alto", "Tenor", "Bass"]
