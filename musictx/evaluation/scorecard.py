"""The continuation scorecard (``musictx-evaluate mode=continuation``): each song's seed is continued by the
model and the continuation is compared with the song's real next seconds, figure by figure, beside the real
continuation's own figure and chance's. For the harmony it also gives what the seed itself tells of the real
continuation ("the seed": its pitch classes and key against the real's), the most a continuation that keeps the
seed's harmony can score there.

For each song of the split (the files prep listed, read again from the prep's input folder): a seed of
``seed_seconds`` from ``seed_from`` (cut at bar lines for a metrical model, from the first note at or after
``seed_from`` for a performance model), ``num_samples`` continuations of ``length_seconds``, and the real
music after the seed on the file's own clock. The measures are `musictx.listening.scorecard_metrics`'.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pretty_midi

from musictx.decoding import SamplingOptions
from musictx.evaluation.checks import each_song
from musictx.io.chord_labels import Chords
from musictx.io.ngram_index import load_index, position_ngrams, share_in_index
from musictx.io.score_io import score_to_pretty_midi
from musictx.io.score_prep import beats_file_of, chord_file_of
from musictx.listed import counted
from musictx.listening import scorecard_metrics as sm
from musictx.listening.note_span import Span

MEASURES = (  # (key, label, has a chance figure)
    ("grid_share", "onsets on the song's eighth grid (+-30 ms)", True),
    ("motif_transposed", "top-line interval 4-grams found in the seed", False),
    ("motif_exact", "top-line pitch 5-grams found in the seed", False),
    ("lead_motif", "melody track's interval 4-grams found in the seed's", False),
    ("verbatim_longest", "longest run copied from the seed (notes)", False),
    ("verbatim_share", "new notes in copies of >= 8 seed notes", False),
    ("pc_correlation", "pitch-class correlation with the real continuation", False),
    ("same_key", "same key as the real continuation", False),
    ("seed_pc_correlation", "pitch-class correlation with the seed", False),
    ("density_ratio", "notes per second / the real's", False),
    ("duration_ratio", "mean duration / the real's", False),
    ("polyphony_ratio", "notes at once / the real's", False),
    ("downbeat_bass", "downbeats struck with a low note (<= G3)", False),
    ("low_register", "time a low note (<= G3) sounds / the real's", False),
    ("held_at_cap", "notes held >= 4.9 s per 30 s", False),
    ("longest_loop", "longest loop (repeats in a row of a >= 1 s pattern)", False),
    ("tracks_kept", "seed tracks continued as their own track", False),
    ("memorized", "new-note 8-grams (pitch, position) found in the train split", False),
)


@dataclass
class Continued:
    """One song continued: the seed and the new music of each sample, on the file's own clock."""

    seed_start: float
    seed_end: float
    samples: list[Span]  # seed + continuation of each sample
    new_ids: list[np.ndarray] | None = None  # metrical models: the new ids (memorization)
    real_new_ids: np.ndarray | None = None  # metrical models: the real continuation's ids, same bars
    # metrical models: the song from the seed on as the tokenizer writes it (the seed, the real bars after it and as
    # many again), on the samples' clock: every onset and end on its grid, as the model writes them
    written: Span | None = None


def span_of_score(score, offset: float) -> Span:
    span = Span.from_pretty_midi(score_to_pretty_midi(score))
    return span.shifted(offset)


def lead_sheet_of(path: Path) -> Chords:
    """The song's annotated chords (POP909's ``chord_midi.txt`` beside it) as a lead sheet (``chords=``)."""
    found = chord_file_of(path)
    if found is None:
        raise ValueError(f"{path}: no chord_midi.txt beside it, which scorecard.lead_sheet=true gives as chords=")
    return Chords.read(found, strict=False)


def check_real_room(path: Path, seed_end: float, seconds: float) -> None:
    """ValueError (the song skipped with it) when the song ends less than ``seconds`` after its seed: its real
    continuation would be cut short and every figure set against it (notes a second, low register, grid) read
    against silence; a 49 s performance, seed ending at 35 s, had 14 s of real music against 30 s of the model's."""
    end = pretty_midi.PrettyMIDI(str(path)).get_end_time()
    if end < seed_end + seconds:
        raise ValueError(f"its music ends {end - seed_end:.1f} s after the seed (which ends at {seed_end:.1f} s), "
                         f"less than length_seconds={seconds:g}: the real continuation would be cut short; "
                         "lower seed_from or length_seconds")


