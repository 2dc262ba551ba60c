"""``musictx-attention``: draw where a Music Transformer looks (see `musictx.evaluation.arcs`) over a MIDI file.

    musictx-attention midi=outputs/continue/sample_00.mid takeover=8
    musictx-attention checkpoint=outputs/.../last.ckpt midi=piece.mid layer=2 head=0 top=2

Writes the PNG named by ``output`` and ``<output>.json`` with every arc; prints which seconds of the piece
are drawn (a piece longer than the model's context is drawn over one window of it, ``until_seconds`` picks
which) and the share of attention that lands on the seed (before ``takeover``) when one is given.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from musictx.checkpoints.model_store import ModelLoadError, load_model
from musictx.commands.config_help import with_key_help
from musictx.evaluation.arcs import ArcChoice, arcs_of_midi, plot_arcs, share_on_span
from musictx.generation.seeds import GenerateError
from musictx.io.jsonio import write_json
from musictx.io.midi_io import MidiReadError
from musictx.io.tokenizer import TokenizerMismatchError
from musictx.paths import BUNDLED_MOTIF, CONF_DIR


@dataclass
class AttentionOptions:
    checkpoint: str | None = None
    midi: str | None = None
    layer: int | None = None
    head: int | None = None
    last_notes: int = 12
    from_seconds: float | None = None
    top: int = 3
    takeover: float | None = None
    until_seconds: float | None = None
    output: str = "arcs.png"
    threads: int | None = None

    def choice(self) -> ArcChoice:
        return ArcChoice(self.layer, self.head, self.last_notes, self.from_seconds, self.top, self.until_seconds)


def run(opts: AttentionOptions) -> dict:
    """Load the model, read the piece, draw the arcs; returns the summary written to the JSON."""
    if opts.top < 1:
        raise ValueError(f"top={opts.top}: draw at least one arc per note")
    if opts.threads:
        torch.set_num_threads(opts.threads)
    net, tokenizer, meta = load_model(opts.checkpoint)
    midi = opts.midi or str(BUNDLED_MOTIF)
    arc_map = arcs_of_midi(net, tokenizer, midi, opts.choice())
    png = plot_arcs(arc_map, opts.output, opts.top, opts.takeover)
    summary = {"model": meta["ref"], "midi": midi, "view": arc_map.label, "png": str(png),
               "drawn": arc_map.span.describe(), "span": asdict(arc_map.span),
               "query_notes": len(arc_map.queries), "share_on_note_on_tokens": float(arc_map.on_notes.mean()),
               "arcs": [{"from_note": q, "to_note": k, "weight": w, "from_s": float(arc_map.notes.start[q]),
                         "to_s": float(arc_map.notes.start[k]), "from_pitch": int(arc_map.notes.pitch[q]),
                         "to_pitch": int(arc_map.notes.pitch[k])} for q, k, w in arc_map.top_arcs(opts.top)]}
    if opts.takeover:
        summary["share_on_seed"] = share_on_span(arc_map, 0.0, opts.takeover)
    write_json(Path(png).with_suffix(".json"), {"options": asdict(opts), **summary})
    return summary


@with_key_help("attention", "musictx-attention")
@hydra.main(config_path=CONF_DIR, config_name="attention", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Entry point: a bad model, file or option ends with a one-line error (exit status 1)."""
    try:
        opts = AttentionOptions(**OmegaConf.to_container(cfg))
        summary = run(opts)
    except (TypeError, ValueError, GenerateError, MidiReadError, ModelLoadError, TokenizerMismatchError) as err:
        sys.exit(f"musictx-attention: error: {err}")
    print(summary["drawn"])
    print(f"{summary['png']}: {len(summary['arcs'])} arcs from {summary['query_notes']} notes ({summary['view']}); "
          f"{summary['share_on_note_on_tokens']:.0%} of their attention on NOTE_ON tokens"
          + (f", {summary['share_on_seed']:.0%} on the seed" if "share_on_seed" in summary else ""))


if __name__ == "__main__":
    main()
