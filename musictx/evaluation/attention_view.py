"""The job behind ``musictx-attention``: load a model, read a piece, draw its attention arcs
(`musictx.evaluation.arcs`) to a PNG, and write every arc to ``<output>.json``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from musictx.checkpoints.model_store import load_model
from musictx.evaluation.arcs import ArcChoice, arcs_of_midi, plot_arcs, share_on_span
from musictx.io.jsonio import write_json
from musictx.paths import BUNDLED_MOTIF


@dataclass
class AttentionOptions:
    """The keys of conf/attention.yaml, which holds their defaults and says what each means."""

    checkpoint: str | None
    midi: str | None
    layer: int | None
    head: int | None
    last_notes: int
    from_seconds: float | None
    top: int
    takeover: float | None
    until_seconds: float | None
    output: str
    threads: int | None
    overwrite: bool = False  # replace an existing picture or JSON (musictx.safe_output)

    def choice(self) -> ArcChoice:
        return ArcChoice(self.layer, self.head, self.last_notes, self.from_seconds, self.top, self.until_seconds)


def draw_attention(opts: AttentionOptions) -> dict:
    """Load the model, read the piece, draw the arcs; returns the summary written to the JSON."""
    if opts.top < 1:
        raise ValueError(f"top={opts.top}: draw at least one arc per note")
    if opts.from_seconds is None and opts.last_notes < 1:
        raise ValueError(f"last_notes={opts.last_notes}: ask for at least 1 query note (or from_seconds=S)")
    for name in ("takeover", "from_seconds", "until_seconds"):
        if (value := getattr(opts, name)) is not None and not value >= 0:
            raise ValueError(f"{name}={value}: give seconds >= 0 (or null)")
    if opts.threads:
        torch.set_num_threads(opts.threads)
    net, tokenizer, meta = load_model(opts.checkpoint)
    midi = opts.midi or str(BUNDLED_MOTIF)
    arc_map = arcs_of_midi(net, tokenizer, midi, opts.choice())
    png = plot_arcs(arc_map, opts.output, opts.top, opts.takeover)
    summary = {"model": meta["ref"], "midi": midi, "view": arc_map.label, "png": str(png),
               "drawn": arc_map.span.describe(), "span": asdict(arc_map.span),
               "query_notes": len(arc_map.queries), "note_token": arc_map.note_token,
               "share_on_note_on_tokens": float(arc_map.on_notes.mean()),
               "arcs": [{"from_note": q, "to_note": k, "weight": w, "from_s": float(arc_map.notes.start[q]),
                         "to_s": float(arc_map.notes.start[k]), "from_pitch": int(arc_map.notes.pitch[q]),
                         "to_pitch": int(arc_map.notes.pitch[k])} for q, k, w in arc_map.top_arcs(opts.top)]}
    if opts.takeover:
        summary["share_on_seed"] = share_on_span(arc_map, 0.0, opts.takeover)
    write_json(Path(png).with_suffix(".json"), {"options": asdict(opts), **summary})
    return summary


def summary_lines(summary: dict) -> str:
    """What the command prints: the span drawn, then the arcs and where their attention went."""
    on_seed = f", {summary['share_on_seed']:.0%} on the seed" if "share_on_seed" in summary else ""
    return (f"{summary['drawn']}\n{summary['png']}: {len(summary['arcs'])} arcs from {summary['query_notes']} notes "
            f"({summary['view']}); {summary['share_on_note_on_tokens']:.0%} of their attention on "
            f"{summary['note_token']} tokens"
            + on_seed)
