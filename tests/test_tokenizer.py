"""The Performance tokenizer: layout, hand-made encodings, decoding of any ids, round trips on real files."""

from __future__ import annotations

import random
import re

import numpy as np
import pretty_midi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from musictx.io.midi_io import MidiReadError, Notes, apply_sustain, read_notes
from musictx.io.tokenizer import EventTokenizer, TokenizerConfig, TokenizerMismatchError
from tests.helpers import EDGE_DIR, needs_shared, piano_files, write_random_midi

TOK = EventTokenizer()


def tokens(ids) -> list[str]:
    return [TOK.id_to_token(int(i)) for i in ids]


def notes_of(rows) -> Notes:
    """rows: (start, end, pitch, velocity)."""
    a = np.array(rows, dtype=np.float64).reshape(-1, 4)
    return Notes(a[:, 0], a[:, 1], a[:, 2].astype(np.int64), a[:, 3].astype(np.int64))


def assert_same_notes(a: Notes, b: Notes) -> None:
    for f in Notes.FIELDS:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


def test_default_layout_is_the_papers_388_events_plus_pad_and_eos():
    assert TOK.vocab_size == 390
    assert tokens([0, 127, 128, 255, 256, 355, 356, 387, 388, 389]) == [
        "NOTE_ON_0", "NOTE_ON_127", "NOTE_OFF_0", "NOTE_OFF_127", "TIME_SHIFT_1", "TIME_SHIFT_100",
        "VELOCITY_1", "VELOCITY_32", "PAD", "EOS"]
    assert (TOK.pad_id, TOK.eos_id) == (388, 389)


def test_velocity_bins_follow_the_paper():
    for v in range(1, 128):
        ids = TOK.encode_notes(notes_of([(0, 1, 60, v)]))
        assert tokens(ids)[0] == f"VELOCITY_{(v - 1) // 4 + 1}"


def test_hand_made_encoding():
    notes = notes_of([(0.0, 0.5, 60, 80), (0.25, 0.5, 64, 77), (3.0, 3.004, 67, 20)])
    assert tokens(TOK.encode_notes(notes)) == [
        "VELOCITY_20", "NOTE_ON_60", "TIME_SHIFT_25",
        "NOTE_ON_64",  # same bin as before: no VELOCITY event
        "TIME_SHIFT_25", "NOTE_OFF_60", "NOTE_OFF_64",
        "TIME_SHIFT_100", "TIME_SHIFT_100", "TIME_SHIFT_50",  # 2.5 s of silence
        "VELOCITY_5", "NOTE_ON_67", "TIME_SHIFT_1", "NOTE_OFF_67",  # shorter than a step: one step
    ]


def test_restrike_at_same_time_writes_off_before_on():
    notes = notes_of([(0.0, 0.5, 60, 64), (0.5, 1.0, 60, 64)])
    assert tokens(TOK.encode_notes(notes))[1:] == [
        "NOTE_ON_60", "TIME_SHIFT_50", "NOTE_OFF_60", "NOTE_ON_60", "TIME_SHIFT_50", "NOTE_OFF_60"]


def test_overlapping_same_pitch_is_cut_at_the_restrike():
    q = TOK.quantize_notes(notes_of([(0.0, 2.0, 60, 64), (1.0, 1.5, 60, 64)]))
    np.testing.assert_allclose(q.start, [0.0, 1.0])
    np.testing.assert_allclose(q.end, [1.0, 1.5])


def test_sustain_lengthens_notes_until_release_or_restrike():
    notes = notes_of([(0.0, 0.2, 60, 64), (0.1, 0.3, 62, 64), (1.0, 1.1, 60, 64), (3.0, 3.5, 64, 64)])
    pedal_t, pedal_v = np.array([0.05, 2.0]), np.array([127, 0])
    held = apply_sustain(notes, pedal_t, pedal_v)
    np.testing.assert_allclose(held.end, [2.0, 2.0, 2.0, 3.5])  # the last one ends after release
    q = TOK.quantize_notes(held)
    np.testing.assert_allclose(q.end[q.pitch == 60], [1.0, 2.0])  # cut where 60 is struck again


