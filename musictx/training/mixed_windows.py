"""A second prepared dataset mixed into the train windows (``data.mix``); train split only.

Window ``g`` comes from the mix dataset when a uniform draw from its own rng, seeded with
``(seed, g, 1)``, falls below ``weight``, else from the main dataset. The choice is a function of
``(seed, g)`` like the windows themselves, so the stream is the same for any number of workers and on
resume. The choice has its own rng so that the main windows keep theirs (``(seed, g)``): the windows
the main dataset gives are exactly those of a run without ``data.mix``. Both sides are `RandomWindows`,
so windows from the mix dataset get the same augmentation and recall curriculum. Validation and test
read the main dataset only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from musictx.io.token_store import DatasetFormatError, load_tokenizer
from musictx.io.tokenizer import EventTokenizer, TokenizerMismatchError
from musictx.training.windows import RandomWindows

# Appended to (seed, g) for the choice's rng; the windows' own rng is seeded with (seed, g).
CHOICE_STREAM = 1


@dataclass(frozen=True)
class MixOptions:
    """``data.mix``: ``dir``, a folder written by musictx-prep, gives a ``weight`` share of train windows.

    Mixing is off when ``dir`` is None or ``weight`` is 0; weight 1 is refused (no main data would be left,
    yet the epoch length and validation still come from the main dataset).

    ``stretch_range`` and ``velocity_shift`` vary the mix windows' tempo and dynamics more than the main
    data's augmentation does (applied with it, so only with ``data.augment``). Scores played at one tempo
    and one velocity rule (``source=folk``) otherwise teach a prior for both, and a model then predicts
    a seed's pulse and dynamics from that prior rather than from the seed: with every tune at its own
    tempo and level, the only way to predict them is to read them from the window.
    """

    dir: str | os.PathLike | None = None
    weight: float = 0.0
    stretch_range: tuple[float, float] | None = None  # None: data.stretch_range
    velocity_shift: int = 0  # VELOCITY bins, uniform in [-v, v] per window

    def __post_init__(self):
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)) or not 0 <= w < 1:
            raise ValueError(f"data.mix.weight must be a number in [0, 1) (the share of train windows drawn "
                             f"from data.mix.dir), got {w!r}")
        if w > 0 and self.dir is None:
            raise ValueError(f"data.mix.weight={w} but data.mix.dir is null: name the prepared folder to mix "
                             "in (e.g. data.mix.dir=data/folk), or set data.mix.weight=0")
        if self.stretch_range is not None:
            lo, hi = self.stretch_range
            if not 0 < lo <= hi:
                raise ValueError(f"data.mix.stretch_range must be [low, high] with 0 < low <= high, got "
                                 f"{list(self.stretch_range)}")
            object.__setattr__(self, "stretch_range", (float(lo), float(hi)))
        if isinstance(self.velocity_shift, bool) or not isinstance(self.velocity_shift, int) \
                or self.velocity_shift < 0:
            raise ValueError(f"data.mix.velocity_shift must be a whole number of velocity bins >= 0, got "
                             f"{self.velocity_shift!r}")

    @classmethod
    def from_config(cls, cfg: Mapping | None) -> MixOptions:
        cfg = dict(cfg or {})
        unknown = set(cfg) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"data.mix: unknown keys {sorted(unknown)}; known: "
                             f"{', '.join(f.name for f in fields(cls))}")
        return cls(**cfg)  # __post_init__ makes stretch_range a tuple of floats

    def augment_of(self, main: dict) -> dict:
        """The mix windows' augmentation options: the main data's ``main`` with this tempo and dynamics."""
        out = dict(main, velocity_shift=self.velocity_shift)
        if self.stretch_range is not None:
            out["stretch_range"] = self.stretch_range
        return out

    @property
    def on(self) -> bool:
        return self.dir is not None and self.weight > 0


def tokenizer_difference(a: EventTokenizer, b: EventTokenizer) -> dict[str, tuple]:
    """{field: (value in a, value in b)} of the tokenizer config fields that differ."""
    if a.kind != b.kind:
        return {"kind": (a.kind, b.kind)}
    x, y = (a.config.to_dict(), b.config.to_dict()) if a.kind == "performance" else (a.params, b.params)
    x, y = x.get("config", x), y.get("config", y)
    return {k: (x.get(k), y.get(k)) for k in set(x) | set(y) if x.get(k) != y.get(k)}


def check_mix_dir(mix_dir: str | os.PathLike, main_dir: str | os.PathLike, tokenizer: EventTokenizer) -> Path:
    """The mix folder as a Path, after checking it exists, has a train split and ``tokenizer``'s vocabulary.

    ``tokenizer`` is the main dataset's; the same ids must mean the same events in both datasets.
    """
    mix_dir = Path(mix_dir)
    if not mix_dir.is_dir():
        raise DatasetFormatError(f"data.mix.dir={mix_dir}: no such folder; prepare one with musictx-prep "
                                 "(output_dir=<folder>) and pass that folder")
    missing = [p.name for p in (mix_dir / "train.bin", mix_dir / "train.idx.npy") if not p.exists()]
    if missing:
        raise DatasetFormatError(f"data.mix.dir={mix_dir}: no train split ({', '.join(missing)} missing); "
                                 "is it a folder written by musictx-prep?")
    diff = tokenizer_difference(tokenizer, load_tokenizer(mix_dir))
    if diff:
        detail = ", ".join(f"{k}: {a!r} in {main_dir} vs {b!r} in {mix_dir}" for k, (a, b) in diff.items())
        raise TokenizerMismatchError(f"data.mix.dir={mix_dir} was prepared with another tokenizer than "
                                     f"data.dir={main_dir} ({detail}); prepare both with the same "
                                     "tokenizer options")
    return mix_dir


def count_text(n: int) -> str:
    """A token count for people: 1234567 -> '1.2 M', 45600 -> '45.6 k'."""
    if n >= 1_000_000:
        return f"{n / 1e6:.1f} M"
    return f"{n / 1e3:.1f} k" if n >= 1_000 else str(n)


class MixedWindows(Dataset):
    """Train windows by global window number ``g``: from ``mix`` with probability ``weight``, else ``main``."""

    def __init__(self, main: RandomWindows, mix: RandomWindows, weight: float):
        self.main, self.mix, self.weight = main, mix, float(weight)
        self.seed = main.seed

    def from_mix(self, g: int) -> bool:
        """Whether window ``g`` is drawn from the mix dataset; a function of (seed, g) only."""
        return bool(np.random.default_rng((self.seed, g, CHOICE_STREAM)).random() < self.weight)

    def source(self, g: int) -> RandomWindows:
        return self.mix if self.from_mix(g) else self.main

    def window(self, g: int) -> np.ndarray:
        """The L + 1 ids of window ``g`` (int64, PAD-padded), from the dataset its choice names."""
        return self.source(int(g)).window(int(g))

    def __getitem__(self, g: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.source(int(g))[int(g)]  # (x, y), each (L,)
