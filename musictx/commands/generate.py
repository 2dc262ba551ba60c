"""``musictx-generate``: the command line of `musictx.generation.continue_midi.run` (config ``conf/generate.yaml``).

    musictx-generate seed_midi=motif.mid                      # the shipped model
    musictx-generate checkpoint=outputs/train/.../checkpoints/last.ckpt seed_midi=motif.mid seed_seconds=10 \\
        length_seconds=30 num_samples=4 temperature=0.95 top_p=0.95 seed=7 output_dir=out/

Option names are checked before Hydra composes the config: Hydra's config is struct, so a typo would end in
its several-line "not in struct" error and a ``+key=`` hint that `GenerateOptions` then refuses anyway.
Ctrl-C keeps what was made so far, with its record, and exits with status 130. Torch loads only once the
options have passed their checks (`musictx.lazy`).
"""

from __future__ import annotations

import os
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from musictx.console.config_help import with_key_help
from musictx.console.guard import before_hydra, command_guard, plain, remove_new_parents
from musictx.decoding.errors import GenerateError
from musictx.generation.generate_options import (
    GenerateOptions,
    check_option_names,
    not_on_command_line,
    override_names,
)
from musictx.paths import CONF_DIR

PROG = "musictx-generate"


def check_options(cfg: DictConfig) -> None:
    """The options' own checks (`GenerateOptions.check`: numbers and bounds, output_dir, the seed file),
    before Hydra makes its run folder."""
    GenerateOptions.from_mapping(plain(cfg)).check()


@with_key_help("generate", PROG)
def main() -> None:
    """Console script: unknown option names end in one line naming the closest option, the options are
    checked, then Hydra runs."""
    # tracks=bridge,piano as the issue writes it: Hydra would read a bare comma list as a sweep
    sys.argv = [f"tracks=[{a[7:]}]" if a.startswith("tracks=") and "," in a and "[" not in a else a
                for a in sys.argv]
    try:
        not_on_command_line(sys.argv[1:])
        check_option_names(override_names(sys.argv[1:]))
    except GenerateError as err:
        sys.exit(f"{PROG}: error: {err}")
    before_hydra("generate", PROG, check_options)
    generate_main()


@hydra.main(config_path=CONF_DIR, config_name="generate", version_base="1.3")
def generate_main(cfg: DictConfig) -> None:
    """Bad inputs end with a one-line error (exit status 1) and no files; Ctrl-C with one line (status 130)."""
    try:
        with command_guard(PROG, config_name="generate"):
            opts = GenerateOptions.from_mapping(OmegaConf.to_container(cfg, resolve=True))
            from musictx.generation.continue_midi import run  # torch: not for --help and the checks
            run(opts)
    finally:
        _remove_if_empty(HydraConfig.get().runtime.output_dir)


def _remove_if_empty(path: str) -> None:
    """Hydra creates its run dir before ``main``; drop it when nothing was written there."""
    try:
        os.rmdir(path)
    except OSError:
        return  # not empty (the outputs are there) or already gone
    remove_new_parents(path)  # and outputs/generate/<date> when this run made them


if __name__ == "__main__":
    main()
