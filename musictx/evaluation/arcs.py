"""Attention arcs: where a Music Transformer looks when it plays a note (``musictx-attention``, the app).

For each chosen *query* note the picture draws arcs back to the earlier notes whose NOTE_ON tokens get the
most attention. The probabilities come from the attention modules themselves
(`_SelfAttention.attention_probs`: each layer's own projections and logits for its real input), per layer
and head, or averaged.

Which query row: logits at position t predict token t + 1, so the row that *chose* a note is the one just
before its NOTE_ON token; that row's attention over the keys is what the arcs show. Which keys: only the
NOTE_ON token of each earlier note is counted as that note (velocity, time-shift and note-off tokens carry
the rest of the mass, and the share that lands on notes is reported).

Which span: the model sees at most ``max_seq_len`` tokens, so a longer piece is read through one window of
that many tokens, the one ending at ``until_seconds`` (or at the piece's end); earlier notes are outside what
the model can see and get no arcs. Note times stay in the piece's own seconds (from its first note, as a
seed is read), so a window starting at 41.2 s draws its first note at 41.2 s and a ``takeover`` or
``from_seconds`` means the same moment it means in the whole piece; `Span.describe` says what is drawn.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from musictx.io.midi_io import Notes
from musictx.io.piano_roll import new_figure, note_bars, save_figure
from musictx.io.tokenizer import EventTokenizer
from musictx.tasks import seed_from_midi


@dataclass
class ArcChoice:
    """What to draw: ``layer``/``head`` an index or None for the mean; the last ``last_notes`` notes (or
    those starting at or after ``from_seconds``) as queries; ``top`` arcs per query note; the window of the
    model's context that ends at ``until_seconds`` (None: at the piece's end)."""

    layer: int | None = None
    head: int | None = None
    last_notes: int = 12
    from_seconds: float | None = None
    top: int = 3
    until_seconds: float | None = None


@dataclass
class Span:
    """The tokens [first, stop) of a piece of n_tokens that the arcs are drawn over: start_s to end_s of the
    piece's piece_s seconds; context is the model's max_seq_len."""

    first: int
    stop: int
    n_tokens: int
    start_s: float
    end_s: float
    piece_s: float
    context: int

    def describe(self) -> str:
        """One line: which seconds are drawn and why not all of them."""
        if self.first == 0 and self.stop == self.n_tokens:
            return (f"drawing the whole piece, 0.0-{self.piece_s:.1f} s ({self.n_tokens} tokens; "
                    f"the model's context is {self.context})")
        why = [f"the model's context is {self.context} tokens"] if self.first > 0 else []
        if self.stop < self.n_tokens:
            why.append("the window ends at until_seconds")
        return f"drawing {self.start_s:.1f}-{self.end_s:.1f} s of {self.piece_s:.1f} s: {', '.join(why)}"


def choose_span(tokenizer: EventTokenizer, ids: np.ndarray, context: int, until_seconds: float | None = None) -> Span:
    """The last `context` tokens of ids up to ``until_seconds`` (every token whose clock is at or before it)."""
    if tokenizer.kind != "performance":  # metrical ids: the clock is each token's bar and position
        clock_s = tokenizer.note_table(ids)[2]
        stop = len(ids) if until_seconds is None else int(np.searchsorted(clock_s, until_seconds, side="right"))
        first = max(0, stop - context)
        piece_s = float(clock_s[-1]) if len(ids) else 0.0
        return Span(first, stop, len(ids), float(clock_s[first]) if stop else 0.0,
                    float(clock_s[stop - 1]) if stop else 0.0, piece_s, context)
    step = tokenizer.config.time_step
    shift = tokenizer.shift_steps(ids)
    clock = np.cumsum(shift)  # (T,) steps after each token
    stop = len(ids)
    if until_seconds is not None:
        if until_seconds < 0:
            raise ValueError(f"until_seconds={until_seconds}: the piece starts at 0 s")
        stop = int(np.searchsorted(clock, round(until_seconds / step), side="right"))
    first = max(0, stop - context)
    piece_s = float(clock[-1]) * step if len(ids) else 0.0
    if stop == 0:
        return Span(0, 0, len(ids), 0.0, 0.0, piece_s, context)
    start_s = float(clock[first] - shift[first]) * step  # the clock before the window's first token
    return Span(first, stop, len(ids), start_s, float(clock[stop - 1]) * step, piece_s, context)


@dataclass
class ArcMap:
    notes: Notes               # every note of the window, times in the piece's seconds
    on_index: np.ndarray       # (N,) token index of each note's NOTE_ON
    queries: np.ndarray        # (Q,) note indices that ask
    weights: np.ndarray        # (Q, N) attention each query row gives each earlier note's NOTE_ON
    on_notes: np.ndarray       # (Q,) share of the row's attention that lands on NOTE_ON tokens at all
    label: str                 # "layer 2, head 0" / "mean of 3 layers, all heads"
    span: Span                 # the tokens and seconds of the piece the window covers
    note_token: str = "NOTE_ON"  # the token a note starts with: NOTE_ON (Performance events), Pitch (metrical)

    def top_arcs(self, top: int) -> list[tuple[int, int, float]]:
        """(query note, key note, weight) of the `top` heaviest keys per query note."""
        arcs = []
        for q, row in zip(self.queries, self.weights, strict=True):
            for k in np.argsort(-row)[:top]:
                if row[k] > 0:
                    arcs.append((int(q), int(k), float(row[k])))
        return arcs


def notes_with_tokens(tokenizer: EventTokenizer, ids: np.ndarray) -> tuple[Notes, np.ndarray]:
    """The decoded notes of ids and, for each, the index of the NOTE_ON (metrical: Pitch) token that started it."""
    if tokenizer.kind != "performance":
        notes, on_index, clock = tokenizer.note_table(ids)
        start = clock[0] if len(clock) else 0.0  # times from the window's start, as below
        return Notes(notes.start - start, notes.end - start, notes.pitch, notes.velocity), on_index
    notes = tokenizer.decode_notes(ids)
    lay, cfg = tokenizer.layout, tokenizer.config
    ids = np.asarray(ids, dtype=np.int64)
    step_at = np.cumsum(tokenizer.shift_steps(ids))  # the clock at each id (a NOTE_ON does not move it)
    starts = {}  # (step, pitch) -> token index; a later strike on one step replaces a zero-length one
    for t in np.flatnonzero(ids < lay.note_off).tolist():
        starts[(int(step_at[t]), int(ids[t]) - lay.note_on + cfg.pitch_min)] = t
    steps = np.rint(notes.start / cfg.time_step).astype(np.int64)
    on_index = np.array([starts[(int(s), int(p))] for s, p in zip(steps, notes.pitch, strict=True)], dtype=np.int64)
    return notes, on_index


def _pick_queries(notes: Notes, on_index: np.ndarray, choice: ArcChoice) -> np.ndarray:
    usable = np.flatnonzero(on_index > 0)  # the first token has no row before it
    if choice.from_seconds is not None:
        return usable[notes.start[usable] >= choice.from_seconds]
    return usable[-choice.last_notes:] if choice.last_notes > 0 else usable[:0]


def _select(probs: torch.Tensor, choice: ArcChoice) -> tuple[torch.Tensor, str]:
    """(R, T) from probs (L, 1, H, R, T) by the choice of layer and head."""
    n_layers, _, n_heads = probs.shape[:3]
    for name, value, size in (("layer", choice.layer, n_layers), ("head", choice.head, n_heads)):
        if value is not None and not 0 <= value < size:
            raise ValueError(f"{name}={value} out of range: the model has {size} {name}s (0..{size - 1})")
    p = probs[:, 0]
    p = p.mean(0) if choice.layer is None else p[choice.layer]
    p = p.mean(0) if choice.head is None else p[choice.head]
    where = f"mean of {n_layers} layers" if choice.layer is None else f"layer {choice.layer}"
    which = "mean of heads" if choice.head is None else f"head {choice.head}"
    return p, f"{where}, {which}"


def attention_arcs(net, tokenizer: EventTokenizer, ids: np.ndarray, choice: ArcChoice) -> ArcMap:
    """The ArcMap of a piece (ids) for a net with `attention_probs` (the Transformers of musictx.models)."""
    if not hasattr(net, "attention_probs"):
        raise ValueError(f"{type(net).__name__} has no attention to draw (attention arcs need a Transformer)")
    ids = np.asarray(ids, dtype=np.int64)
    span = choose_span(tokenizer, ids, net.max_seq_len, choice.until_seconds)
    ids = ids[span.first:span.stop]
    notes, on_index = notes_with_tokens(tokenizer, ids)  # times from the window's start
    notes = Notes(notes.start + span.start_s, notes.end + span.start_s, notes.pitch, notes.velocity)
    queries = _pick_queries(notes, on_index, choice)
    if len(queries) == 0:
        raise ValueError(f"no query notes: the piece has no notes there (check last_notes / from_seconds; "
                         f"{span.describe()})")
    device = next(net.parameters()).device
    rows = torch.as_tensor(on_index[queries] - 1, device=device)
    probs = net.eval().attention_probs(torch.as_tensor(ids, device=device)[None], rows)  # (L, 1, H, R, T)
    p, label = _select(probs.float(), choice)
    p = p.cpu().numpy()  # (Q, T)
    weights = p[:, on_index]  # (Q, N): mass on each note's NOTE_ON token (0 for notes after the row)
    on_notes = weights.sum(axis=1)
    return ArcMap(notes, on_index, queries, weights, on_notes, label, span,
                  "NOTE_ON" if tokenizer.kind == "performance" else "Pitch")


def arcs_of_midi(net, tokenizer: EventTokenizer, midi: str | os.PathLike, choice: ArcChoice) -> ArcMap:
    """The ArcMap of a MIDI file, read as a seed is (from its first note; a bad file raises GenerateError
    or MidiReadError naming it)."""
    if tokenizer.kind != "performance":
        return attention_arcs(net, tokenizer, tokenizer.encode(midi), choice)
    tokenizer.read(midi)  # a file without notes (or unreadable) is said as the file's problem, not a seed's
    return attention_arcs(net, tokenizer, seed_from_midi(tokenizer, midi).ids, choice)


def share_on_span(arc_map: ArcMap, start_s: float, end_s: float) -> float:
    """Mean over query notes of the attention their rows give to notes starting in [start_s, end_s)."""
    inside = (arc_map.notes.start >= start_s) & (arc_map.notes.start < end_s)
    return float(arc_map.weights[:, inside].sum(axis=1).mean())


def plot_arcs(arc_map: ArcMap, path: str | os.PathLike, top: int = 3, takeover: float | None = None,
              title: str | None = None) -> Path:
    """Piano roll with arcs from each query note back to its `top` most attended notes (PNG)."""
    from matplotlib import colormaps
    from matplotlib.patches import FancyArrowPatch

    notes, span = arc_map.notes, arc_map.span
    t0, t1 = span.start_s, max(notes.duration(), span.end_s, span.start_s + 1.0)
    fig, ax = new_figure(max(t1 - t0, 8.0))  # a short window still gets room for the title
    ax.set_xlim(t0, t1)
    ax.set_xlabel(f"time (s); {span.describe()}", fontsize="small")
    ax.add_collection(note_bars(notes), autolim=False)
    q = arc_map.queries
    ax.scatter(notes.start[q], notes.pitch[q], s=18, color="tab:orange", zorder=4, label="query notes")
    arcs = arc_map.top_arcs(top)
    heaviest = max((w for *_, w in arcs), default=1.0)
    cmap = colormaps["plasma_r"]
    for qi, ki, w in sorted(arcs, key=lambda a: a[2]):  # heaviest drawn last, on top
        strength = w / heaviest
        ax.add_patch(FancyArrowPatch((notes.start[qi], notes.pitch[qi]), (notes.start[ki], notes.pitch[ki]),
                                     connectionstyle="arc3,rad=0.35", arrowstyle="-|>", mutation_scale=7,
                                     linewidth=0.6 + 2.4 * strength, color=cmap(0.15 + 0.7 * strength),
                                     alpha=0.35 + 0.6 * strength, zorder=3))
    lo, hi = int(notes.pitch.min()), int(notes.pitch.max())
    ax.set_ylim(lo - 3, hi + 6)
    if takeover and takeover > t0:  # a seed that ends before the window leaves nothing to shade
        ax.axvspan(t0, min(takeover, t1), color="0.88", zorder=0, label="seed")
        ax.axvline(takeover, color="tab:red", linewidth=1.2)
    ax.legend(loc="upper left", fontsize="small")
    share = float(arc_map.on_notes.mean())
    ax.set_title(title or f"attention arcs: {arc_map.label}, top {top} per query note\n"
                          f"({share:.0%} of the query rows' attention is on {arc_map.note_token} tokens)",
                 fontsize="medium")
    return save_figure(fig, path)
