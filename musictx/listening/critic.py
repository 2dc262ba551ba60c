"""A critic: how much a continuation sounds like a song rather than a model, as one number, from its listening
features (`musictx.listening.listen_features`). A logistic regression fit on the train split's songs
(`scripts/fit_critic.py`: real next bars 1, the model's continuation 0), stored as JSON beside the model it
judges (``critic.json``) and read with numpy alone. `best_of` choices rank a sample's candidates by it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

CRITIC_FILE = "critic.json"
FORMAT = 1


@dataclass(frozen=True)
class Critic:
    names: tuple[str, ...]  # (F,) the features it reads, in this order
    mean: np.ndarray  # (F,) the standardization the weights were fit on
    scale: np.ndarray  # (F,)
    coef: np.ndarray  # (F,) per standardized feature
    intercept: float
    best_of: int  # the candidates a sample is chosen from when the run does not say
    about: dict = field(default_factory=dict)  # how it was fit (songs, split, regularization, ...)

    def logit(self, rows: list[dict[str, float]]) -> np.ndarray:
        """(N,) the log-odds that each row of features is a song's (higher: more like the song). A feature
        missing from a row raises KeyError naming it; nan counts as 0, as in the fit."""
        x = np.nan_to_num(np.array([[row[n] for n in self.names] for row in rows], dtype=float))  # (N, F)
        return ((x - self.mean) / self.scale) @ self.coef + self.intercept

    def save(self, path: str | Path) -> None:
        data = {"format": FORMAT, "best_of": self.best_of, "intercept": self.intercept, "about": self.about,
                "features": {n: {"mean": float(m), "scale": float(s), "coef": float(c)}
                             for n, m, s, c in zip(self.names, self.mean, self.scale, self.coef, strict=True)}}
        Path(path).write_text(json.dumps(data, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Critic:
        """The critic in ``path``; ValueError naming the file for one that is not a critic of a known format."""
        try:
            data = json.loads(Path(path).read_text())
            if data.get("format", 0) > FORMAT:
                raise ValueError(f"format {data.get('format')} (this musictx reads up to {FORMAT})")
            feats = data["features"]
            names = tuple(feats)
            col = lambda key: np.array([float(feats[n][key]) for n in names])  # noqa: E731
            return cls(names, col("mean"), col("scale"), col("coef"), float(data["intercept"]),
                       int(data["best_of"]), dict(data.get("about", {})))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"{path}: not a musictx critic ({type(err).__name__}: {err})") from None
