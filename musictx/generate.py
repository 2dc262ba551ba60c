"""``musictx-generate``: the command line of `musictx.continue_midi` (config ``conf/generate.yaml``).

    musictx-generate seed_midi=motif.mid                      # the shipped model
    musictx-generate checkpoint=outputs/train/.../checkpoints/last.ckpt seed_midi=motif.mid seed_seconds=10 \\
        length_seconds=30 num_samples=4 temperature=0.95 top_p=0.95 seed=7 output_dir=out/
"""

from __future__ import annotations

import os
import sys

import hydra
from omegaconf import DictConfig

from musictx.continue_midi import GenerateError, GenerateOptions, run
from musictx.midi_io import MidiReadError
from musictx.paths import CONF_DIR
from musictx.tokenizer import TokenizerMismatchError


@hydra.main(config_path=CONF_DIR, config_name="generate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Entry point: bad inputs end with a one-line error (exit status 1) and no files."""
    from hydra.core.hydra_config import HydraConfig

    try:
        run(GenerateOptions.from_config(cfg))
    except (GenerateError, MidiReadError, TokenizerMismatchError) as err:
        sys.exit(f"musictx-generate: error: {err}")
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
