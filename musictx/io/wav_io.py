"""16-bit PCM WAV files and the audio error, shared by `musictx.io.audio` (which picks a renderer) and
`musictx.io.audio_chunks` (which renders in bounded memory): both import this module, neither the other's.

Long audio never has to sit in memory whole: `WavWriter` appends frames to an open file, `read_frames`
reads a span of one.
"""

from __future__ import annotations

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


def resample(audio: np.ndarray, rate: int, new_rate: int) -> np.ndarray:
    """(N, C) float audio at ``rate`` -> at ``new_rate``, by linear interpolation per channel."""
    if rate == new_rate or len(audio) == 0:
        return audio
    n_out = max(1, round(len(audio) * new_rate / rate))
    t_in = np.arange(len(audio)) / rate
    t_out = np.arange(n_out) / new_rate
    return np.stack([np.interp(t_out, t_in, audio[:, c]) for c in range(audio.shape[1])], axis=1).astype(np.float32)


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


def fade_gain(n_frames: int, start: int, count: int, fade: int) -> np.ndarray:
    """(count, 1) gains of frames ``start .. start + count`` of an ``n_frames`` piece that fades out linearly
    over its last ``fade`` frames (1 before them)."""
    idx = np.arange(start, start + count)
    from_end = n_frames - 1 - idx  # 0 on the last frame
    gain = np.where(from_end < fade, from_end / max(fade - 1, 1), 1.0)
    return gain.astype(np.float32)[:, None]
