"""The tokenizer interface, and the one place a saved tokenizer dict becomes a tokenizer. No torch.

Every stage (prep, data, training, generation, evaluation, export) holds a tokenizer through this
interface; which one it is is written once, in its dict's ``"kind"``:

- ``performance``: `musictx.io.tokenizer.EventTokenizer`, Performance events (10 ms shifts, note on/off);
  the piano model's home, rubato performances.
- ``remi``: `musictx.io.metrical_tokenizer.MetricalTokenizer`, MidiTok's REMI with programs, tempos and
  time signatures: bars, positions, explicit durations and one track per program (the pop model's).
"""

from __future__ import annotations

import os
from typing import Protocol

from musictx.io.jsonio import read_json_object
from musictx.io.tokenizer import EventTokenizer, TokenizerMismatchError

KINDS = ("performance", "remi")


class Tokenizer(Protocol):
    """What every stage may ask of a tokenizer."""

    kind: str

    @property
    def vocab_size(self) -> int: ...
    @property
    def pad_id(self) -> int: ...
    @property
    def eos_id(self) -> int: ...
    def id_to_token(self, i: int) -> str: ...
    def decode(self, ids): ...  # a pretty_midi.PrettyMIDI
    def to_dict(self) -> dict: ...
    def save(self, path) -> None: ...
    def check_compatible(self, other, what: str = "data") -> None: ...


def is_metrical(tok) -> bool:
    return getattr(tok, "kind", "performance") == "remi"


def tokenizer_from_dict(d: dict) -> Tokenizer:
    kind = d.get("kind", "performance")
    if kind == "performance":
        return EventTokenizer.from_dict(d)
    if kind == "remi":
        from musictx.io.metrical_tokenizer import MetricalTokenizer  # MidiTok only where it is used

        return MetricalTokenizer.from_dict(d)
    raise TokenizerMismatchError(f"unknown tokenizer kind {kind!r} (known: {', '.join(KINDS)})")


def load_tokenizer_file(path: str | os.PathLike) -> Tokenizer:
    return tokenizer_from_dict(read_json_object(path, "a tokenizer file"))


def make_tokenizer(settings: dict) -> Tokenizer:
    """A tokenizer from a Hydra ``tokenizer`` group: ``{kind: performance|remi, ...settings}``."""
    settings = dict(settings)
    kind = settings.pop("kind", "performance")
    if kind == "performance":
        return EventTokenizer(settings)
    if kind == "remi":
        from musictx.io.metrical_tokenizer import MetricalTokenizer

        return MetricalTokenizer(**settings)
    raise ValueError(f"tokenizer.kind={kind!r}: use one of {', '.join(KINDS)}")
