"""Audio without system packages: the pip renderer (midirenderer + pretty_midi's soundfont) writes WAV files
of the right rate and length that are not silent, for the bundled motif and for a real continuation of the
shipped model; the release tail rendered after the last note; the renderer choice (FluidSynth first) and its
reasons when something is missing."""

from __future__ import annotations

import json
import os
import stat
import sys

import mido
import numpy as np
import pretty_midi
import pytest

from musictx.io import audio
from musictx.io.audio import (
    RELEASE_TAIL_SECONDS,
    AudioRenderError,
    audio_unavailable,
    choose_renderer,
    read_wav,
    render_wav,
    rendered_seconds,
    with_release_tail,
)
from musictx.paths import BUNDLED_MOTIF

from . import midi_fixtures as mf

MOTIF = BUNDLED_MOTIF
needs_midirenderer = pytest.mark.skipif(
    audio._midirenderer_missing() is not None,
    reason="midirenderer not installed (pip install 'musictx[audio]'; `make test` installs it)")


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x)))) if x.size else 0.0


@pytest.fixture
def no_fluidsynth(monkeypatch):
    """Pretend FluidSynth is absent, so that `auto` takes the pip renderer even on a machine that has it."""
    monkeypatch.setattr(audio.shutil, "which", lambda name, *a, **k: None)


@needs_midirenderer
@pytest.mark.parametrize("rate", [44100, 22050])
def test_pip_renderer_writes_the_motif(tmp_path, no_fluidsynth, rate):
    wav = render_wav(MOTIF, tmp_path / "motif.wav", sample_rate=rate)
    got_rate, x = read_wav(wav)
    expected = pretty_midi.PrettyMIDI(str(MOTIF)).get_end_time() + RELEASE_TAIL_SECONDS
    assert got_rate == rate and x.shape[1] == 2
    assert abs(len(x) / rate - expected) < 0.25
    assert rms(x) > 0.02, "rendered audio is (nearly) silent"
    assert np.abs(x).max() <= 0.81  # scaled to the 0.8 peak, not clipped


@needs_midirenderer
def test_generate_writes_audible_wav_of_a_real_continuation(tmp_path, no_fluidsynth):
    from musictx.generation.continue_midi import run
    from musictx.generation.generate_options import GenerateOptions

    opts = GenerateOptions(seed_midi=str(MOTIF), seed_seconds=4.0, length_seconds=4.0, num_samples=1, seed=5,
                           threads=1, output_dir=str(tmp_path))
    record = run(opts)
    sample = record["samples"][0]
    assert sample["wav"] == "sample_00.wav"
    rate, x = read_wav(tmp_path / "sample_00.wav")
    midi_end = pretty_midi.PrettyMIDI(str(tmp_path / "sample_00.mid")).get_end_time()
    assert rate == 44100
    assert abs(len(x) / rate - (midi_end + RELEASE_TAIL_SECONDS)) < 0.25
    assert abs(midi_end - sample["total_seconds"]) < 0.05
    assert rms(x) > 0.02
    seed_end = int(record["seed"]["seconds"] * rate)
    new = pretty_midi.PrettyMIDI(str(tmp_path / "sample_00.mid")).instruments[0].notes
    if any(n.start >= record["seed"]["seconds"] for n in new):  # the model played notes of its own
        assert rms(x[seed_end:]) > 0.005, "the continuation is silent"
    assert json.loads((tmp_path / "generation.json").read_text())["samples"][0]["wav"] == "sample_00.wav"


@needs_midirenderer
def test_generate_writes_a_wav_of_an_accompanied_melody(tmp_path, no_fluidsynth):
    """task=accompany (and infill) write the song as a WAV too, like a continuation."""
    from musictx.generation.continue_midi import run
    from musictx.generation.generate_options import GenerateOptions

    from .metrical_fixtures import band_song

    song = pretty_midi.PrettyMIDI(str(band_song(tmp_path / "band.mid", bars=6, bpm=120, beats_per_bar=4, seed=2)))
    song.instruments = song.instruments[:1]  # the melody alone
    song.write(str(tmp_path / "melody.mid"))
    record = run(GenerateOptions(seed_midi=str(tmp_path / "melody.mid"), task="accompany", tracks=["piano"],
                                 num_samples=1, threads=1, output_dir=str(tmp_path / "out")))
    sample = record["samples"][0]
    rate, x = read_wav(tmp_path / "out" / sample["wav"])
    midi_end = pretty_midi.PrettyMIDI(str(tmp_path / "out" / sample["midi"])).get_end_time()
    assert abs(len(x) / rate - (midi_end + RELEASE_TAIL_SECONDS)) < 0.25 and rms(x) > 0.02


