"""16-bit PCM WAV files and the audio error, shared by `musictx.io.audio` (which picks a renderer) and
`musictx.io.audio_chunks` (which renders in bounded memory): both import this module, neither the other's.

Long audio never has to sit in memory whole: `WavWriter` appends frames to an open file, and `finish_wav`, the
last pass of either renderer, resamples (band-limited, `resample_span`), scales to the peak level and fades out
a block at a time.
"""

from __future__ import annotations

import functools
import math
import os
import wave
from pathlib import Path

import numpy as np

FADE_SECONDS = 0.02
# The longest WAV a command renders (an hour): past it a render is a typo or a runaway sample, and its file
# (~600 MB at 44.1 kHz stereo) no longer something to listen to.
MAX_AUDIO_SECONDS = 3600.0


class AudioRenderError(RuntimeError):
    """No renderer can run, or the one chosen failed to produce the WAV file."""


# The resampler's low-pass (a Kaiser-windowed sinc): flat to 90 % of the lower Nyquist frequency (19.8 kHz at
# 44.1 kHz), and 80 dB down from the Nyquist frequency on, so that nothing above it folds back into the band
# (linear interpolation let a 23 kHz partial of a 48 kHz render through as a 21.1 kHz one, 5 dB down).
STOPBAND_DB = 80.0
TRANSITION = 0.1  # the width of the transition band, as a fraction of the lower Nyquist frequency


@functools.lru_cache(maxsize=8)
def _lowpass_bank(rate: int, new_rate: int) -> tuple[np.ndarray, int, int, int]:
    """(taps (L, 2H): one row a phase, L, M, H) of the resampler from ``rate`` to ``new_rate`` = ``rate`` * L / M:
    output frame n lies at input position n * M / L, between input frames base = n * M // L and base + 1; its
    taps weigh input frames base - H + 1 .. base + H."""
    g = math.gcd(rate, new_rate)
    up, down = new_rate // g, rate // g
    nyquist = 0.5 * min(rate, new_rate)
    cutoff, width = nyquist * (1 - TRANSITION / 2), nyquist * TRANSITION
    span = (STOPBAND_DB - 8) / (2.285 * 2 * np.pi * width)  # seconds: Kaiser's length for this band and depth
    half = max(1, math.ceil(span / 2 * rate))
    tau = (np.arange(up)[:, None] / up - np.arange(-half + 1, half + 1)[None, :]) / rate  # seconds from the output
    beta = 0.1102 * (STOPBAND_DB - 8.7)
    window = np.i0(beta * np.sqrt(np.clip(1 - (2 * tau / span) ** 2, 0, None))) / np.i0(beta)
    taps = np.sinc(2 * cutoff * tau) * window
    taps /= taps.sum(axis=1, keepdims=True)  # each phase passes a constant as it is
    return taps.astype(np.float32), up, down, half


def resampled_frames(n_in: int, rate: int, new_rate: int) -> int:
    """How many frames ``n_in`` frames at ``rate`` last at ``new_rate``."""
    return max(1, round(n_in * new_rate / rate)) if n_in else 0


def resample_span(read, n_in: int, rate: int, new_rate: int, start: int, stop: int) -> np.ndarray:
    """Frames ``start .. stop`` (float32 (N, C)) of ``n_in`` frames at ``rate`` resampled to ``new_rate``, band-limited
    (`_lowpass_bank`); ``read(i0, i1)``: input frames i0 .. i1 as (N, C) floats. Spans of one piece join seamlessly,
    so a long one is resampled a block at a time."""
    taps, up, down, half = _lowpass_bank(rate, new_rate)
    lo, hi = start * down // up - half + 1, (stop - 1) * down // up + half + 1  # the input frames the span weighs
    src = np.asarray(read(max(lo, 0), min(hi, n_in)), dtype=np.float32)
    src = np.pad(src, ((max(lo, 0) - lo, hi - max(lo, 0) - len(src)), (0, 0)))  # silence beyond either end
    out = np.empty((stop - start, src.shape[1]), np.float32)
    for c in range(src.shape[1]):
        windows = np.lib.stride_tricks.sliding_window_view(np.ascontiguousarray(src[:, c]), 2 * half)
        for q in range(min(up, stop - start)):  # the frames of one phase: their windows step by `down`
            n = start + q
            first = n * down // up - half + 1 - lo
            out[q::up, c] = windows[first::down][:len(range(q, stop - start, up))] @ taps[n * down % up]
    return out


def resample(audio: np.ndarray, rate: int, new_rate: int) -> np.ndarray:
    """(N, C) float audio at ``rate`` -> at ``new_rate``, band-limited (`resample_span`)."""
    if rate == new_rate or len(audio) == 0:
        return audio
    n_out = resampled_frames(len(audio), rate, new_rate)
    return resample_span(lambda i0, i1: audio[i0:i1], len(audio), rate, new_rate, 0, n_out)