def test_sustain_is_read_from_midi_files(tmp_path):
    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(0)
    inst.notes.append(pretty_midi.Note(90, 60, 0.0, 0.3))
    inst.control_changes += [pretty_midi.ControlChange(64, 127, 0.1), pretty_midi.ControlChange(64, 0, 1.5)]
    pm.instruments.append(inst)
    path = tmp_path / "pedal.mid"
    pm.write(str(path))
    for reader in ("symusic", "pretty_midi"):
        assert read_notes(path, reader).end[0] == pytest.approx(1.5, abs=1e-3)
        assert read_notes(path, reader, sustain=False).end[0] == pytest.approx(0.3, abs=1e-3)


def test_drums_dropped_and_drum_only_file_is_a_clear_error(tmp_path):
    mixed = write_random_midi(tmp_path / "mixed.mid", 1, drums=True)
    assert (TOK.read(mixed).pitch != 36).any()
    assert len(TOK.read(mixed)) == 40
    pm = pretty_midi.PrettyMIDI()
    kit = pretty_midi.Instrument(0, is_drum=True)
    kit.notes.append(pretty_midi.Note(100, 36, 0, 0.1))
    pm.instruments.append(kit)
    pm.write(str(tmp_path / "drums.mid"))
    with pytest.raises(MidiReadError, match=r"drums\.mid: only drum notes"):
        TOK.encode(tmp_path / "drums.mid")


def test_decode_accepts_any_id_sequence():
    t = {name: i for i in range(TOK.vocab_size) for name in [TOK.id_to_token(i)]}
    ids = [t["NOTE_OFF_50"],  # stray off: ignored
           t["NOTE_ON_60"], t["TIME_SHIFT_10"], t["NOTE_ON_60"],  # re-strike closes the first 60
           t["PAD"], t["TIME_SHIFT_20"], t["NOTE_ON_62"], t["NOTE_ON_62"],  # zero-length 62 dropped
           t["TIME_SHIFT_5"],  # both still open: closed at the end
           t["EOS"], t["NOTE_ON_70"]]  # nothing after EOS
    n = TOK.decode_notes(ids)
    assert n.pitch.tolist() == [60, 60, 62]
    np.testing.assert_allclose(n.start, [0.0, 0.1, 0.3])
    np.testing.assert_allclose(n.end, [0.1, 0.35, 0.35])
    with pytest.raises(ValueError, match="outside the vocabulary of size"):
        TOK.decode_notes([TOK.vocab_size])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 389), max_size=300))
def test_random_ids_decode_to_notes_that_reencode_stably(ids):
    notes = TOK.decode_notes(ids)
    again = TOK.encode_notes(notes)
    assert_same_notes(TOK.decode_notes(again), notes)
    np.testing.assert_array_equal(TOK.encode_notes(TOK.decode_notes(again)), again)


note_rows = st.lists(st.tuples(st.floats(0, 30), st.floats(0.001, 5), st.integers(0, 127), st.integers(1, 127)),
                     min_size=1, max_size=80)


@settings(max_examples=200, deadline=None)
@given(note_rows)
def test_round_trip_on_random_notes(rows):
    notes = notes_of([(s, s + d, p, v) for s, d, p, v in rows])
    ids = TOK.encode_notes(notes)
    assert_same_notes(TOK.decode_notes(ids), TOK.quantize_notes(notes))
    np.testing.assert_array_equal(TOK.encode_notes(TOK.decode_notes(ids)), ids)


def test_round_trip_through_a_written_midi_file(tmp_path):
    ids = TOK.encode(write_random_midi(tmp_path / "a.mid", 3, n_notes=200, seconds=30))
    path = tmp_path / "decoded.mid"
    TOK.decode(ids).write(str(path))
    for reader in ("symusic", "pretty_midi"):
        np.testing.assert_array_equal(TOK.encode(path, reader=reader), ids)


def test_config_save_load_and_mismatch(tmp_path):
    small = EventTokenizer(TokenizerConfig(pitch_min=21, pitch_max=108, velocity_bins=16, max_shift_steps=50))
    assert small.vocab_size == 2 * 88 + 50 + 16 + 2
    small.save(tmp_path / "tok.json")
    assert EventTokenizer.load(tmp_path / "tok.json") == small
    with pytest.raises(TokenizerMismatchError, match="velocity_bins: 32 here vs 16"):
        TOK.check_compatible(EventTokenizer.load(tmp_path / "tok.json"), what="checkpoint")
    with pytest.raises(ValueError, match="pitch range"):
        TokenizerConfig(pitch_min=60, pitch_max=10)


