"""``musictx-attention``: draw where a Music Transformer looks over a MIDI file
(`musictx.evaluation.attention_view`; config ``conf/attention.yaml``).

    musictx-attention midi=outputs/continue/sample_00.mid takeover=8
    musictx-attention checkpoint=outputs/.../last.ckpt midi=piece.mid layer=2 head=0 top=2

Writes the PNG named by ``output`` and ``<output>.json`` with every arc; prints which seconds of the piece
are drawn (a piece longer than the model's context is drawn over one window of it, ``until_seconds`` picks
which) and the share of attention that lands on the seed (before ``takeover``) when one is given.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from musictx.checkpoints.model_store import ModelLoadError
from musictx.commands.config_help import with_key_help
from musictx.evaluation.attention_view import AttentionOptions, draw_attention, summary_lines
from musictx.generation.seeds import GenerateError
from musictx.io.midi_io import MidiReadError
from musictx.io.tokenizer import TokenizerMismatchError
from musictx.paths import CONF_DIR


@with_key_help("attention", "musictx-attention")
@hydra.main(config_path=CONF_DIR, config_name="attention", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Entry point: a bad model, file or option ends with a one-line error (exit status 1)."""
    try:
        summary = draw_attention(AttentionOptions(**OmegaConf.to_container(cfg)))
    except (TypeError, ValueError, GenerateError, MidiReadError, ModelLoadError, TokenizerMismatchError) as err:
        sys.exit(f"musictx-attention: error: {err}")
    print(summary_lines(summary))


if __name__ == "__main__":
    main()
