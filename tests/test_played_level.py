"""How loud a model's training music is played (`musictx.io.played_level`): read from the token arrays, it is the
median velocity of the notes the tokenizer's own decoder gives back, for both tokenizers and across pieces; a
model trained with the real Lightning Trainer records it with its weights, and a soft seed is then heard at it."""

from __future__ import annotations

import numpy as np
import pretty_midi

from musictx.checkpoints.model_store import load_model, load_pretrained, save_model_folder
from musictx.io.dynamics import level_rule
from musictx.io.played_level import median_velocity, velocity_counts
from musictx.io.token_store import TokenArrays, load_tokenizer
from musictx.io.tokenizer import EventTokenizer
from musictx.training.data import MusicDataModule

from .metrical_fixtures import band_song, fixture_band_dir, fixture_remi_checkpoint, fixture_remi_dir  # noqa: F401


def played(path, loudness: list[int], pitch: int = 60):
    """A file of one note a quarter second at each of ``loudness``'s velocities in turn."""
    pm = pretty_midi.PrettyMIDI()
    piano = pretty_midi.Instrument(0)
    piano.notes = [pretty_midi.Note(v, pitch + i % 12, 0.25 * i, 0.25 * i + 0.2) for i, v in enumerate(loudness)]
    pm.instruments.append(piano)
    pm.write(str(path))
    return path


def decoded_median(tok, pieces: list[np.ndarray]) -> float:
    """The middle velocity (the upper one of an even count) of the notes the tokenizer decodes from the pieces."""
    velocities = np.sort(np.concatenate([tok.decode_notes(p).velocity for p in pieces]))
    return float(velocities[len(velocities) // 2])


def test_performance_pieces_each_start_at_the_default_bin(tmp_path):
    """Performance events give a VELOCITY id only where the bin changes, and the decoder plays a piece at the
    default bin until its first: a piece that opens mezzo-forte without saying so, after a loud one, is heard at
    the default, as its decoder plays it."""
    tok = EventTokenizer()
    loud = tok.encode(played(tmp_path / "loud.mid", [120] * 9))
    encoded = tok.encode(played(tmp_path / "mf.mid", [64] * 6 + [30] * 5))
    assert encoded[0] == tok.velocity_ids()[tok.config.default_velocity_bin - 1]  # the encoder says it anyway
    soft_opening = encoded[1:]  # the same notes, unsaid
    assert np.array_equal(tok.decode_notes(soft_opening).velocity, tok.decode_notes(encoded).velocity)
    tokens = np.concatenate([loud, soft_opening])
    values, counts = velocity_counts(tok, tokens, np.array([0, len(loud), len(tokens)]))
    assert counts.sum() == 20 and median_velocity(values, counts) == decoded_median(tok, [loud, soft_opening])
    assert median_velocity(values, counts) == tok.config.bin_velocity(np.array([tok.config.default_velocity_bin]))[0]
    assert median_velocity(values, counts * 0) is None


def test_real_performances_read_as_their_decoder_plays_them(tmp_path):
    tok = EventTokenizer()
    pieces = [tok.encode(played(tmp_path / f"{k}.mid", list(np.random.default_rng(k).integers(5, 127, 40 + k))))
              for k in range(3)]
    offsets = np.cumsum([0] + [len(p) for p in pieces])
    values, counts = velocity_counts(tok, np.concatenate(pieces), offsets)
    assert counts.sum() == 123 and median_velocity(values, counts) == decoded_median(tok, pieces)


def test_a_metrical_split_read_as_its_notes_are_played(remi_dir):
    """The band songs' melody at 90 and chords at 70, through MidiTok's velocity grid: one Velocity id a note."""
    tok, train = load_tokenizer(remi_dir), TokenArrays(remi_dir, "train")
    values, counts = velocity_counts(tok, train.tokens, train.offsets)
    pieces = [np.asarray(train.piece(i)) for i in range(len(train))]
    score_velocities = np.concatenate([[n.velocity for t in tok.decode_score(p).tracks for n in t.notes]
                                       for p in pieces])
    assert counts.sum() == len(score_velocities) > 100
    assert median_velocity(values, counts) == float(np.sort(score_velocities)[len(score_velocities) // 2])
    assert set(values[counts > 0].tolist()) <= {71.0, 87.0, 95.0}  # 70 and 90 on the grid


def test_training_records_how_loud_its_music_is_played_and_a_soft_seed_is_heard_there(remi_checkpoint, remi_dir,
                                                                                       tmp_path):
    net, tok, _ = load_model(remi_checkpoint)
    level = MusicDataModule(remi_dir).velocity()
    assert net.heard_velocity == level is not None and 70 <= level <= 95
    folder = save_model_folder(net, tok, tmp_path / "model")
    assert load_model(str(folder))[0].heard_velocity == level  # config.json's "velocity"
    assert level_rule(50, load_model(str(folder))[0]).heard_at == level
    shipped, _ = load_pretrained("pop")
    assert shipped.heard_velocity == 87  # as recorded (its train split's notes read this way: 87 too)
