"""The largest request a run takes, written here once."""

from __future__ import annotations

from dataclasses import dataclass

from musictx.io.wav_io import MAX_AUDIO_SECONDS


@dataclass(frozen=True)
class Bounds:
    """The largest request a run takes (conf/generate.yaml, docs/safety.md and the app say them;
    `musictx.generation.generate_options.GenerateOptions.check`, which the app's requests go through too, and
    the song tasks enforce them). Past them a value is a typo (``length_seconds=1e9``) that would cost hours,
    memory and disk, not a request."""

    length_seconds: float = 1200.0  # new music per sample: 20 minutes
    num_samples: int = 64  # one batch; more samples come from more runs (seed=...) into the same folder
    seed_seconds: float = 3600.0  # seed_seconds and seed_from: an hour into / of the seed file
    max_tokens: int = 200_000  # new tokens per sample (~1000 s of dense piano)
    length_bars: int = 512  # about 20 minutes of 4/4 at 100 bpm
    audio_seconds: float = MAX_AUDIO_SECONDS  # a WAV longer than this is not rendered (musictx.io.wav_io)


BOUNDS = Bounds()
