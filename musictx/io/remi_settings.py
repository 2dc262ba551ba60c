"""MidiTok's REMI as `musictx.io.metrical_tokenizer` sets it up: the settings that are not a choice, the
checked choices (`miditok_config`), and MidiTok's own parameter file as a dict and back. No torch."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import miditok

# MidiTok settings that are not a choice here: every program and the drums, the common meters, log-spaced
# tempos, durations up to 3 bars of 4/4 (finer below 1 bar). The choices (positions per beat, velocities,
# tempos, pitch range) come from conf/tokenizer/remi.yaml, where their defaults are written.
_FIXED = {
    "special_tokens": ["PAD", "BOS", "EOS"],
    "use_programs": True,
    "one_token_stream_for_programs": True,
    "programs": list(range(-1, 128)),
    "use_tempos": True,
    "tempo_range": (40, 250),
    "log_tempos": True,
    "use_time_signatures": True,
    "time_signature_range": {4: [1, 2, 3, 4, 5, 6, 7], 8: [3, 5, 6, 7, 9, 12]},
    "delete_equal_successive_tempo_changes": True,
}


def miditok_config(positions_per_beat: int = 4, num_velocities: int = 16, num_tempos: int = 64,
                   pitch_min: int = 21, pitch_max: int = 108) -> miditok.TokenizerConfig:
    for name, value, low in (("positions_per_beat", positions_per_beat, 1), ("num_velocities", num_velocities, 1),
                             ("num_tempos", num_tempos, 1), ("pitch_min", pitch_min, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"tokenizer.{name} must be a whole number >= {low}, got {value!r}")
    if not pitch_min <= pitch_max <= 127:
        raise ValueError(f"tokenizer pitches must satisfy pitch_min <= pitch_max <= 127, got {pitch_min}..{pitch_max}")
    coarse = max(positions_per_beat // 2, 1)  # durations past 4 beats at half the resolution
    return miditok.TokenizerConfig(**_FIXED, pitch_range=(pitch_min, pitch_max),
                                   beat_res={(0, 4): positions_per_beat, (4, 12): coarse},
                                   num_velocities=num_velocities, num_tempos=num_tempos)


def miditok_from_params(params: dict) -> miditok.REMI:
    """Rebuild MidiTok's tokenizer from the contents of its own parameter file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tokenizer.json"
        path.write_text(json.dumps(params))
        return miditok.REMI(params=path)


def miditok_params(tok: miditok.REMI) -> dict:
    """The contents of MidiTok's own parameter file of ``tok``, as a dict (`miditok_from_params` reads it back)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tokenizer.json"
        tok.save(path)
        params = json.loads(path.read_text())
    # the library writes its version and the hub's name; they do not change what ids mean
    return {k: v for k, v in params.items() if k not in ("miditok_version", "symusic_version", "hf_tokenizers_version")}
