"""A track outside the tokenizer's pitches (REMI: a piano's 21..108) is heard by octaves inside them and written back
where it was: a piccolo's top octave and a synth's sub-bass are continued in their own registers, every seed note
comes back at its own pitch, and one line says so. Before, MidiTok left such notes out silently: the seed of a
piccolo and a sub-bass shrank to one empty bar and vanished from the written file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pretty_midi
import pytest
from symusic import Score

from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.registers import best_move, fit_registers
from musictx.io.score_io import read_score

BEAT = 0.6  # 100 bpm


def extremes(path: Path, bars: int = 4, piano: bool = False) -> Path:
    """A piccolo line at 110-115 and a sub-bass at 14-17 on every beat (and a piano's chords in range)."""
    pm = pretty_midi.PrettyMIDI(initial_tempo=100)
    piccolo, sub = pretty_midi.Instrument(72, name="Piccolo"), pretty_midi.Instrument(38, name="Sub")
    for k in range(4 * bars):
        t = k * BEAT
        piccolo.notes.append(pretty_midi.Note(90, 110 + k % 6, t, t + 0.5))
        sub.notes.append(pretty_midi.Note(90, 14 + k % 4, t, t + 0.55))
    pm.instruments += [piccolo, sub]
    if piano:
        keys = pretty_midi.Instrument(0, name="piano")
        keys.notes += [pretty_midi.Note(70, p, k * BEAT, (k + 1) * BEAT) for k in range(4 * bars) for p in (60, 64)]
        pm.instruments.append(keys)
    pm.write(str(path))
    return path


def test_a_track_moves_by_the_nearest_octaves_that_keep_the_most_notes():
    assert best_move(np.array([60, 70, 108]), 21, 108) == 0
    assert best_move(np.array([110, 115, 100]), 21, 108) == -12
    assert best_move(np.array([14, 9, 30]), 21, 108) == 12
    assert best_move(np.array([1, 2]), 21, 108) == 24
    # a wide part with one stray note stays where it is: moving it would leave more out
    assert best_move(np.array([25, 40, 60, 80, 110]), 21, 108) == 0


def test_fitted_tracks_are_moved_back_exactly_and_said_in_one_line(tmp_path):
    score = read_score(extremes(tmp_path / "x.mid", piano=True))
    before = [t.notes.numpy()["pitch"].tolist() for t in score.tracks]
    keys = [(t.name, int(t.program)) for t in score.tracks]
    registers = fit_registers(score, keys, [t.name for t in score.tracks], 21, 108)
    assert registers.moves == {("Piccolo", 72): -12, ("Sub", 38): 12} and registers.left_out == 0
    assert all(21 <= p <= 108 for t in score.tracks for p in t.notes.numpy()["pitch"].tolist())
    assert score.tracks[2].notes.numpy()["pitch"].tolist() == before[2]  # the piano was inside: untouched
    assert registers.line() == ("Piccolo read 1 octave down, Sub read 1 octave up, into the model's pitches 21..108, "
                                "and written back where they were")
    registers.back(score)
    assert [t.notes.numpy()["pitch"].tolist() for t in score.tracks] == before


def test_notes_still_outside_after_the_move_are_counted_and_said():
    score = Score(480)
    from symusic import Note, Track

    track = Track("wide", 0, False)
    track.notes = Note.from_numpy(*(np.array(c, dtype=np.int32) for c in
                                    ([0, 480, 960, 1440], [400] * 4, [5, 40, 90, 125], [80] * 4)))
    score.tracks.append(track)
    registers = fit_registers(score, [("wide", 0)], ["wide"], 21, 108)
    assert registers.moves == {} and registers.left_out == 2  # 5 and 125: no octave keeps more than two
    assert score.tracks[0].notes.numpy()["pitch"].tolist() == [40, 90]
    assert registers.line() == "2 notes outside pitches 21..108 left out"


@pytest.fixture(name="continued", scope="module")
def fixture_continued(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("registers")
    seed = extremes(tmp / "extremes.mid")
    record = run(GenerateOptions(seed_midi=str(seed), checkpoint="pop", num_samples=1, best_of=1, length_seconds=8,
                                 audio=False, output_dir=str(tmp / "out"), progress_every_s=None))
    return seed, tmp / "out" / record["samples"][0]["midi"], record


def test_a_piccolo_and_a_sub_bass_are_continued_in_their_own_registers(continued):
    seed, out, record = continued
    written = {i.name: i.notes for i in pretty_midi.PrettyMIDI(str(out)).instruments}
    given = {i.name: i.notes for i in pretty_midi.PrettyMIDI(str(seed)).instruments}
    seed_end = 16 * BEAT
    for name, notes in given.items():  # every seed note at its own pitch and onset
        kept = sorted((round(n.start, 2), n.pitch) for n in written[name] if n.start < seed_end - 0.01)
        assert kept == sorted((round(n.start, 2), n.pitch) for n in notes), name
    new = {name: [n.pitch for n in notes if n.start >= seed_end - 0.01] for name, notes in written.items()}
    assert len(new["Piccolo"]) > 4 and np.median(new["Piccolo"]) > 96  # the piccolo's register, not the piano's
    assert len(new["Sub"]) > 4 and np.median(new["Sub"]) < 36
    assert record["samples"][0]["tracks"]["Piccolo"] > 16


def test_the_run_says_which_tracks_it_heard_moved(tmp_path, capsys):
    seed = extremes(tmp_path / "extremes.mid", bars=2)
    run(GenerateOptions(seed_midi=str(seed), checkpoint="pop", num_samples=1, best_of=1, length_bars=1,
                        audio=False, output_dir=str(tmp_path / "out"), progress_every_s=None))
    out = capsys.readouterr().out
    assert "seed: bars 1-2 of" in out  # the whole seed, where it was one empty bar
    assert ("Piccolo (program 72) read 1 octave down, Sub (program 38) read 1 octave up, into the model's pitches "
            "21..108, and written back where they were") in out
