"""The settings of one musictx-prep run: `PrepOptions`, the keys of ``conf/prepare.yaml`` as a typed, frozen object.

The prep library takes this object, never a Hydra config, so it runs the same from the command
(`musictx.commands.prep`, which resolves its Hydra config into a plain dict and calls `PrepOptions.from_mapping`),
from tests and from benches (`prep_options`, which reads the YAML without Hydra). The fields have no defaults:
prepare.yaml is the one place they are written. Names are checked here (an unknown or missing key is one
line, `data_prep.safety.check_option_names`); values are checked by `data_prep.safety.check_options` before a
run does any work.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from data_prep.safety import PrepError, check_option_names
from musictx.paths import conf_values

GROUPS = ("split", "tokenizer")  # prepare.yaml's nested blocks


@dataclass(frozen=True)
class SplitOptions:
    """How pieces are dealt to the validation and test splits (prepare.yaml's ``split`` block)."""

    validation: float
    test: float
    group_by: str


@dataclass(frozen=True)
class PrepOptions:
    """The keys of prepare.yaml (see the comments there); ``tokenizer`` is `EventTokenizer`'s config dict."""

    source: str
    input_dir: str | None
    output_dir: str
    bach_cache_dir: str
    bach_limit: int | None
    folk_cache_dir: str
    folk_collections: tuple[str, ...]
    folk_bpm: float
    folk_limit: int | None
    folk_plays: int
    num_workers: int
    timeout_s: float
    max_memory_gb: float
    reader: str
    fallback_reader: str | None
    max_seconds: float
    allow_empty: bool
    pop_versions: str
    split: SplitOptions
    tokenizer: dict

    @classmethod
    def from_mapping(cls, values) -> PrepOptions:
        """Options of a plain dict of prepare.yaml's keys (a resolved config; a ``hydra`` block is left out).
        Raises PrepError naming the keys prepare.yaml does not have, or those missing."""
        values = {k: v for k, v in dict(values).items() if k != "hydra"}
        check_option_names(values)
        for group in GROUPS:
            if not isinstance(values[group], dict):
                raise PrepError(f"{group} must be a block of keys ({group}.<key>=...); got {values[group]!r}")
        return cls(**{**values, "split": SplitOptions(**values["split"]), "tokenizer": dict(values["tokenizer"]),
                      "folk_collections": tuple(values["folk_collections"])})

    def to_mapping(self) -> dict:
        """The options as the plain dict `from_mapping` takes (what `data_prep.safety.check_options` checks)."""
        values = asdict(self)
        values["folk_collections"] = list(self.folk_collections)
        return values


def prep_options(**overrides) -> PrepOptions:
    """prepare.yaml's settings with ``overrides`` merged in (dicts for its ``split`` and ``tokenizer`` blocks),
    read without Hydra: what benches and scripts pass to `data_prep.prepare.write_dataset`. ``output_dir`` is
    required: the YAML's default (``data/${source}``) is a Hydra interpolation."""
    if "output_dir" not in overrides:
        raise PrepError("prep_options needs output_dir (the YAML's default is resolved by Hydra, in musictx-prep)")
    return PrepOptions.from_mapping(conf_values("prepare", GROUPS, **overrides))
