"""The two-sample test (``musictx-evaluate mode=two_sample``): the classifiers tell two clearly different
samples apart and do not tell a sample from itself, the listener features read real POP909 music as a
listener would, and the mode runs end to end with the shipped pop model on real songs."""

from __future__ import annotations

import json

import numpy as np
import pretty_midi
import pytest

from musictx.checkpoints.model_store import load_pretrained
from musictx.decoding import SamplingOptions
from musictx.evaluation.run import evaluate, evaluation_options
from musictx.evaluation.scorecard import continue_metrical, real_music
from musictx.evaluation.two_sample import CVSettings, format_two_sample, shuffled_within, two_sample_test
from musictx.evaluation.two_sample_run import on_time_grid, on_velocity_grid
from musictx.listening.listen_features import SongContext, excerpt_features
from musictx.listening.note_span import Span

from .helpers import SHARED_DATA, needs_shared
from .metrical_fixtures import band_song, fixture_band_dir, fixture_remi_dir  # noqa: F401
from .test_metrical import POP, needs_pop

FAST = CVSettings(folds=3, repeats=2, permutations=5, top=5, seed=0)
PEDALLED = SHARED_DATA / "piano" / "asap" / "Chopin" / "Sonata_2" / "4th" / "Knoll10.mid"  # 75 s, much pedal


def _song_samples(rng, songs: int, features: int, shift: float):
    """Two samples of one row per song each: a song's own level (shared by both rows) plus noise; sample a
    moved by ``shift`` on its first 3 features."""
    level = rng.normal(0, 2, (songs, features))
    a, b = level + rng.normal(0, 1, level.shape), level + rng.normal(0, 1, level.shape)
    a[:, :3] += shift
    return a, b


def test_auc_near_one_for_different_samples_and_near_half_for_the_same():
    rng = np.random.default_rng(0)
    names = [f"f{j}" for j in range(20)]
    groups = np.arange(60)
    a, b = _song_samples(rng, 60, 20, shift=4.0)
    apart = two_sample_test(a, b, groups, names, FAST)
    for name in ("logistic", "boosting"):
        row = apart["classifiers"][name]
        assert row["auc"] > 0.95, row
        assert row["null_mean"] < 0.65 and row["p_value"] < 0.2, row
    assert {t["feature"] for t in apart["tells"][:3]} == {"f0", "f1", "f2"}
    assert apart["tells"][0]["mean_a"] - apart["tells"][0]["mean_b"] > 3
    a, b = _song_samples(rng, 60, 20, shift=0.0)
    same = two_sample_test(a, b, groups, names, FAST)
    for name in ("logistic", "boosting"):
        assert abs(same["classifiers"][name]["auc"] - 0.5) < 0.15, same["classifiers"][name]


def test_labels_are_shuffled_within_each_song():
    rng = np.random.default_rng(1)
    y, g = np.array([1, 0] * 50), np.repeat(np.arange(50), 2)
    out = shuffled_within(y, g, rng)
    assert all(sorted(out[g == k]) == [0, 1] for k in range(50))  # each song keeps one excerpt a side
    assert 10 < np.sum(out != y) / 2 < 40  # about half the songs swapped


@needs_pop
def test_features_read_real_music_as_a_listener_would():
    path = POP / "003" / "003.mid"
    pm = pretty_midi.PrettyMIDI(str(path))
    real, song = Span.from_pretty_midi(pm), SongContext.read(path, pm)
    seed = real.window(25, 35)
    f = excerpt_features(real, 35, 65, song, seed)
    assert 40 <= len(f) <= 110 and all(np.isfinite(v) for k, v in f.items())
    assert f["har_chord_tone_piano"] > 0.85 and f["trk_melody_present"] == 1.0
    off = Span(real.start, real.end, real.pitch + 1, real.velocity, real.track, real.track_names)  # a semitone up
    g = excerpt_features(off, 35, 65, song, seed)
    assert g["har_chord_tone_piano"] < 0.5 and g["har_bass_is_root"] < 0.2 < 0.8 < f["har_bass_is_root"]
    assert g["har_triad_fit_piano"] == pytest.approx(f["har_triad_fit_piano"]) and f["har_triad_fit_piano"] > 0.8
    noise = np.random.default_rng(0).integers(40, 80, len(real))
    r = excerpt_features(Span(real.start, real.end, noise, real.velocity, real.track, real.track_names), 35, 65,
                         song, seed)
    assert r["har_triad_fit_piano"] < 0.65 and r["har_chord_tone_piano"] < 0.5
    names = np.asarray(real.track_names)
    no_melody = real.select(names[real.track] != "MELODY")
    h = excerpt_features(no_melody, 35, 65, song, seed)
    assert h["trk_melody_present"] == 0.0 and h["trk_melody_silent"] == 1.0
    assert h["tex_at_once_mean"] < f["tex_at_once_mean"]


