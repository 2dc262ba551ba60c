"""``musictx-evaluate``: a model on a prepared split (`musictx.evaluation.run`; config ``conf/evaluate.yaml``).

    musictx-evaluate data.dir=data/piano split=test             # the shipped piano model
    musictx-evaluate checkpoint=outputs/.../last.ckpt data.dir=data/maestro split=test
    musictx-evaluate checkpoint=... mode=continuation continuation.num_seeds=16
    musictx-evaluate checkpoint=... mode=all output_dir=out/eval
    musictx-evaluate checkpoint=... mode=motif motif.num_seeds=16 motif.length_seconds=60   # forgetting curve
    musictx-evaluate checkpoint=... mode=motif motif.seed_midi=my_motif.mid                 # your own seed
    musictx-evaluate checkpoint=... mode=recall data.dir=data/piano split=test           # copy gain, context

Writes ``metrics.json`` in ``output_dir`` and prints a table. Works for every model musictx-train makes.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from musictx.checkpoints.model_store import ModelLoadError
from musictx.commands.config_help import with_key_help
from musictx.evaluation.run import EvaluateError, EvaluateOptions, evaluate
from musictx.io.tokenizer import TokenizerMismatchError
from musictx.paths import CONF_DIR


@with_key_help("evaluate", "musictx-evaluate")
@hydra.main(config_path=CONF_DIR, config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Entry point: a bad option, model or dataset ends with one line (exit status 1)."""
    try:
        evaluate(EvaluateOptions.from_mapping(OmegaConf.to_container(cfg, resolve=True)))
    except (EvaluateError, ModelLoadError, TokenizerMismatchError) as err:
        raise SystemExit(f"musictx-evaluate: error: {err}") from None
    OmegaConf.save(cfg, Path(cfg.output_dir) / "evaluate_config.yaml", resolve=True)  # the numbers used


if __name__ == "__main__":
    main()
