"""``musictx-prep``: the command line of `data_prep.prepare.run` (config ``conf/prepare.yaml``).

    musictx-prep                                   # default: Bach chorales from music21 -> data/bach
    musictx-prep source=folder input_dir=/data/midi output_dir=data/mine num_workers=8
    musictx-prep source=maestro input_dir=/data/maestro-v3.0.0 output_dir=data/maestro

Hydra composes and resolves the config here and nowhere else: the library gets `PrepOptions`. A bad option,
output folder or input ends with one line (exit status 1). `compose_options` gives tests the options a
command line would, without running Hydra's app.
"""

from __future__ import annotations

import sys

import hydra
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from data_prep.options import PrepOptions
from data_prep.prepare import run
from data_prep.safety import PrepError
from musictx.commands.config_help import with_key_help
from musictx.paths import CONF_DIR


def compose_options(overrides: list[str] | tuple = ()) -> PrepOptions:
    """The options of ``musictx-prep <overrides>`` (Hydra's compose API; nothing is run or written)."""
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="prepare", overrides=list(overrides))
    return PrepOptions.from_mapping(OmegaConf.to_container(cfg, resolve=True))


@with_key_help("prepare", "musictx-prep")
@hydra.main(config_path=CONF_DIR, config_name="prepare", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Entry point: errors the user can fix end with ``musictx-prep: error: ...``, no traceback."""
    try:
        run(PrepOptions.from_mapping(OmegaConf.to_container(cfg, resolve=True)))
    except (PrepError, FileNotFoundError) as err:
        sys.exit(f"musictx-prep: error: {err}")


if __name__ == "__main__":
    main()
