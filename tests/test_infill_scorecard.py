"""The infill and accompaniment scorecards: chord labels read as POP909 writes them, the chord-tone share
telling a real accompaniment from chance, and both scorecards run end to end on POP909 songs with the
shipped pop model (embedding grown for the infill sentinels, untrained on them)."""

from __future__ import annotations

import numpy as np
import pytest

from musictx.evaluation.chords import Harmony
from musictx.evaluation.infill_scorecard import file_span, seam_interval
from musictx.evaluation.task_scorecard import format_task_scorecard, run_task_scorecard
from musictx.io.chord_labels import chord_pitch_classes
from musictx.listening.note_span import Span

from .test_infill import fixture_grown  # noqa: F401  (the module-scoped model fixture)
from .test_metrical import POP, needs_pop

SETTINGS = {"first_bar": 17, "bars": 2, "seconds": 8, "seed": 0}


def test_chord_labels():
    assert chord_pitch_classes("G:min7") == {7, 10, 2, 5}
    assert chord_pitch_classes("Eb:sus2") == {3, 5, 10}
    assert chord_pitch_classes("C#:maj/3") == {1, 5, 8}
    assert chord_pitch_classes("Bb:sus4(b7)") == {10, 3, 5, 8}
    assert chord_pitch_classes("N") == frozenset() and chord_pitch_classes("C:weird") == frozenset()


def test_seam_interval_reads_the_top_line_on_both_sides():
    def span(times, pitches):
        t = np.asarray(times, float)
        return Span(t, t + 0.2, np.asarray(pitches), np.full(len(t), 80), np.zeros(len(t), int), ["x"])
    before, middle, after = span([0, 0], [60, 72]), span([1, 1.5], [74, 65]), span([3], [67])
    assert seam_interval(before, middle, after) == (2 + 2) / 2  # 72 -> 74 and 65 -> 67
    assert np.isnan(seam_interval(span([], []), middle, span([], [])))


@needs_pop
def test_a_real_accompaniment_plays_chord_tones_far_above_chance():
    song = POP / "003"
    harmony = Harmony.read(song / "chord_midi.txt", song / "beat_midi.txt")
    real = file_span(song / "003.mid")
    piano = real.select(np.asarray(real.track_names)[real.track] == "PIANO")
    share, chance = harmony.chord_tone_share(piano.start, piano.pitch)
    assert share > 0.8 and 0.2 < chance < 0.35
    rng = np.random.default_rng(0)
    random_share, _ = harmony.chord_tone_share(piano.start, rng.integers(40, 80, len(piano)))
    assert abs(random_share - chance) < 0.08
    full = harmony.pitch_classes_per_span(piano.start, piano.pitch)
    octaves = harmony.pitch_classes_per_span(piano.start, 48 + (piano.pitch % 12 == 0) * 12)  # C or C an octave up
    assert 2.5 < full < 5 and octaves == pytest.approx(1.0)


@needs_pop
@pytest.mark.parametrize("task", ["infill", "accompany"])
def test_scorecards_run_on_pop909_songs(grown, task):
    net, tok = grown
    songs = [POP / "006" / "006.mid", POP / "008" / "008.mid"]
    result = run_task_scorecard(net, tok, songs, SETTINGS, task, progress=lambda _: None)
    m = result["means"]
    if task == "infill":
        assert m["model"]["unchanged"] == 1.0 and m["model"]["on_bar_lines"] == 1.0
        assert m["real"]["pc_correlation"] == pytest.approx(1.0) and m["chance"]["grid_share"] < 0.4
        assert np.isfinite(m["model"]["nll_both"]) and np.isfinite(m["model"]["nll_left"])
    else:
        assert m["model"]["melody_unchanged"] == 1.0
        assert m["real"]["chord_tone_share"] > m["chance"]["chord_tone_share"] + 0.4
    table = format_task_scorecard(result)
    assert table.count("\n| ") == (12 if task == "infill" else 14) + 1  # the header and one row per measure


def test_an_infill_scorecard_of_one_song_is_refused_not_scored_against_itself(tmp_path):
    """Its chance column pastes another song's bars: with one song that would be the song itself. Refused before
    any model or song is read."""
    from musictx.evaluation.checks import EvaluateError

    with pytest.raises(EvaluateError, match=r"mode=infill needs 2 songs or more.*1 given \(infill.max_songs=1\)"):
        run_task_scorecard(None, None, [tmp_path / "only.mid"], {**SETTINGS, "max_songs": 1}, "infill")
