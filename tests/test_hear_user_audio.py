"""Audio as a musician hears it, with the real pip renderer: a folder passed as the soundfont is named a
folder (it read "not found" of a folder that is there), and a drum track is heard as drums and a program
change as that instrument, both in one render and across the chunk cuts of a long one."""

from __future__ import annotations

import numpy as np
import pretty_midi
import pytest

from musictx.io import audio
from musictx.io.audio import audio_unavailable, read_wav, render_wav, rendered_seconds
from musictx.io.audio_chunks import render_chunked

needs_midirenderer = pytest.mark.skipif(audio._midirenderer_missing() is not None,
                                        reason="midirenderer not installed (pip install 'musictx[audio]')")


def test_a_folder_given_as_the_soundfont_is_named_a_folder(tmp_path):
    assert audio_unavailable(tmp_path) == \
        f"soundfont {tmp_path} is a folder, not a .sf2 file (pass the .sf2 file itself)"
    assert audio_unavailable(tmp_path / "none.sf2") == \
        f"soundfont {tmp_path / 'none.sf2'} not found (pass an existing .sf2 file)"


def _band(path, program: int, drums: bool, seconds: float = 8.0):
    """One track of ``program`` (on the drum channel when ``drums``): a hit every quarter second."""
    pm = pretty_midi.PrettyMIDI(initial_tempo=100)
    track = pretty_midi.Instrument(program=program, is_drum=drums)
    for k, t in enumerate(np.arange(0.0, seconds, 0.25)):
        track.notes.append(pretty_midi.Note(110, [36, 42, 38, 42][k % 4] if drums else 72 + k % 12, t, t + 0.2))
    pm.instruments.append(track)
    pm.write(str(path))
    return path


def _centroid(x: np.ndarray, rate: int) -> float:
    """The spectral centroid (Hz) of the mono mix: a drum kit's hats and snares sit far above a piano's."""
    mono = x.mean(axis=1)
    power = np.abs(np.fft.rfft(mono))
    return float((power * np.fft.rfftfreq(len(mono), 1 / rate)).sum() / power.sum())


@needs_midirenderer
def test_drums_are_heard_as_drums_and_a_program_as_its_instrument(tmp_path):
    got = {}
    for name, program, drums in [("kit", 0, True), ("kit_on_piano", 0, False), ("flute", 73, False),
                                 ("piano", 0, False)]:
        midi = _band(tmp_path / f"{name}.mid", program, drums)
        if name == "kit_on_piano":  # the kit's own notes, on a piano channel
            pm = pretty_midi.PrettyMIDI(str(_band(tmp_path / "k.mid", 0, True)))
            pm.instruments[0].is_drum = False
            pm.write(str(midi))
        rate, x = read_wav(render_wav(midi, tmp_path / f"{name}.wav", engine="midirenderer"))
        assert len(x) / rate == pytest.approx(rendered_seconds(midi), abs=0.01)
        assert 0.05 < np.sqrt(np.mean(x ** 2)) and np.abs(x).max() < 1.0, name  # heard, not clipped
        got[name] = _centroid(x, rate)
    assert got["kit"] > 2 * got["kit_on_piano"], got  # channel 10 plays the kit, not piano notes 36-42
    assert abs(got["flute"] - got["piano"]) > 200, got  # program 73 is not the piano


@needs_midirenderer
def test_a_program_and_the_drums_survive_the_chunk_cuts(tmp_path):
    """A flute set once at 0 s and a kit, cut into 3 s chunks (each rendered from 20 s before, the program and
    controllers carried over): sample for sample the render of the whole."""
    pm = pretty_midi.PrettyMIDI(str(_band(tmp_path / "flute.mid", 73, False, seconds=30.0)))
    pm.instruments += pretty_midi.PrettyMIDI(str(_band(tmp_path / "kit.mid", 0, True, seconds=30.0))).instruments
    pm.instruments[0].control_changes.append(pretty_midi.ControlChange(7, 50, 0.0))
    pm.write(str(tmp_path / "band.mid"))
    data = audio.with_release_tail(tmp_path / "band.mid")
    font = audio.bundled_soundfont().read_bytes()

    def synth(midi_bytes):
        import midirenderer

        return midirenderer.render_wave_from(font, midi_bytes)

    render_chunked(synth, data, tmp_path / "whole.wav", 44100, 0.8, chunk_seconds=1e9)
    render_chunked(synth, data, tmp_path / "chunked.wav", 44100, 0.8, chunk_seconds=3.0)
    (_, whole), (_, chunked) = read_wav(tmp_path / "whole.wav"), read_wav(tmp_path / "chunked.wav")
    assert whole.shape == chunked.shape
    assert np.abs(whole - chunked).max() < 0.01
