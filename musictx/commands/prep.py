"""``musictx-prep``: the command line of `data_prep.prepare.run` (config ``conf/prepare.yaml``).

    musictx-prep                                   # default: Bach chorales from music21 -> data/bach
    musictx-prep source=folder input_dir=/data/midi output_dir=data/mine num_workers=8
    musictx-prep source=maestro input_dir=/data/maestro-v3.0.0 output_dir=data/maestro

Hydra composes and resolves the config here and nowhere else: the library gets `PrepOptions`. A bad option,
output folder or input ends with one line (exit status 1). `compose_options` gives tests the options a
command line would, without running Hydra's app.
"""

from __future__ import annotations

import hydra
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from data_prep.options import PrepOptions
from data_prep.prepare import run
from data_prep.safety import PrepError
from musictx.console.config_help import with_key_help
from musictx.console.guard import before_hydra, command_guard
from musictx.paths import CONF_DIR
from musictx.safe_output import check_target

PROG = "musictx-prep"


def compose_options(overrides: list[str] | tuple = ()) -> PrepOptions:
    """The options of ``musictx-prep <overrides>`` (Hydra's compose API; nothing is run or written)."""
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="prepare", overrides=list(overrides))
    return PrepOptions.from_mapping(OmegaConf.to_container(cfg, resolve=True))


def check_output(cfg: DictConfig) -> None:
    """OutputError for an ``output_dir`` inside the package, ``/`` or the home folder (`musictx.safe_output`);
    the rest of its checks (the input, a folder prep did not write) are `data_prep.safety`'s."""
    check_target(str(cfg.output_dir), "output_dir")


@with_key_help("prepare", PROG)
def main() -> None:
    """Console script: the config and the output folder are checked before Hydra starts, then Hydra runs."""
    before_hydra("prepare", PROG, check_output)
    prep_main()


@hydra.main(config_path=CONF_DIR, config_name="prepare", version_base="1.3")
def prep_main(cfg: DictConfig) -> None:
    """Entry point: errors the user can fix end with ``musictx-prep: error: ...``, no traceback."""
    with command_guard(PROG, config_name="prepare", extra=(PrepError, FileNotFoundError)):
        check_output(cfg)
        run(PrepOptions.from_mapping(OmegaConf.to_container(cfg, resolve=True)))


if __name__ == "__main__":
    main()