def continue_metrical(net, tok, path: Path, opts: dict, sampling: SamplingOptions) -> Continued:
    from musictx.tasks import bars_for, continuation_score, metrical_seed, sample_bars

    seed = metrical_seed(tok, path, opts["seed_seconds"], opts["seed_from"])
    check_real_room(path, seed.origin_seconds + seed.seconds, opts["length_seconds"])
    bars = bars_for(seed, opts["length_seconds"], None)
    chords = lead_sheet_of(path) if opts.get("lead_sheet") else None
    pieces = sample_bars(net, tok, seed, sampling, num_samples=opts["num_samples"], bars=bars, chords=chords)
    spans = [span_of_score(continuation_score(tok, seed, ids), seed.origin_seconds) for ids in pieces]
    real = seed.bars_after(tok.bar_id, bars)  # the song's ids as the seed's were made (a chord model: its chords)
    written = span_of_score(continuation_score(tok, seed, seed.bars_after(tok.bar_id, 2 * bars)), seed.origin_seconds)
    return Continued(seed.origin_seconds, seed.origin_seconds + seed.seconds, spans, pieces, real, written)


def continue_performance(net, tok, path: Path, opts: dict, sampling: SamplingOptions) -> Continued:
    from musictx.tasks import piece_notes, sample_continuations, seed_from_midi

    seed = seed_from_midi(tok, path, opts["seed_seconds"], opts["seed_from"])
    check_real_room(path, seed.silence_dropped + seed.seconds, opts["length_seconds"])
    pieces = sample_continuations(net, tok, seed, sampling, num_samples=opts["num_samples"],
                                  length_seconds=opts["length_seconds"], max_tokens=None)
    start = seed.silence_dropped
    spans = []
    for ids in pieces:
        notes = piece_notes(tok, seed, ids)
        spans.append(Span(notes.start + start, notes.end + start, notes.pitch, notes.velocity,
                          np.zeros(len(notes), dtype=np.int64), [merged_name(path)]))
    return Continued(start, start + seed.seconds, spans)


def merged_name(path: Path) -> str:
    """The track a Performance model writes, named as the scorecard counts it: the seed's own track when it
    has one (kept), else "merged" (its tracks are one stream: none is kept)."""
    names = Span.from_pretty_midi(pretty_midi.PrettyMIDI(str(path))).track_names
    return names[0] if len(names) == 1 else "merged"


def song_grid(path: Path, pm: pretty_midi.PrettyMIDI) -> np.ndarray:
    """The eighth-note grid of the song's beats: POP909's annotated beats, else the file's tempo map's."""
    beats_path = beats_file_of(path)
    beats = np.loadtxt(beats_path, ndmin=2)[:, 0] if beats_path else pm.get_beats()
    return sm.eighth_grid(np.asarray(beats, dtype=np.float64))


def song_downbeats(path: Path, pm: pretty_midi.PrettyMIDI) -> np.ndarray:
    """The song's bar lines (s): POP909's annotated downbeats, else the file's tempo map and meter's."""
    beats_path = beats_file_of(path)
    if beats_path:
        rows = np.loadtxt(beats_path, ndmin=2)
        return rows[rows[:, 2] == 1, 0]
    return np.asarray(pm.get_downbeats(), dtype=np.float64)


def measure(new: Span, seed: Span, real: Span, grid: np.ndarray, t0: float, seconds: float,
            downbeats: np.ndarray) -> dict:
    """Every figure of one continuation ``new`` (onsets in [t0, t0 + seconds)) against ``seed`` and ``real``;
    ``grid``: the song's eighth notes, ``downbeats``: its bar lines (s)."""
    new_top, seed_top = sm.top_line(new)[1], sm.top_line(seed)[1]
    reuse = sm.motif_reuse(new_top, seed_top)
    lead = sm.lead_track(seed)
    lead_reuse = sm.motif_reuse(sm.top_line(sm.track_named(new, lead))[1], sm.top_line(sm.track_named(seed, lead))[1]) \
        if lead else {"transposed": float("nan")}
    copy = sm.verbatim_copying(new, seed)
    real_density, real_dur, real_poly = sm.density(real, seconds), sm.mean_duration(real), sm.mean_polyphony(real)
    kept = sm.tracks_kept(seed, new)
    return {
        "grid_share": sm.grid_share(new.start, grid),
        "motif_transposed": reuse["transposed"], "motif_exact": reuse["exact"],
        "lead_motif": lead_reuse["transposed"],
        "verbatim_longest": float(copy["longest"]), "verbatim_share": copy["share_in_copies"],
        "pc_correlation": sm.pc_correlation(new, real), "same_key": float(sm.same_key(new, real)),
        "seed_pc_correlation": sm.pc_correlation(new, seed),
        "density_ratio": _ratio(sm.density(new, seconds), real_density),
        "duration_ratio": _ratio(sm.mean_duration(new), real_dur),
        "polyphony_ratio": _ratio(sm.mean_polyphony(new), real_poly),
        "downbeat_bass": sm.downbeat_bass(new, downbeats, t0, t0 + seconds),
        "low_register": _ratio(sm.low_register_share(new, t0, t0 + seconds),
                               sm.low_register_share(real, t0, t0 + seconds)),
        "held_at_cap": sm.held_at_cap(new, seconds=seconds),
        "longest_loop": float(sm.longest_loop(new)["repeats"]),
        "tracks_kept": kept["kept"] / max(kept["seed_tracks"], 1),
    }