def read_wav(source) -> tuple[int, np.ndarray]:
    """(sample rate, (N, C) float32 in [-1, 1]) of a 16-bit PCM WAV file (a path or a binary file object)."""
    with wave.open(source if not isinstance(source, (str, os.PathLike)) else str(source), "rb") as w:
        if w.getsampwidth() != 2:
            raise AudioRenderError(f"expected 16-bit PCM WAV, got {8 * w.getsampwidth()}-bit")
        frames = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return w.getframerate(), frames.reshape(-1, w.getnchannels()).astype(np.float32) / 32768.0


def to_pcm(audio: np.ndarray) -> bytes:
    """(N, C) float audio in [-1, 1] -> little-endian 16-bit frames."""
    return (np.clip(audio, -1.0, 1.0) * 32767).round().astype("<i2").tobytes()


class WavWriter:
    """A 16-bit PCM WAV file written block by block (``wave`` fixes the header's sizes on close)."""

    def __init__(self, path: str | os.PathLike, channels: int, sample_rate: int):
        self._w = wave.open(str(path), "wb")
        self._w.setnchannels(channels)
        self._w.setsampwidth(2)
        self._w.setframerate(sample_rate)

    def write(self, audio: np.ndarray) -> None:
        self._w.writeframes(to_pcm(audio))

    def close(self) -> None:
        self._w.close()

    def __enter__(self) -> WavWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_wav(path: str | os.PathLike, audio: np.ndarray, sample_rate: int) -> Path:
    """Write (N, C) float audio in [-1, 1] as a 16-bit PCM WAV file."""
    with WavWriter(path, audio.shape[1], sample_rate) as w:
        w.write(audio)
    return Path(path)


BLOCK_SECONDS = 10.0  # output frames a block of `finish_wav`: memory stays bounded for any length


def finish_wav(read, n_in: int, rate: int, channels: int, wav_path: str | os.PathLike, sample_rate: int,
               peak: float) -> None:
    """The last pass of every renderer: write the ``n_in`` frames of ``read(i0, i1)`` ((N, C) floats at ``rate``)
    as a WAV at ``sample_rate`` (`resample_span`), scaled so that its peak is ``peak`` of full scale and faded out
    over its last `FADE_SECONDS`. A block at a time, twice: the peak is the resampled audio's (band-limiting may
    overshoot the input's), so it takes the first pass; the second writes."""
    n_out = resampled_frames(n_in, rate, sample_rate)
    step = int(BLOCK_SECONDS * sample_rate)
    blocks = [(a, min(a + step, n_out)) for a in range(0, n_out, step)]

    def frames(a: int, b: int) -> np.ndarray:
        if rate == sample_rate:
            return np.asarray(read(a, b), dtype=np.float32)
        return resample_span(read, n_in, rate, sample_rate, a, b)

    top = max((float(np.abs(frames(a, b)).max(initial=0.0)) for a, b in blocks), default=0.0)
    scale = np.float32(peak / top if top else 0.0)  # silence stays silence
    fade = min(n_out, int(FADE_SECONDS * sample_rate))
    with WavWriter(wav_path, channels, sample_rate) as out:
        for a, b in blocks:
            out.write(frames(a, b) * scale * fade_gain(n_out, a, b - a, fade))


def finish_wav_file(source: str | os.PathLike, wav_path: str | os.PathLike, sample_rate: int, peak: float) -> None:
    """`finish_wav` on a synthesiser's 16-bit WAV file ``source`` (FluidSynth's own level depends on the soundfont
    and the piece; after this its peak is ``peak``, as the pip renderer's is)."""
    try:
        w = wave.open(str(source), "rb")
    except (wave.Error, EOFError) as err:
        raise AudioRenderError(f"cannot read the synthesiser's WAV {source}: {err}") from None
    with w:
        if w.getsampwidth() != 2:
            raise AudioRenderError(f"expected 16-bit PCM WAV from the synthesiser, got {8 * w.getsampwidth()}-bit")
        channels = w.getnchannels()

        def read(i0: int, i1: int) -> np.ndarray:
            w.setpos(i0)
            return np.frombuffer(w.readframes(i1 - i0), dtype="<i2").reshape(-1, channels) / np.float32(32768)

        finish_wav(read, w.getnframes(), w.getframerate(), channels, wav_path, sample_rate, peak)


def fade_gain(n_frames: int, start: int, count: int, fade: int) -> np.ndarray:
    """(count, 1) gains of frames ``start .. start + count`` of an ``n_frames`` piece that fades out linearly
    over its last ``fade`` frames (1 before them)."""
    idx = np.arange(start, start + count)
    from_end = n_frames - 1 - idx  # 0 on the last frame
    gain = np.where(from_end < fade, from_end / max(fade - 1, 1), 1.0)
    return gain.astype(np.float32)[:, None]