def test_mode_runs_end_to_end_with_the_shipped_pop_model(remi_dir, tmp_path):
    opts = evaluation_options(checkpoint="pop", data={"dir": str(remi_dir)}, split="train", mode="two_sample",
                              progress=False, output_dir=str(tmp_path / "out"),
                              two_sample={"seed_from": 2, "seed_seconds": 4, "length_seconds": 6, "folds": 2,
                                          "repeats": 1, "permutations": 2, "top": 4, "exclude": ["har_chord"]})
    result, path = evaluate(opts)
    res = result["two_sample"]
    main, control = res["generated_vs_real"], res["real_vs_real"]
    assert main["groups"] == len(res["songs"]) >= 3
    # the headline leaves out every feature read against the annotated chords (3 chord-tone shares, 2 of the
    # bass); beside it, all but what exclude= left out (the chord-tone shares)
    assert len(res["features"]) == len(res["songs"][0]["real"]) - 5
    assert not any(n.startswith(("har_chord", "har_bass")) for n in main["feature_auc"])
    assert "har_triad_fit" in main["feature_auc"]
    full = res["with_annotated_chords"]
    assert len(full["features"]) == len(res["songs"][0]["real"]) - 3 and "har_bass_is_root" in full["features"]
    assert 0 <= full["generated_vs_real"]["classifiers"]["logistic"]["auc"] <= 1
    for name in ("logistic", "boosting"):
        assert 0 <= main["classifiers"][name]["auc"] <= 1 and "null_p95" in main["classifiers"][name]
        assert 0 <= control["classifiers"][name]["auc"] <= 1 and "null_p95" not in control["classifiers"][name]
    written = json.loads(path.read_text())
    assert written["two_sample"]["generated_vs_real"]["tells"][0]["feature"] in res["features"]
    # a metrical model: the song as it is beside the song as the tokenizer writes it, and the one against the other
    as_is = res["as_is"]
    assert as_is["features"] == res["features"] and res["songs"][0]["as_is"]["written"] == res["songs"][0]["real"]
    for name in ("logistic", "boosting"):
        for block in ("generated_vs_real", "real_vs_real", "written_vs_as_is"):
            assert 0 <= as_is[block]["classifiers"][name]["auc"] <= 1
    table = format_two_sample(res)
    assert "the grid alone" in table
    # the control's excerpts are length_seconds long (6 s here): the header said "30 s" whatever was asked
    assert "AUC real vs real (next 6 s vs the 6 s after)" in table and "30 s" not in table
    assert "2-fold CV" in table


@needs_pop
def test_the_headlines_real_music_is_the_song_as_the_tokenizer_writes_it():
    """The real next 30 s of a POP909 song as the pop model's tokenizer writes it: the same notes, every onset on
    the song's sixteenths and every end too, where the song's own notes are held a few tens of ms past them (the
    model cannot write that, and it read as more notes sounding at once)."""
    net, tok = load_pretrained("pop")
    path = POP / "003" / "003.mid"
    pm = pretty_midi.PrettyMIDI(str(path))
    cont = continue_metrical(net.eval(), tok, path, {"seed_seconds": 10, "seed_from": 25, "length_seconds": 15,
                                                     "num_samples": 1}, SamplingOptions())
    song, t0 = SongContext.read(path, pm), cont.seed_end
    written, as_is = cont.written.window(t0, t0 + 30), real_music(pm, tok).window(t0, t0 + 30)
    assert abs(len(written) - len(as_is)) <= 0.02 * len(as_is)  # the same notes
    off_grid = [np.abs(4 * b - np.round(4 * b)) for b in (song.beat_of(s.start) for s in (written, as_is))]
    assert off_grid[0].max() < 0.02 < off_grid[1].max()  # in sixteenths
    f_written, f_as_is = (excerpt_features(s, t0, t0 + 30, song, s.window(t0 - 10, t0)) for s in (written, as_is))
    # the song's notes held a few tens of ms past the next sixteenth are heard there; as the tokenizer writes
    # them they end on it (here 3.64 against 4.15 notes sounding, sampled 20 ms after each sixteenth)
    assert f_written["tex_sounding_mean"] < f_as_is["tex_sounding_mean"] - 0.3