def two_tempo_piece(path, pedal_up_tick: int | None = None):
    """Notes at 90 bpm, then 120 bpm from tick 1440 (2 s); the last note ends at tick 2400 (3.0 s)."""
    events = [mf.tempo(0, 90), mf.on(0, 60), mf.off(720, 60), mf.tempo(1440, 120), mf.on(1440, 64), mf.off(2400, 64)]
    if pedal_up_tick is not None:
        events.append(mf.pedal(pedal_up_tick, 0))
    return mf.write_midi(path, [events], midi_type=0)


def test_release_tail_follows_the_last_note(tmp_path):
    piece = two_tempo_piece(tmp_path / "p.mid")
    assert rendered_seconds(piece) == pytest.approx(3.0 + RELEASE_TAIL_SECONDS, abs=1e-3)
    assert rendered_seconds(piece, tail=0.0) == pytest.approx(3.0, abs=1e-3)
    played = tmp_path / "played.mid"
    played.write_bytes(with_release_tail(piece))
    midi = mido.MidiFile(str(played))
    assert midi.length == pytest.approx(3.0 + RELEASE_TAIL_SECONDS, abs=1e-3)  # a synthesiser plays this long
    notes = lambda p: [(n.start, n.end, n.pitch) for n in pretty_midi.PrettyMIDI(str(p)).instruments[0].notes]  # noqa: E731
    assert notes(played) == notes(piece)
    # an event later than the tail (here a pedal release at 5 s) is played up to, as before
    assert rendered_seconds(two_tempo_piece(tmp_path / "late.mid", pedal_up_tick=4320)) == pytest.approx(5.0, abs=1e-3)
    bad = tmp_path / "bad.mid"
    bad.write_bytes(b"MThd")
    with pytest.raises(AudioRenderError, match="bad.mid"):
        rendered_seconds(bad)
    # a type 2 file's tracks are independent sequences, with no one clock to render them on
    type2 = mf.write_midi(tmp_path / "type2.mid", [[mf.on(0, 60), mf.off(480, 60)]] * 2, midi_type=2)
    with pytest.raises(AudioRenderError, match=r"type2\.mid: a type 2 MIDI file"):
        rendered_seconds(type2)


@needs_midirenderer
def test_pip_renderer_plays_the_release_tail(tmp_path, no_fluidsynth):
    rate, x = read_wav(render_wav(two_tempo_piece(tmp_path / "p.mid"), tmp_path / "p.wav"))
    assert len(x) / rate == pytest.approx(3.0 + RELEASE_TAIL_SECONDS, abs=0.05)
    assert rms(x[int(3.0 * rate):int(3.2 * rate)]) > 1e-3, "the last note's release is cut off"


@needs_midirenderer
def test_unreadable_midi_is_an_audio_error(tmp_path, no_fluidsynth):
    bad = tmp_path / "bad.mid"
    bad.write_bytes(b"not a midi file at all")
    with pytest.raises(AudioRenderError, match="bad.mid"):
        render_wav(bad, tmp_path / "bad.wav")


def test_reasons_name_what_is_missing(tmp_path, monkeypatch, no_fluidsynth):
    assert "no.sf2" in audio_unavailable(tmp_path / "no.sf2")
    (tmp_path / "notes.sf2").write_text("not a soundfont\n")
    assert audio_unavailable(tmp_path / "notes.sf2") == (f"soundfont {tmp_path / 'notes.sf2'} is not a SoundFont 2 "
                                                         "file (a .sf2 starts RIFF....sfbk)")
    assert "fluidsynth" in audio_unavailable(engine="fluidsynth")
    assert "engine" in audio_unavailable(engine="timidity")
    monkeypatch.setitem(sys.modules, "midirenderer", None)  # makes `import midirenderer` fail
    reason = audio_unavailable()
    assert "fluidsynth" in reason and "musictx[audio]" in reason


def test_fluidsynth_is_preferred_when_present(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "fluidsynth"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    font = tmp_path / "gm.sf2"
    font.write_bytes(b"RIFF\x04\x00\x00\x00sfbk")  # a SoundFont 2 header
    assert choose_renderer(font) == ("fluidsynth", font)
    monkeypatch.setattr(audio, "SOUNDFONT_CANDIDATES", (str(tmp_path / "none.sf2"),))
    if audio._midirenderer_missing() is None:  # no system soundfont: the pip renderer takes over
        assert choose_renderer()[0] == "midirenderer"
    else:
        with pytest.raises(AudioRenderError, match="soundfont"):
            choose_renderer()


def test_wav_helpers_round_trip(tmp_path):
    t = np.arange(4800) / 48000
    x = np.stack([np.sin(2 * np.pi * 440 * t), 0.5 * np.sin(2 * np.pi * 220 * t)], axis=1).astype(np.float32)
    y = audio.resample(x, 48000, 44100)
    assert len(y) == 4410 and abs(rms(y[:, 0]) - rms(x[:, 0])) < 0.01
    rate, z = read_wav(audio.write_wav(tmp_path / "a.wav", y, 44100))
    assert rate == 44100 and z.shape == y.shape and np.abs(z - y).max() < 1e-3
