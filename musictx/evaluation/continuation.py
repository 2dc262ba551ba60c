"""Continuation metrics: does a model keep the seed's music going? (``musictx-evaluate mode=continuation``)

For N pieces of a split, each counted from its first note as `musictx.tasks.seeds.seed_from_midi` counts a seed
file (silence before it is left out): the first ``seed_seconds`` are the seed, the next ``length_seconds``
the real continuation. The model continues the seed; an unconditioned sample of the same length is the floor
(what the model does without the seed) and the real continuation the ceiling. Each is compared with the
seed and with the real continuation (`musictx.evaluation.metrics.compare`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from musictx.decoding import GenerateError, SamplingOptions, finite_number, raise_first, whole_number
from musictx.evaluation.metrics import compare, mean_metrics
from musictx.io.midi_io import Notes
from musictx.io.token_store import TokenArrays
from musictx.io.tokenizer import EventTokenizer
from musictx.tasks import Seed, cut_at_seconds, drop_leading_silence, sample_continuations, unconditional_seed

ROWS = (("continuation", "model continuation"), ("unconditioned", "unconditioned (floor)"),
        ("real", "real continuation (ceiling)"))


def pick_pieces(arrays: TokenArrays, tok: EventTokenizer, n: int, min_seconds: float) -> list[int]:
    """Up to ``n`` pieces long enough for seed + continuation, spread evenly over the split."""
    step = tok.config.time_step
    long_enough = [i for i in range(len(arrays)) if tok.split_time_shifts(piece_from_first_note(arrays, tok, i))[2]
                   * step >= min_seconds]
    if len(long_enough) <= n:
        return long_enough
    return [long_enough[int(k)] for k in np.linspace(0, len(long_enough) - 1, n).round()]


def piece_from_first_note(arrays: TokenArrays, tok: EventTokenizer, i: int) -> np.ndarray:
    """The ids of piece ``i`` without the silence before its first note."""
    return drop_leading_silence(tok, np.asarray(arrays.piece(i), dtype=np.int64))[0]


def notes_between(tok: EventTokenizer, ids: np.ndarray, start_s: float, end_s: float) -> Notes:
    """Notes with onsets in [start_s, end_s), shifted to start at 0 (seed context kept for decoding)."""
    n = tok.decode_notes(cut_at_seconds(tok, ids, end_s))
    keep = n.start >= start_s - 1e-9
    return Notes(n.start[keep] - start_s, n.end[keep] - start_s, n.pitch[keep], n.velocity[keep])


def _generated_notes(tok: EventTokenizer, seed: Seed, new_ids: np.ndarray) -> Notes:
    full = tok.decode_notes(np.concatenate([seed.ids, new_ids]))
    keep = full.start >= seed.seconds - 1e-9
    return Notes(full.start[keep] - seed.seconds, full.end[keep] - seed.seconds, full.pitch[keep], full.velocity[keep])


def grammar_breaks(tok: EventTokenizer, seed_ids: np.ndarray, new_ids: np.ndarray) -> dict[str, float]:
    """How often the new ids break the Performance grammar: NOTE_OFFs of pitches that are not sounding
    (share of the new ids) and notes still open when the sample ends (share of the new notes)."""
    lay = tok.layout
    sounding: set[int] = set()
    stray = struck = 0
    for k, i in enumerate(np.concatenate([seed_ids, new_ids]).tolist()):
        new = k >= len(seed_ids)
        if lay.note_on <= i < lay.note_off:
            sounding.add(i - lay.note_on)
            struck += new
        elif lay.note_off <= i < lay.time_shift:
            stray += new and (i - lay.note_off) not in sounding
            sounding.discard(i - lay.note_off)
        elif i == lay.eos:
            break
    return {"stray_note_off_share": stray / max(len(new_ids), 1), "open_at_end_share": len(sounding) / max(struck, 1)}


@dataclass
class ContinuationOptions:
    """evaluate.yaml's ``continuation:`` block: how many seeds, how long, and how to sample."""

    num_seeds: int
    seed_seconds: float
    length_seconds: float
    max_tokens: int | None  # new ids per continuation at most (a safety bound)
    sampling: SamplingOptions


