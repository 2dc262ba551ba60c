"""What the WAV of either renderer sounds like after the last pass (`musictx.io.wav_io.finish_wav`), 2026-12:

- the 48 kHz -> 44.1 kHz resampling was linear interpolation: a 23 kHz partial came back as a 21.1 kHz one only
  5 dB down, and 15 kHz lost 2.7 dB. Now band-limited: measured with an FFT of real resampled tones;
- FluidSynth's WAV was written at its synth gain, unscaled (quiet or clipped, depending on the soundfont), where
  the pip renderer's peak is ``gain`` of full scale. Now both pass through the same scaling. FluidSynth is not
  installed here: a stand-in ``fluidsynth`` on PATH renders with the built-in synthesiser (midirenderer) at its
  own quiet level, so `render_wav`'s FluidSynth path runs whole.
"""

from __future__ import annotations

import os
import stat
import sys

import numpy as np
import pytest

from musictx.io import audio
from musictx.io.audio_chunks import render_chunked
from musictx.io.wav_io import read_wav, resample, write_wav
from musictx.paths import BUNDLED_MOTIF

needs_midirenderer = pytest.mark.skipif(audio._midirenderer_missing() is not None,
                                        reason="midirenderer not installed (pip install 'musictx[audio]')")
EDGE = 2048  # frames left out at either end: the tones start and stop abruptly there


def tones(freqs: tuple[float, ...], rate: int = 48000, seconds: float = 1.0, level: float = 0.3) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    x = sum(level * np.sin(2 * np.pi * f * t) for f in freqs)
    return np.stack([x, x], axis=1).astype(np.float32)


def power(x: np.ndarray, rate: int, lo: float, hi: float) -> float:
    """The power of the steady middle of ``x``'s left channel between ``lo`` and ``hi`` Hz (Blackman-windowed FFT)."""
    y = x[EDGE:-EDGE, 0]
    spectrum = np.abs(np.fft.rfft(y * np.blackman(len(y)))) ** 2
    freqs = np.fft.rfftfreq(len(y), 1 / rate)
    return float(spectrum[(freqs >= lo) & (freqs < hi)].sum())


def db(ratio: float) -> float:
    return 10 * np.log10(ratio)


@pytest.mark.parametrize("freq", [22500.0, 23000.0, 23900.0])
def test_a_tone_above_the_new_nyquist_does_not_fold_back(freq):
    """Linear interpolation: -4.7 dB of the tone came back at 44100 - freq Hz (21.6, 21.1, 20.2 kHz)."""
    folded = power(resample(tones((freq,)), 48000, 44100), 44100, 20, 22050)
    reference = power(resample(tones((1000.0,)), 48000, 44100), 44100, 20, 22050)
    assert db(folded / reference) < -60


@pytest.mark.parametrize("freq", [1000.0, 15000.0, 19000.0])
def test_a_tone_in_the_band_keeps_its_level(freq):
    """Linear interpolation took 2.7 dB off 15 kHz; 1 kHz it kept, and keeps."""
    x = tones((freq,))
    y = resample(x, 48000, 44100)
    assert len(y) == 44100
    rms = lambda a: float(np.sqrt(np.mean(a[EDGE:-EDGE, 0] ** 2)))  # noqa: E731
    assert abs(20 * np.log10(rms(y) / rms(x))) < 0.05


def test_the_render_path_resamples_band_limited(tmp_path):
    """`render_chunked`, as the pip renderer runs it, with a synthesiser whose 48 kHz render holds a 1 kHz tone and
    a 23 kHz one: the WAV keeps the first at the peak level and nothing of the second."""
    rendered = write_wav(tmp_path / "synth.wav", tones((1000.0, 23000.0), seconds=2.0), 48000).read_bytes()
    (tmp_path / "out").mkdir()
    out = render_chunked(lambda midi: rendered, audio.with_release_tail(BUNDLED_MOTIF), tmp_path / "out" / "t.wav",
                         44100, 0.8)
    rate, x = read_wav(out)
    assert db(power(x, rate, 1100, 22050) / power(x, rate, 900, 1100)) < -50  # above 1 kHz: the 23 kHz alias
    assert rate == 44100 and np.abs(x).max() == pytest.approx(0.8, abs=0.002)
    assert sorted(p.name for p in out.parent.iterdir()) == ["t.wav"]  # no temporaries


def stand_in_fluidsynth(folder) -> None:
    """A ``fluidsynth`` that writes what midirenderer renders of the MIDI file it is given (48 kHz, about -27 dBFS,
    whatever ``-g`` and ``-r`` say) to its ``-F`` file."""
    script = folder / "fluidsynth"
    script.write_text(f"#!{sys.executable}\n"
                      "import sys, midirenderer\n"
                      "args = sys.argv[1:]\n"
                      "font, midi = (open(p, 'rb').read() for p in args[-2:])\n"
                      "open(args[args.index('-F') + 1], 'wb').write(midirenderer.render_wave_from(font, midi))\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@needs_midirenderer
def test_the_fluidsynth_path_is_scaled_to_the_peak_level(tmp_path, monkeypatch):
    """Before, FluidSynth's own WAV was the result: here 48 kHz at a peak of about 0.05."""
    (tmp_path / "bin").mkdir()
    stand_in_fluidsynth(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    font = audio.bundled_soundfont()
    assert audio.choose_renderer(font, "fluidsynth") == ("fluidsynth", font)
    (tmp_path / "out").mkdir()
    out = audio.render_wav(BUNDLED_MOTIF, tmp_path / "out" / "m.wav", soundfont=font, engine="fluidsynth", gain=0.7)
    rate, x = read_wav(out)
    assert rate == 44100 and np.abs(x).max() == pytest.approx(0.7, abs=0.002)
    assert np.abs(x[-1]).max() < 1e-3  # faded out at the end, as the pip renderer's
    assert sorted(p.name for p in out.parent.iterdir()) == ["m.wav"]  # FluidSynth's own WAV is gone