def test_bad_settings_are_refused_before_any_work(remi_dir):
    from musictx.evaluation.run import EvaluateError, run_evaluation

    opts = evaluation_options(checkpoint="pop", data={"dir": str(remi_dir)}, mode="two_sample",
                              two_sample={"folds": 1})
    with pytest.raises(EvaluateError, match="two_sample.folds must be a whole number >= 2"):
        run_evaluation(opts)


@needs_shared
def test_a_performance_is_compared_as_it_sounds_with_its_pedal():
    """The piano model's notes carry the sustain pedal in their lengths, so the real performance beside them is
    read with its pedal too (as the scorecard reads it), not by its keys' lengths, which made the real music look
    sparse and the continuation crowded (a false tell)."""
    from musictx.checkpoints.model_store import load_model
    from musictx.decoding import SamplingOptions
    from musictx.evaluation.two_sample_run import song_excerpts

    net, tok, _ = load_model("piano")
    opts = evaluation_options(checkpoint="piano", mode="two_sample",
                              two_sample={"seed_from": 5, "seed_seconds": 5, "length_seconds": 8}).two_sample
    row = song_excerpts(net, tok, PEDALLED, opts, SamplingOptions.from_mapping(opts))
    pm = pretty_midi.PrettyMIDI(str(PEDALLED))
    t0, seed_start = row["seed_end"], row["seed_start"]
    song = SongContext.read(PEDALLED, pm)
    for sustain in (True, False):
        real = Span.from_pretty_midi(pm, sustain=sustain)
        real.velocity = on_velocity_grid(tok, real.velocity)
        real = on_time_grid(tok, real, seed_start)
        heard = excerpt_features(real, t0, t0 + 8, song, real.window(seed_start, t0))
        same = heard.keys() == row["real"].keys() and all(
            np.isclose(heard[k], row["real"][k], equal_nan=True) for k in heard)
        assert same is sustain, sustain
    keys = Span.from_pretty_midi(pm)  # the keys' lengths, without the pedal
    keys_only = excerpt_features(keys, t0, t0 + 8, song, keys.window(seed_start, t0))
    assert row["real"]["tex_sounding_mean"] > 1.2 * keys_only["tex_sounding_mean"]  # the pedal holds notes on


def test_the_real_performance_is_timed_on_the_tokenizers_grid_as_the_model_writes():
    """The piano model writes every time on its tokenizer's 10 ms grid from where its clock starts; the real notes
    beside it are put on the same grid, so that sub-step timing is no tell. A metrical tokenizer's are left."""
    from musictx.checkpoints.model_store import load_model
    from musictx.io.tokenizer import EventTokenizer

    real = Span(np.array([1.003, 1.5049, 2.0021]), np.array([1.0041, 1.9012, 2.4983]), np.array([60, 64, 67]),
                np.array([80, 80, 80]), np.zeros(3, dtype=np.int64), ["piano"])
    tok = EventTokenizer()
    timed = on_time_grid(tok, real, origin=0.995)
    assert np.allclose(timed.start, [1.005, 1.505, 2.005]) and np.allclose(timed.end, [1.015, 1.905, 2.495])
    assert np.allclose(real.start, [1.003, 1.5049, 2.0021])  # the span given is left as it was
    assert timed.end[0] > timed.start[0]  # a note shorter than a step keeps one step
    _, metrical, _ = load_model("pop")
    assert on_time_grid(metrical, real, origin=0.995) is real