def _mean(values) -> float:
    """The mean of the finite values; nan when there are none (a song without a melody track has no melody
    figure), without numpy's warning."""
    finite = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def _ratio(a: float, b: float) -> float:
    return float(a / b) if b and np.isfinite(a) and np.isfinite(b) else float("nan")


def sounds_with_pedal(tok) -> bool:
    """Whether the notes a model of ``tok`` writes sound with the pedal: a Performance tokenizer folds it into
    the notes' lengths (``sustain``) or plays it from its own ids (``pedal_events``), so the real music is
    measured as it sounds too, not by its keys' lengths (those made the piano's notes look 2.6x too long)."""
    return tok.kind == "performance" and bool(tok.config.sustain or tok.config.pedal_events)


def real_music(pm: pretty_midi.PrettyMIDI, tok) -> Span:
    """A song's notes as a model of ``tok`` would write them, to be compared with its continuations: held on by
    the sustain pedal for a Performance model (`sounds_with_pedal`), as the file's keys say for a metrical one."""
    return Span.from_pretty_midi(pm, sustain=sounds_with_pedal(tok))


def score_song(path: Path, cont: Continued, seconds: float, index: np.ndarray | None, tok) -> dict:
    """{"model": mean figures over the samples, "real": the real continuation's, "chance": the grid's}."""
    pm = pretty_midi.PrettyMIDI(str(path))
    real_all = real_music(pm, tok)
    grid, downbeats = song_grid(path, pm), song_downbeats(path, pm)
    t0, t1 = cont.seed_end, cont.seed_end + seconds
    seed, real = real_all.window(cont.seed_start, t0), real_all.window(t0, t1)
    rows = [measure(s.window(t0, t1), seed, real, grid, t0, seconds, downbeats) for s in cont.samples]
    model = {k: _mean([r[k] for r in rows]) for k in rows[0]}
    real_row = measure(real, seed, real, grid, t0, seconds, downbeats)
    if index is not None and cont.new_ids is not None:
        model["memorized"] = _mean([share_in_index(position_ngrams(*tok.pitch_positions(ids)), index)
                                    for ids in cont.new_ids])
        real_row["memorized"] = share_in_index(position_ngrams(*tok.pitch_positions(cont.real_new_ids)), index)
    return {"song": str(path), "model": model, "real": real_row,
            "chance": {"grid_share": sm.chance_grid_share(grid, t0, t1)},
            "seed": {"pc_correlation": sm.pc_correlation(seed, real), "same_key": float(sm.same_key(seed, real))}}


def run_scorecard(net, tok, songs: list[Path], opts: dict, index_path: Path | None = None,
                  progress=print) -> dict:
    """The scorecard over ``songs``: per song and the means, as plain data."""
    sampling = SamplingOptions.from_mapping(opts)
    index = load_index(index_path) if index_path and Path(index_path).exists() else None
    go = continue_metrical if tok.kind != "performance" else continue_performance
    skipped: list[tuple[str, str]] = []

    def one(k: int, path: Path) -> dict:
        cont = go(net, tok, path, opts, replace(sampling, seed=sampling.seed + k))
        return score_song(path, cont, opts["length_seconds"], index, tok)

    per_song = list(each_song(songs, one, skipped, progress, "scorecard"))  # a bad song: skipped, with its reason
    means = {side: _mean_over(per_song, side) for side in ("model", "real", "chance", "seed")}
    return {"songs": per_song, "means": means, "settings": dict(opts), "memorization_index": str(index_path)
            if index is not None else None, "skipped": skipped}


def _mean_over(per_song: list[dict], side: str) -> dict:
    keys = {k for s in per_song for k in s[side]}
    return {k: _mean([s[side].get(k, np.nan) for s in per_song]) for k in sorted(keys)}


def format_scorecard(result: dict) -> str:
    m = result["means"]
    songs = counted(len(result["songs"]), "song")
    lines = [f"continuation scorecard: {songs}, {result['settings']['seed_seconds']:g} s seed "
             f"from {result['settings']['seed_from']:g} s, {result['settings']['length_seconds']:g} s new, "
             f"{counted(result['settings']['num_samples'], 'sample')} each",
             "| measure (mean) | model | real continuation | chance | the seed |", "|---|---|---|---|---|"]
    for key, label, _ in MEASURES:
        if key not in m["model"]:
            continue
        chance, seed = m["chance"].get(key), m["seed"].get(key)
        lines.append(f"| {label} | {_fmt(m['model'][key])} | {_fmt(m['real'].get(key))} | "
                     f"{_fmt(chance) if chance is not None else '-'} | {_fmt(seed) if seed is not None else '-'} |")
    return "\n".join(lines)


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "-"
    return f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}"
