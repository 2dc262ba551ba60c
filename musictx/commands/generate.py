"""``musictx-generate``: the command line of `musictx.generation.continue_midi` (config ``conf/generate.yaml``).

    musictx-generate seed_midi=motif.mid                      # the shipped model
    musictx-generate checkpoint=outputs/train/.../checkpoints/last.ckpt seed_midi=motif.mid seed_seconds=10 \\
        length_seconds=30 num_samples=4 temperature=0.95 top_p=0.95 seed=7 output_dir=out/

Option names are checked before Hydra composes the config: Hydra's config is struct, so a typo would end in
its several-line "not in struct" error and a ``+key=`` hint that `GenerateOptions` then refuses anyway.
Ctrl-C while sampling keeps the samples so far (`musictx.generation.continue_midi.run`) and exits with status 130.
"""

from __future__ import annotations

import os
import sys

import hydra
from omegaconf import DictConfig

from musictx.commands.config_help import with_key_help
from musictx.generation.continue_midi import GenerateError, GenerateOptions, check_option_names, run
from musictx.io.midi_io import MidiReadError
from musictx.io.tokenizer import TokenizerMismatchError
from musictx.paths import CONF_DIR

PROG = "musictx-generate"


@with_key_help("generate", PROG)
def main() -> None:
    """Console script: unknown option names end in one line naming the closest option, then Hydra runs."""
    try:
        check_option_names(override_names(sys.argv[1:]))
    except GenerateError as err:
        sys.exit(f"{PROG}: error: {err}")
    generate_main()


def override_names(args: list[str]) -> list[str]:
    """The option each plain ``key=value`` override sets (its first dotted part). Flags (``-m``, ``--cfg``),
    ``hydra.*`` / ``hydra/*`` overrides and ``+`` / ``~`` ones (checked by `GenerateOptions.from_config`
    or refused by Hydra itself) are left out."""
    names = []
    for arg in args:
        if "=" not in arg or arg.startswith(("-", "+", "~")):
            continue
        root = arg.split("=", 1)[0].replace("/", ".").split(".", 1)[0]
        if root != "hydra":
            names.append(root)
    return names


@hydra.main(config_path=CONF_DIR, config_name="generate", version_base="1.3")
def generate_main(cfg: DictConfig) -> None:
    """Bad inputs end with a one-line error (exit status 1) and no files; Ctrl-C with one line (status 130)."""
    from hydra.core.hydra_config import HydraConfig

    try:
        run(GenerateOptions.from_config(cfg))
    except (GenerateError, MidiReadError, TokenizerMismatchError) as err:
        sys.exit(f"{PROG}: error: {err}")
    except KeyboardInterrupt as err:
        print(f"{PROG}: {str(err) or 'interrupted'}", file=sys.stderr)
        sys.exit(130)
    finally:
        _remove_if_empty(HydraConfig.get().runtime.output_dir)


def _remove_if_empty(path: str) -> None:
    """Hydra creates its run dir before ``main``; drop it when nothing was written there."""
    try:
        os.rmdir(path)
    except OSError:
        pass  # not empty (the outputs are there) or already gone


if __name__ == "__main__":
    main()
