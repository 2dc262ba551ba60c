"""``musictx-attention``: draw where a Music Transformer looks over a MIDI file
(`musictx.evaluation.attention_view`; config ``conf/attention.yaml``).

    musictx-attention midi=outputs/continue/sample_00.mid takeover=8
    musictx-attention checkpoint=outputs/.../last.ckpt midi=piece.mid layer=2 head=0 top=2

Writes the PNG named by ``output`` and ``<output>.json`` with every arc; prints which seconds of the piece
are drawn (a piece longer than the model's context is drawn over one window of it, ``until_seconds`` picks
which) and the share of attention that lands on the seed (before ``takeover``) when one is given. Neither
file may replace one already there (``overwrite=true`` allows it) or land in a refused folder
(`musictx.safe_output`); both are checked before the model loads.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from musictx.console.config_help import with_key_help
from musictx.console.guard import before_hydra, command_guard
from musictx.evaluation.attention_view import AttentionOptions, draw_attention, summary_lines
from musictx.paths import CONF_DIR
from musictx.safe_output import OutputError, check_new, check_target

PROG = "musictx-attention"


def check_output(cfg: DictConfig) -> None:
    """OutputError when ``output`` (or its JSON beside it) is refused or would replace a file."""
    png = Path(str(cfg.output))
    check_target(png.parent, "output")
    if png.is_dir() or not png.name or str(cfg.output).endswith(("/", "\\")):
        raise OutputError(f"output={png}: a folder; name the picture to write, e.g. output={png / 'arcs.png'}")
    if not cfg.get("overwrite"):
        check_new([png, png.with_suffix(".json")], "output")


@with_key_help("attention", PROG)
def main() -> None:
    """Console script: the config and the output are checked before Hydra starts, then Hydra runs."""
    before_hydra("attention", PROG, check_output)
    attention_main()


@hydra.main(config_path=CONF_DIR, config_name="attention", version_base="1.3")
def attention_main(cfg: DictConfig) -> None:
    """Entry point: a bad model, file, option or output ends with a one-line error (exit status 1)."""
    with command_guard(PROG, overwrite=bool(cfg.get("overwrite")), config_name="attention",
                       extra=(TypeError, ValueError)):
        check_output(cfg)
        summary = draw_attention(AttentionOptions(**OmegaConf.to_container(cfg)))
        print(summary_lines(summary))


if __name__ == "__main__":
    main()
