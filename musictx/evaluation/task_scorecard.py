"""The infill and accompaniment scorecards' runner and table (``musictx-evaluate mode=infill`` / ``mode=accompany``):
each song's card (`musictx.evaluation.infill_scorecard.infill_card`, `musictx.evaluation.accompany_card`), the
means over the songs and the markdown table. Apart from both cards so that neither imports the other."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from musictx.decoding import SamplingOptions
from musictx.evaluation.accompany_card import ACCOMPANY_MEASURES, accompany_card, accompany_head
from musictx.evaluation.checks import EvaluateError, each_song
from musictx.evaluation.infill_scorecard import INFILL_MEASURES, infill_card
from musictx.listed import counted

INFILL_MODE = "infill"  # mode=infill's scorecard; the other is accompany's


def run_task_scorecard(net, tok, songs: list[Path], opts: dict, task: str, progress=print) -> dict:
    """The infill or accompany scorecard over ``songs`` (the i-th uses sampling seed + i)."""
    sampling = SamplingOptions.from_mapping(opts)
    if task == INFILL_MODE and len(songs) < 2:  # the chance column would be the song itself
        raise EvaluateError(f"mode=infill needs 2 songs or more: its chance column pastes the same bars of another "
                            f"song; {len(songs)} given (infill.max_songs={opts.get('max_songs')})")
    skipped: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cards = {  # each mode's card of song k (an infill card also reads the next song, for chance)
            "infill": lambda k, path, one: infill_card(net, tok, path, Path(songs[(k + 1) % len(songs)]), opts, one),
            "accompany": lambda k, path, one: accompany_card(net, tok, path, Path(tmp), opts, one)}

        def card(k: int, path: Path) -> dict:
            return cards[task](k, path, replace(sampling, seed=sampling.seed + k))

        per_song = list(each_song(songs, card, skipped, progress, f"{task} scorecard"))  # a bad song: skipped
    means = {side: {key: _nan_mean([c[side].get(key, np.nan) for c in per_song])
                    for key in sorted({k for c in per_song for k in c[side]})} for side in ("model", "real", "chance")}
    return {"task": task, "songs": per_song, "means": means, "settings": dict(opts), "skipped": skipped}


def _nan_mean(values: list[float]) -> float:
    """np.nanmean without its RuntimeWarning on stderr when no song had the measure (a song without a repeated
    melody bar): NaN then, written as null and shown as "-"."""
    kept = [v for v in values if not np.isnan(v)]
    return float(np.mean(kept)) if kept else float("nan")


def format_task_scorecard(result: dict) -> str:
    m, s, n = result["means"], result["settings"], len(result["songs"])
    infill = result["task"] == INFILL_MODE
    measures = INFILL_MEASURES if infill else ACCOMPANY_MEASURES
    songs = counted(n, "song")
    head = (f"infill scorecard: {songs}, bars {s['first_bar']}-{s['first_bar'] + s['bars'] - 1}" if infill
            else accompany_head(songs, s))
    lines = [head, "| measure (mean) | model | real | chance |", "|---|---|---|---|"]
    for key, label in measures:
        row = [m[side].get(key) for side in ("model", "real", "chance")]
        lines.append(f"| {label} | " + " | ".join(_fmt(x) for x in row) + " |")
    if infill:
        gain = m["model"].get("nll_left", np.nan) - m["model"].get("nll_both", np.nan)
        net = m["model"].get("nll_left_net", np.nan) - m["model"].get("nll_both_net", np.nan)
        lines.append(f"NLL with both edges is {gain:.3f} nats/token lower than with the same left edge alone, as "
                     f"sampled (copy cache {copy_strength(s):g}); {net:.3f} with the network alone")
    return "\n".join(lines)


def copy_strength(settings: dict) -> float:
    """The copy cache's strength a scorecard's settings sampled with."""
    return SamplingOptions.from_mapping(settings).hooks.copy_cache.strength


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "-"
    return f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}"