def continuation_options(cfg: dict | ContinuationOptions) -> ContinuationOptions:
    """The settings of ``cfg`` (evaluate.yaml's ``continuation`` block as a dict; its sampling keys missing
    or unresolved take the `SamplingOptions` defaults), checked as musictx-generate checks its own: a bad
    value raises ValueError naming ``continuation.<option>``. A `ContinuationOptions` is returned as it is."""
    if isinstance(cfg, ContinuationOptions):
        return cfg
    num_seeds = cfg["num_seeds"]
    if isinstance(num_seeds, bool) or not isinstance(num_seeds, int) or num_seeds < 1:
        raise ValueError(f"continuation.num_seeds must be a whole number >= 1, got {num_seeds!r}")
    if cfg["seed_seconds"] is None or cfg["length_seconds"] is None:
        raise ValueError("continuation.seed_seconds and continuation.length_seconds must be numbers, not null")
    sampling = SamplingOptions.from_mapping(cfg)
    try:
        sampling.check_sampling()
        max_tokens = whole_number("max_tokens", cfg.get("max_tokens"))
        for name in ("seed_seconds", "length_seconds"):
            finite_number(name, cfg[name], nullable=False)
        raise_first([(max_tokens is not None and max_tokens < 1, f"max_tokens must be >= 1 or null, got {max_tokens}"),
                     (cfg["seed_seconds"] <= 0, f"seed_seconds must be > 0, got {cfg['seed_seconds']}"),
                     (cfg["length_seconds"] <= 0, f"length_seconds must be > 0, got {cfg['length_seconds']}")])
    except GenerateError as err:
        raise ValueError(f"continuation.{err}") from None
    return ContinuationOptions(num_seeds, cfg["seed_seconds"], cfg["length_seconds"], max_tokens, sampling)


def evaluate_continuations(net, tok: EventTokenizer, arrays: TokenArrays, cfg: dict | ContinuationOptions,
                           device=None) -> dict:
    """Mean metrics of model continuations, unconditioned samples and real continuations. ``device`` is not
    used (sampling runs where ``net`` is); it stays for callers that pass it."""
    opts = continuation_options(cfg)
    seed_s, length_s = opts.seed_seconds, opts.length_seconds
    pieces = pick_pieces(arrays, tok, opts.num_seeds, seed_s + length_s)
    if not pieces:
        raise ValueError(f"no piece in {arrays.dir} [{arrays.split}] lasts seed_seconds + length_seconds = "
                         f"{seed_s + length_s:g} s (from its first note)")
    rows = {key: [] for key, _ in ROWS}
    uncond = unconditional_seed(tok)
    for k, i in enumerate(pieces):
        ids = piece_from_first_note(arrays, tok, i)
        seed = Seed(cut_at_seconds(tok, ids, seed_s), seed_s, arrays.files[i] if arrays.files else None)
        seed_notes = notes_between(tok, ids, 0.0, seed_s)
        real = notes_between(tok, ids, seed_s, seed_s + length_s)
        sampling = replace(opts.sampling, seed=opts.sampling.seed + k)
        cont_ids, free_ids = (sample_continuations(net, tok, prompt, sampling, num_samples=1, length_seconds=length_s,
                                                   max_tokens=opts.max_tokens)[0] for prompt in (seed, uncond))
        real_ids = cut_at_seconds(tok, ids, seed_s + length_s)[len(seed.ids):]
        for key, notes, (prompt, new) in (("continuation", _generated_notes(tok, seed, cont_ids), (seed.ids, cont_ids)),
                                          ("unconditioned", _generated_notes(tok, uncond, free_ids),
                                           (uncond.ids, free_ids)),
                                          ("real", real, (seed.ids, real_ids))):
            rows[key].append({**compare(notes, seed_notes, real, seed_s), **grammar_breaks(tok, prompt, new)})
    return {"pieces": [arrays.files[i] if arrays.files else i for i in pieces], "seed_seconds": seed_s,
            "length_seconds": length_s, **{key: mean_metrics(r) for key, r in rows.items()}}


COLUMNS = (("pitch_class_tv_vs_seed", "PC dist. to seed"), ("ioi_tv_vs_seed", "IOI dist. to seed"),
           ("velocity_tv_vs_seed", "vel. dist. to seed"), ("pitch_class_tv_vs_real", "PC dist. to real"),
           ("ioi_tv_vs_real", "IOI dist. to real"), ("notes_per_s", "notes/s"), ("mean_duration_s", "mean dur. s"),
           ("motif_reuse", "motif reuse"), ("stray_note_off_share", "stray NOTE_OFF"),
           ("open_at_end_share", "open at end"), ("max_polyphony", "most at once"),
           ("onsets_on_seed_grid", "on seed grid"), ("seed_grid_chance", "grid chance"),
           ("longest_repeat_s", "longest loop s"))


def format_continuation_table(res: dict) -> str:
    head = "| " + " | ".join(["sample"] + [c for _, c in COLUMNS]) + " |"
    lines = [f"\nContinuations of {len(res['pieces'])} seeds ({res['seed_seconds']:g} s seed, "
             f"{res['length_seconds']:g} s continued; distances are total variation, lower = closer)", head,
             "|" + "---|" * (len(COLUMNS) + 1)]
    for key, label in ROWS:
        lines.append("| " + " | ".join([label] + [f"{res[key].get(k, float('nan')):.3f}" for k, _ in COLUMNS]) + " |")
    return "\n".join(lines)