def test_restricted_pitch_range_drops_outside_notes():
    small = EventTokenizer(TokenizerConfig(pitch_min=21, pitch_max=108))
    n = small.decode_notes(small.encode_notes(notes_of([(0, 1, 10, 64), (0, 1, 60, 64), (0, 1, 120, 64)])))
    assert n.pitch.tolist() == [60]


def test_encode_rejects_wrong_types_and_missing_files(tmp_path):
    with pytest.raises(TypeError, match="path or a pretty_midi"):
        TOK.encode(123)
    with pytest.raises(MidiReadError, match="nope.mid: no such file"):
        TOK.encode(tmp_path / "nope.mid")


def _check_real_file(path):
    notes = TOK.read(path)
    ids = TOK.encode_notes(notes)
    assert_same_notes(TOK.decode_notes(ids), TOK.quantize_notes(notes))
    np.testing.assert_array_equal(TOK.encode_notes(TOK.decode_notes(ids)), ids)


def _check_readers_agree(path):
    np.testing.assert_array_equal(TOK.encode(path, reader="symusic"), TOK.encode(path, reader="pretty_midi"),
                                  err_msg=str(path))


@needs_shared
def test_round_trip_and_readers_on_a_sample_of_real_performances():
    files = random.Random(0).sample(piano_files(), 12)
    for f in files:
        _check_real_file(f)
    for f in files[:4]:
        _check_readers_agree(f)


@pytest.mark.slow
@needs_shared
def test_round_trip_on_every_real_performance():
    for f in piano_files():
        _check_real_file(f)


@pytest.mark.slow
@needs_shared
def test_readers_agree_on_every_real_performance():
    for f in piano_files():
        _check_readers_agree(f)


@needs_shared
def test_every_edge_file_encodes_or_fails_with_its_path_and_reason():
    files = sorted(p for p in EDGE_DIR.rglob("*") if p.is_file() and p.suffix.lower() in (".mid", ".midi"))
    assert len(files) > 50
    outcomes = {"ok": 0, "error": 0}
    for f in files:
        try:
            ids = TOK.encode(f)
            assert len(ids) and ids.max() < TOK.vocab_size
            outcomes["ok"] += 1
        except MidiReadError as err:
            assert str(f) in str(err) and err.reason
            outcomes["error"] += 1
    assert outcomes["ok"] > 30 and outcomes["error"] > 10


@pytest.mark.parametrize("options, said", [
    ({"sustain": "no"}, "tokenizer.sustain must be true or false, got 'no'"),  # YAML's no, which Python counts true
    ({"drop_drums": 0}, "tokenizer.drop_drums must be true or false, got 0"),
    ({"velocity_bins": 7.5}, "tokenizer.velocity_bins must be a whole number, got 7.5"),
    ({"time_step": "abc"}, "tokenizer.time_step must be a number, got 'abc'"),
])
def test_a_setting_of_the_wrong_kind_is_refused_by_name(options, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        TokenizerConfig(**options)
    assert TokenizerConfig(time_step=1).time_step == 1  # a whole number is a number


@pytest.mark.parametrize("options, said", [({"positions_per_beat": 0}, "tokenizer.positions_per_beat must be"),
                                         ({"num_tempos": 0}, "tokenizer.num_tempos must be a whole number >= 1"),
                                         ({"pitch_min": 90, "pitch_max": 60}, "pitch_min <= pitch_max")])
def test_a_remi_setting_out_of_range_is_refused_by_name(options, said):
    from musictx.io.remi_settings import miditok_config

    with pytest.raises(ValueError, match=re.escape(said)):
        miditok_config(**options)


@pytest.mark.parametrize("text, said", [("# a README\n", "not JSON"), ("[1, 2]\n", "JSON, but a list, not an object")])
def test_a_file_that_is_no_tokenizer_is_named_when_loaded(tmp_path, text, said):
    from musictx.io.metrical_tokenizer import MetricalTokenizer
    from musictx.io.tokenizers import load_tokenizer_file

    path = tmp_path / "README.md"
    path.write_text(text)
    for load in (EventTokenizer.load, MetricalTokenizer.load, load_tokenizer_file):
        with pytest.raises(ValueError, match=rf"README\.md: not a tokenizer file \({said}"):
            load(path)  # was a bare JSONDecodeError, no file named
