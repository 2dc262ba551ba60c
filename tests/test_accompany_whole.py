"""``task=accompany`` on a whole song (its melody, BRIDGE and PIANO), on real POP909 songs and the shipped pop model:
the song comes back whole, its own accompaniment replaced in the bars asked only, and the line says so; a file
with two tracks named PIANO is read as the PIANO part twice, not as a part the model never learnt."""

from __future__ import annotations

from collections import Counter

import pretty_midi
import pytest
from symusic import Score

from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.metrical_tokenizer import MetricalTokenizer
from musictx.tasks.song_bars import melody_song
from musictx.tasks.write_back import in_bars

from .test_metrical import POP, needs_pop

SONG = POP / "003" / "003.mid"


def _accompany(path, out, bars: str) -> tuple[dict, Score]:
    record = run(GenerateOptions(task="accompany", seed_midi=str(path), bars=bars, num_samples=1, audio=False,
                                 best_of=1, output_dir=str(out)))
    return record, Score(str(out / record["samples"][0]["midi"]))


def _notes(track, keep) -> list[tuple[int, int, int]]:
    a = track.notes.numpy()
    return sorted(zip(a["time"][keep].tolist(), a["pitch"][keep].tolist(), a["duration"][keep].tolist(), strict=True))


def _inside(song, track, s: int, e: int):
    return in_bars(song, track.notes.numpy()["time"], s, e, MetricalTokenizer().miditok.config.max_num_pos_per_beat)


@needs_pop
def test_a_whole_song_accompanied_in_some_bars_keeps_its_own_accompaniment_in_the_others(tmp_path):
    """003 with bars=5-6: its own BRIDGE and PIANO went from every bar of the file written, not only bars 5-6."""
    record, made = _accompany(SONG, tmp_path / "out", "5-6")
    assert ("(its own BRIDGE and PIANO replaced in bars 5-6 by ones written anew for its melody, kept in its other "
            "bars)") in record["what"]
    given, song = Score(str(SONG)), melody_song(MetricalTokenizer(), SONG, anew=True)
    assert [t.name for t in made.tracks] == [t.name for t in given.tracks] == ["MELODY", "BRIDGE", "PIANO"]
    for old, new in zip(given.tracks, made.tracks, strict=True):
        outside_old, outside_new = ~_inside(song, old, 4, 6), ~_inside(song, new, 4, 6)
        assert _notes(old, outside_old) == _notes(new, outside_new), old.name  # the other bars as they were
        if old.name == "MELODY":
            assert _notes(old, ~outside_old) == _notes(new, ~outside_new)  # the melody, note for note
    inside = [_notes(t, _inside(song, t, 4, 6)) for t in made.tracks[1:]]
    assert sum(map(len, inside)) > 0 and inside != [_notes(t, _inside(song, t, 4, 6)) for t in given.tracks[1:]]


def _two_pianos(path, split: bool):
    """003 with two tracks named PIANO: its PIANO split at middle C (``split``), or its BRIDGE renamed PIANO."""
    pm = pretty_midi.PrettyMIDI(str(SONG))
    if split:
        piano = next(i for i in pm.instruments if i.name == "PIANO")
        high = pretty_midi.Instrument(0, name="PIANO")
        high.notes = [n for n in piano.notes if n.pitch >= 60]
        piano.notes = [n for n in piano.notes if n.pitch < 60]
        pm.instruments.append(high)
    else:
        next(i for i in pm.instruments if i.name == "BRIDGE").name = "PIANO"
    pm.write(str(path))
    return path


@needs_pop
def test_a_second_track_named_piano_is_heard_as_the_piano_not_as_a_part_never_learnt(tmp_path):
    """The line said "PIANO (program 0) is a part the model never learnt (it learnt PIANO, MELODY and BRIDGE)"."""
    path = _two_pianos(tmp_path / "two.mid", split=False)
    record, made = _accompany(path, tmp_path / "out", "5-6")
    what = record["what"]
    assert "never learnt" not in what and "BRIDGE written for bars 5-6" in what
    assert "its 2 PIANO tracks are heard as the one PIANO part the model knows, each kept as it is" in what
    given = Score(str(path))
    assert [t.name for t in made.tracks][:3] == ["MELODY", "PIANO", "PIANO"]
    for old, new in zip(given.tracks, made.tracks[:3], strict=True):
        assert _notes(old, slice(None)) == _notes(new, slice(None))  # the given tracks untouched


@needs_pop
@pytest.mark.parametrize("bars", ["5-6", None])
def test_a_whole_song_with_two_piano_tracks_gets_its_new_piano_in_both(tmp_path, bars):
    """Its left-out tracks were listed "BRIDGE and PIANO and PIANO"; now both PIANO tracks take the new PIANO's notes
    of their register in the bars written, and keep their own in the others."""
    path = _two_pianos(tmp_path / "split.mid", split=True)
    if bars is None:  # the whole song is too long for one run: the line is made without sampling
        from musictx.tasks.song_bars import left_out_clause

        song = melody_song(MetricalTokenizer(), path, anew=True)
        assert left_out_clause(song, (0, song.n_bars)) == (" (its own BRIDGE and 2 PIANO tracks replaced: written "
                                                           "anew for its melody, the new PIANO shared among its 2 by "
                                                           "register)")
        return
    record, made = _accompany(path, tmp_path / "out", bars)
    assert ("(its own BRIDGE and 2 PIANO tracks replaced in bars 5-6 by ones written anew for its melody, the new "
            "PIANO shared among its 2 by register, kept in its other bars)") in record["what"]
    given, song = Score(str(path)), melody_song(MetricalTokenizer(), path, anew=True)
    assert [t.name for t in made.tracks] == ["MELODY", "BRIDGE", "PIANO", "PIANO"]
    for old, new in zip(given.tracks, made.tracks, strict=True):
        assert _notes(old, ~_inside(song, old, 4, 6)) == _notes(new, ~_inside(song, new, 4, 6)), old.name
    low, high = (_notes(t, _inside(song, t, 4, 6)) for t in made.tracks[2:])
    # by register: the left hand (one note at a time in the file) keeps one note an onset, a chord's other notes go to
    # the right hand's track (its median below the right hand's held for the sample drawn without the song's own
    # bars before; heard, the piano struck low chords, which the right hand's track takes)
    assert low and high and max(Counter(t for t, _, _ in low).values()) == 1
