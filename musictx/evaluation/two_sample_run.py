"""``musictx-evaluate mode=two_sample``: the excerpts of the two-sample test, gathered and tested.

For each song of the split (one file per song: POP909's other arrangements under ``versions/`` are left out),
the model continues a seed of ``seed_seconds`` from ``seed_from`` (as the continuation scorecard does:
`musictx.evaluation.scorecard`, one sample) for ``length_seconds``. Three excerpts of the song's clock are
described by `musictx.listening.listen_features.excerpt_features`, the same call for each: the generated
continuation, the real next ``length_seconds`` and, as the control, the real ``length_seconds`` after those.
`musictx.evaluation.two_sample` then tests generated against real (with its null) and real against real.

For a metrical model the real music is the song as its tokenizer writes it (its ids decoded: every onset and end on
the grid), as the velocities are put on the tokenizer's levels: the model can write nothing finer, and the song's
own legato (a melody note held a few tens of ms into the next) reads as two notes at once there. The song as
it is is tested beside it, with the tokenizer's writing against it: what the grid alone costs
(docs/two-sample-2026-11.md, "The song as the tokenizer writes it").
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pretty_midi

from musictx.decoding import GenerateError, SamplingOptions, check_seed
from musictx.evaluation.checks import EvaluateError, each_song
from musictx.evaluation.two_sample import CVSettings, two_sample_test
from musictx.listening.listen_features import SongContext, excerpt_features
from musictx.listening.note_span import Span

# the features read against POP909's annotated chords (chord_midi.txt): a continuation cannot know the song's
# next chords (docs/two-sample-2026-11.md), so the headline AUC leaves them out; they are reported beside it
ANNOTATED = ("har_chord", "har_bass")


def check_two_sample(opts: dict) -> CVSettings:
    """The test's settings of evaluate.yaml's ``two_sample`` block; ValueError naming a bad one."""
    for key in ("folds", "repeats", "permutations", "top", "cv_seed"):
        value = opts[key]
        low = {"folds": 2, "repeats": 1}.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"two_sample.{key} must be a whole number >= {low}, got {value!r}")
    for key in ("seed_seconds", "length_seconds"):
        if not isinstance(opts[key], (int, float)) or not opts[key] > 0:
            raise ValueError(f"two_sample.{key} must be a number > 0, got {opts[key]!r}")
    exclude = opts.get("exclude") or []
    if not isinstance(exclude, (list, tuple)) or not all(isinstance(e, str) for e in exclude):
        raise ValueError(f"two_sample.exclude must be a list of feature name prefixes, got {exclude!r}")
    check_seed("two_sample.cv_seed", opts["cv_seed"])  # scikit-learn takes 32 bits, after the model ran
    try:
        SamplingOptions.from_mapping(opts).check_sampling()
    except GenerateError as err:
        raise ValueError(f"two_sample.{err}") from None
    return CVSettings(opts["folds"], opts["repeats"], opts["permutations"], opts["top"], opts["cv_seed"])


def kept_features(names: list[str], exclude: list[str]) -> list[str]:
    """``names`` without those starting with a prefix of ``exclude``; ValueError when none is left."""
    kept = [n for n in names if not n.startswith(tuple(exclude))]
    if not kept:
        raise ValueError(f"two_sample.exclude={list(exclude)} leaves no feature")
    return kept


def one_file_per_song(songs: list[Path]) -> list[Path]:
    """The songs without the other arrangements POP909 keeps beside each (``NNN/versions/NNN-vK.mid``)."""
    return [p for p in songs if Path(p).parent.name != "versions"]


def on_velocity_grid(tok, velocity: np.ndarray) -> np.ndarray:
    """Velocities as the tokenizer writes them back (a metrical tokenizer: its nearest Velocity value; the
    Performance tokenizer: its bin's value), so that the real music's finer dynamics are not a tell by
    themselves: the model could not have written them."""
    v = np.asarray(velocity, dtype=np.int64)
    if tok.kind == "performance":
        size, bins = tok.config.velocity_bin_size, tok.config.velocity_bins
        return 1 + (np.clip((v - 1) // size + 1, 1, bins) - 1) * size
    levels = np.unique(tok.numbers_of("Velocity"))
    levels = levels[levels > 0]
    if not len(levels):
        return v
    return levels[np.abs(v[:, None] - levels[None, :]).argmin(axis=1)]


def on_time_grid(tok, span: Span, origin: float) -> Span:
    """A Performance tokenizer's time grid (its ``time_step``, 10 ms) laid on ``span``'s note times from
    ``origin`` (where the continuation's clock starts), so that the real music's finer timing is not a tell by
    itself: the model writes every onset on that grid, and a real onset off it landed in the rhythm features'
    narrow gaps between sixteenths about half as often (docs/generation.md, "The token grid"). A metrical
    tokenizer's span is returned as it is."""
    if tok.kind != "performance":
        return span
    step = tok.config.time_step
    start = origin + np.round((span.start - origin) / step) * step
    end = np.maximum(origin + np.round((span.end - origin) / step) * step, start + step)
    return replace(span, start=start, end=end)


def song_excerpts(net, tok, path: Path, opts: dict, sampling: SamplingOptions) -> dict | None:
    """The three excerpts' features of one song; None when the song ends before the control's excerpt."""
    from musictx.evaluation.scorecard import continue_metrical, continue_performance, real_music

    pm = pretty_midi.PrettyMIDI(str(path))
    length = float(opts["length_seconds"])
    if pm.get_end_time() < opts["seed_from"] + opts["seed_seconds"] + 2 * length:
        return None
    go = continue_metrical if tok.kind != "performance" else continue_performance
    cont = go(net, tok, path, {**opts, "num_samples": 1}, sampling)
    t0 = cont.seed_end
    if pm.get_end_time() < t0 + 2 * length:
        return None
    as_is, song = real_music(pm, tok), SongContext.read(path, pm)  # a piano's with its pedal, as the model plays
    as_is.velocity = on_velocity_grid(tok, as_is.velocity)
    as_is = on_time_grid(tok, as_is, cont.seed_start)
    real = as_is if cont.written is None else cont.written
    row = {"song": str(path), "seed_start": cont.seed_start, "seed_end": t0,
           **excerpts(cont.samples[0], real, cont.seed_start, t0, length, song)}
    if cont.written is not None:  # beside it, the song as it is: what the tokenizer's grid alone costs
        row["as_is"] = excerpts(cont.samples[0], as_is, cont.seed_start, t0, length, song)
        row["as_is"]["written"] = row["real"]
    return row


def excerpts(generated: Span, real: Span, seed_start: float, t0: float, length: float, song: SongContext) -> dict:
    """The features of the generated continuation, the real next ``length`` s and the ``length`` s after, the
    real music's seed before ``t0`` the structure features' reference."""
    seed = real.window(seed_start, t0)
    return {"generated": excerpt_features(generated, t0, t0 + length, song, seed),
            "real": excerpt_features(real, t0, t0 + length, song, seed),
            "real_after": excerpt_features(real, t0 + length, t0 + 2 * length, song, seed)}


def run_two_sample(net, tok, songs: list[Path], opts: dict, progress=print) -> dict:
    """Generate, describe and test: the result as plain data (the per-song features included)."""
    settings = check_two_sample(opts)
    sampling = SamplingOptions.from_mapping(opts)
    bad: list[tuple[str, str]] = []
    t_start = time.perf_counter()

    def one(k: int, path: Path) -> dict:
        row = song_excerpts(net, tok, path, opts, replace(sampling, seed=sampling.seed + k))
        if not row:
            raise ValueError("too short for seed_from + seed_seconds + 2 x length_seconds")
        return row

    # a song too short or that cannot be read is skipped with its reason (musictx.evaluation.checks)
    rows = list(each_song(one_file_per_song([Path(p) for p in songs]), one, bad, progress, "two_sample"))
    skipped = [song for song, _ in bad]
    if len(rows) < 2:
        first = f"; the first skipped, {bad[0][0]}: {bad[0][1]}" if bad else ""
        raise EvaluateError(f"two_sample needs at least 2 songs long enough for seed_from + seed_seconds + "
                            f"2 x length_seconds; got {len(rows)}{first}")
    generated_s = time.perf_counter() - t_start
    names = kept_features(list(rows[0]["generated"]), opts.get("exclude") or [])
    headline = [n for n in names if not n.startswith(ANNOTATED)]  # what a listener hears, the song's chords unknown
    result = {**_tests(rows, headline, settings), "features": headline,
              "annotated_songs": annotated_songs(rows, [n for n in names if n not in headline])}
    if len(headline) < len(names):  # the annotated-chord features too: reported, no longer the headline
        result["with_annotated_chords"] = {**_tests(rows, names, settings), "features": names}
    if "as_is" in rows[0]:  # a metrical model: the headline's real music is the song as its tokenizer writes it
        as_is = [r["as_is"] for r in rows]
        result["as_is"] = {**_tests(as_is, headline, settings), "features": headline,
                           "written_vs_as_is": _pair(as_is, "written", "real", headline, settings)}
    return {**result, "settings": dict(opts), "songs": rows, "skipped": skipped, "skipped_reasons": bad,
            "seconds": {"generate_and_describe": generated_s, "test": time.perf_counter() - t_start - generated_s}}


def annotated_songs(rows: list[dict], annotated: list[str]) -> int:
    """How many songs' real music has a value for a feature read against the annotated chords: 0 where no song has
    a chord_midi.txt beside it (the piano's), where the test "with the annotated chords" only adds empty columns."""
    return sum(any(np.isfinite(r["real"][n]) for n in annotated) for r in rows)


def _tests(rows: list[dict], names: list[str], settings) -> dict:
    """The model against the real next seconds (with its null), and the real against the seconds after them."""
    return {"generated_vs_real": _pair(rows, "generated", "real", names, settings, with_null=True),
            "real_vs_real": _pair(rows, "real_after", "real", names, settings)}


def _pair(rows: list[dict], a: str, b: str, names: list[str], settings, with_null: bool = False) -> dict:
    """Excerpts ``a`` of every song against its excerpts ``b`` (`two_sample_test`, folds grouped by song)."""
    matrix = {side: np.array([[r[side][n] for n in names] for r in rows], dtype=float) for side in (a, b)}
    return two_sample_test(matrix[a], matrix[b], np.arange(len(rows)), names, settings, with_null=with_null)
