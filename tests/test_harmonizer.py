"""The melody harmonizer (musictx.models.harmonizer): its features are transposition-equivariant, the
shipped weights guess POP909 chord tones far above chance on held-out songs, and the accompaniment's lean
follows its guesses (measured on a real song with the shipped pop model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from symusic import Score

from musictx.checkpoints.model_store import load_pretrained
from musictx.decoding.sampling_options import SamplingOptions
from musictx.evaluation.chords import Harmony
from musictx.io.metrical_tokenizer import MetricalTokenizer
from musictx.io.score_prep import ROLE_PROGRAMS
from musictx.models.harmonizer import N_FEATURES, WEIGHTS, Harmonizer, half_bar_features
from musictx.safe_output import OutputError
from musictx.tasks.accompany import accompany_song, guessed_harmony
from musictx.tasks.metrical_seeds import ticks_to_seconds
from musictx.tasks.song_bars import melody_song, roles_to_write
from musictx.training.harmonizer import precision_at, run, song_examples

from .test_metrical import POP, needs_pop

TEST_SONG = POP / "035" / "035.mid"  # a validation song: the harmonizer never trained on it


def melody_notes(seed: int = 0):
    rng = np.random.default_rng(seed)
    onsets = np.sort(rng.choice(np.arange(0, 16 * 480, 120), 40, replace=False))
    ends = onsets + rng.integers(60, 480, len(onsets))
    return onsets, ends, rng.integers(60, 80, len(onsets)), np.arange(0, 17 * 1920, 1920)[:5]


def test_features_move_with_a_transposition():
    onsets, ends, pitches, lines = melody_notes()
    x = half_bar_features(onsets, ends, pitches, lines)
    up = half_bar_features(onsets, ends, pitches + 5, lines)  # up a fourth
    assert x.shape == (8, 12, N_FEATURES)
    assert np.allclose(up[:, 5], x[:, 0]) and np.allclose(up[:, 2], x[:, 9])  # candidate c + 5 reads as c did
    probs = Harmonizer.load().chord_tone_probs(x)
    assert np.allclose(Harmonizer.load().chord_tone_probs(up), np.roll(probs, 5, axis=1), atol=1e-6)


@needs_pop
def test_shipped_weights_guess_chord_tones_of_an_unseen_song():
    x, tones = song_examples(MetricalTokenizer(), TEST_SONG)
    probs = torch.as_tensor(Harmonizer.load().chord_tone_probs(x))
    top1, top2, _ = precision_at(probs, torch.as_tensor(tones))
    chance = float(tones.mean())  # the share of pitch classes a chord holds
    assert top1 > 0.6 > chance + 0.2 and top2 > 0.55


@needs_pop
def test_the_accompaniment_leans_to_the_guessed_chord_tones(tmp_path):
    torch.set_num_threads(1)
    net, tok = load_pretrained("pop")
    score = Score(str(TEST_SONG))
    score.tracks = [t for t in score.tracks if t.name.upper() == "MELODY"]
    score.dump_midi(str(tmp_path / "melody.mid"))
    (tmp_path / "beat_midi.txt").write_bytes((TEST_SONG.parent / "beat_midi.txt").read_bytes())
    song = melody_song(tok, tmp_path / "melody.mid")
    s, e = 16, 24
    guess = np.array([pair for pair in guessed_harmony(song, {ROLE_PROGRAMS["MELODY"]}, s, e)])  # (bars, 2, 12)
    assert guess.shape == (e - s, 2, 12) and (guess.max(axis=-1) > 0.5).mean() > 0.8
    harmony = Harmony.read(TEST_SONG.parent / "chord_midi.txt", TEST_SONG.parent / "beat_midi.txt")
    shares = {}
    for strength in (0.0, 16.0):
        opts = SamplingOptions(seed=0, hooks={"harmony_lean": {"strength": 0.0, "guess": strength}})
        out, _ = accompany_song(net, tok, song, roles_to_write(song, None), s, e, opts)
        pitches = np.concatenate([t.notes.numpy()["pitch"] for t in out.tracks[1:]])  # the new tracks' notes
        ticks = np.concatenate([t.notes.numpy()["time"] for t in out.tracks[1:]])
        assert len(pitches) > 20
        shares[strength] = harmony.chord_tone_share(ticks_to_seconds(out, ticks), pitches)[0]
    assert shares[16.0] > shares[0.0] + 0.15  # no lean at all against the lean to the guesses


def test_training_never_writes_into_the_package_or_over_a_file(tmp_path):
    """Both refused before any data is read (the data folder here does not even exist)."""
    with pytest.raises(OutputError, match="inside the installed musictx package"):
        run(tmp_path / "no_data", WEIGHTS)
    there = tmp_path / "weights.npz"
    there.write_bytes(b"mine")
    with pytest.raises(OutputError, match="already exists and this run did not write it"):
        run(tmp_path / "no_data", there)
    assert there.read_bytes() == b"mine"


def test_a_dataset_of_performance_events_is_refused_by_its_kind_before_any_song_is_read(prepared_dir, tmp_path):
    """Each song had been skipped one by one with the tokenizer's AttributeError ('fit_registers')."""
    from musictx.io.token_store import DatasetFormatError

    with pytest.raises(DatasetFormatError, match=r"--data .*: holds Performance events; the harmonizer reads songs on "
                                                 r"a beat grid .* prepared with tokenizer=remi"):
        run(prepared_dir, tmp_path / "weights.npz")
    assert not (tmp_path / "weights.npz").exists()
