"""``musictx-evaluate``: a model on a prepared split (`musictx.evaluation.run`; config ``conf/evaluate.yaml``).

    musictx-evaluate data.dir=data/piano split=test             # the shipped piano model
    musictx-evaluate checkpoint=outputs/.../last.ckpt data.dir=data/maestro split=test
    musictx-evaluate checkpoint=pop data.dir=data/pop mode=nll nll.max_songs=5      # the first 5 songs' NLL only
    musictx-evaluate checkpoint=... mode=continuation continuation.num_seeds=16
    musictx-evaluate checkpoint=... mode=all output_dir=out/eval
    musictx-evaluate checkpoint=... mode=motif motif.num_seeds=16 motif.length_seconds=60   # forgetting curve
    musictx-evaluate checkpoint=... mode=motif motif.seed_midi=my_motif.mid                 # your own seed
    musictx-evaluate checkpoint=... mode=recall data.dir=data/piano split=test           # copy gain, context
    musictx-evaluate checkpoint=pop data.dir=data/pop split=validation mode=two_sample   # classifiers: model vs real

Writes ``metrics.json`` in ``output_dir`` and prints a table. Works for every model musictx-train makes.
An ``output_dir`` inside the package, ``/``, the home folder or the dataset itself is refused before any
work, and so is one that holds these files already, unless ``overwrite=true`` (`musictx.safe_output`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from musictx.console.config_help import with_key_help
from musictx.console.guard import before_hydra, command_guard, plain
from musictx.evaluation.run import EvaluateOptions, check_options, evaluate
from musictx.paths import CONF_DIR
from musictx.safe_output import check_new, check_target, write_text

PROG = "musictx-evaluate"
OUTPUT_FILES = ("metrics.json", "evaluate_config.yaml", "forgetting_curve.png", "recall.png", "skipped.tsv")


def check_outputs(cfg: DictConfig) -> None:
    """The options (`musictx.evaluation.run.check_options`: names, mode, the song modes' blocks), then
    OutputError when ``output_dir`` is refused or holds a file this run would replace: before any model loads."""
    check_options(EvaluateOptions.from_mapping(plain(cfg)))
    out = check_target(str(cfg.output_dir), "output_dir", inputs={"data.dir": cfg.data.dir})
    if not cfg.get("overwrite"):
        check_new([out / name for name in OUTPUT_FILES if (out / name).exists()], "output_dir")


@with_key_help("evaluate", PROG)
def main() -> None:
    """Console script: the config and the output folder are checked before Hydra starts, then Hydra runs."""
    sys.argv[1:] = run_dir_is_output_dir(sys.argv[1:])
    before_hydra("evaluate", PROG, check_outputs)
    evaluate_main()


def run_dir_is_output_dir(args: list[str]) -> list[str]:
    """``args`` with ``hydra.run.dir`` set to the ``output_dir`` given (unless set too): Hydra's run folder (its
    evaluate.log) is then the output folder the output policy checked, not a new ./outputs/evaluate/DATE/TIME."""
    given = [a.split("=", 1)[1] for a in args if a.startswith("output_dir=")]
    if given and not any(a.startswith(("hydra.run.dir=", "-")) for a in args):
        return [*args, f"hydra.run.dir={given[-1]}"]
    return args


@hydra.main(config_path=CONF_DIR, config_name="evaluate", version_base="1.3")
def evaluate_main(cfg: DictConfig) -> None:
    """Entry point: a bad option, model, dataset or output ends with one line (exit status 1)."""
    with command_guard(PROG, overwrite=bool(cfg.get("overwrite")), config_name="evaluate"):
        check_outputs(cfg)
        evaluate(EvaluateOptions.from_mapping(OmegaConf.to_container(cfg, resolve=True)))
        # the numbers used, beside the results (atomic, as every output)
        write_text(Path(cfg.output_dir) / "evaluate_config.yaml", OmegaConf.to_yaml(cfg, resolve=True))


if __name__ == "__main__":
    main()
