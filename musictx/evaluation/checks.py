"""The checks of ``musictx-evaluate``'s song-by-song modes (continuation, infill, accompany), and how one bad
song is skipped there instead of ending the run.

- `check_song_options` refuses, before any model is loaded, an option of the ``scorecard:``, ``infill:`` or
  ``two_sample:`` block that could only be a typo (``infill.bars=0``, ``infill.max_songs=0``, ``infill.seconds=-5``,
  ``infill.first_bar=100000``, ``infill.accompany_scheme=foo``), naming the option and its range;
- `check_task_model` refuses a model that cannot do ``mode=infill`` / ``accompany`` (the piano model, a
  metrical model never fine-tuned on the infill format) or a mode of `PERFORMANCE_MODES` (a metrical model),
  naming the checkpoint, before any song is read;
- `each_song` runs one song at a time: a song that cannot be used (a truncated file, a missing chord or beat
  file, no melody) is one line ``skipped <song>: <reason>`` and a row of ``skipped.tsv``; the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from musictx.ctrl_c import remembered_ctrl_c
from musictx.decoding import GenerateError, SamplingOptions
from musictx.generation import device_problem
from musictx.io.token_store import SPLITS
from musictx.tasks import ACCOMPANY_CONTEXTS, BOUNDS
from musictx.user_error import UserError

ACCOMPANY_FROM = ("melody", "song", "first_bar")
# the modes that read a split's ids as Performance events (notes, velocities, time shifts) and sample them so
PERFORMANCE_MODES = ("token_continuation", "all", "motif")
ACCOMPANY_SCHEMES = ("lead", "infill")


class EvaluateError(UserError):
    """A bad option of ``musictx-evaluate`` (or a model, a split it cannot use); the message names it."""


def _whole(block: str, opts: dict, key: str, low: int, high: int, nullable: bool = False) -> None:
    value = opts.get(key)
    if value is None and nullable:
        return
    if isinstance(value, float) and value.is_integer():
        value = opts[key] = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        null = (" or null (every song)" if key == "max_songs" else " or null") if nullable else ""
        name = f"{block}.{key}" if block else key
        raise EvaluateError(f"{name} must be a whole number from {low} to {high}{null}, got {value!r}")


def _seconds(block: str, opts: dict, key: str, high: float) -> None:
    value = opts.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= high:
        raise EvaluateError(f"{block}.{key} must be a number of seconds above 0 and at most {high:g}, "
                              f"got {value!r}")


def _choice(block: str, opts: dict, key: str, choices: tuple[str, ...]) -> None:
    if opts.get(key) not in choices:
        raise EvaluateError(f"{block}.{key} must be one of {', '.join(choices)}, got {opts.get(key)!r}")


def _seed_from(block: str, opts: dict) -> None:
    value = opts.get("seed_from")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= BOUNDS.seed_seconds:
        raise EvaluateError(f"{block}.seed_from must be a number of seconds from 0 to {BOUNDS.seed_seconds:g}, "
                            f"got {value!r}")


def check_song_options(mode: str, scorecard: dict, infill: dict, two_sample: dict | None = None) -> None:
    """EvaluateError naming the first bad option of the block ``mode`` reads (nothing for other modes)."""
    if mode == "two_sample":  # the songs it reads; its test's own keys: two_sample_run.check_two_sample
        # max_songs=0 had read every song (0 taken as "no limit"), -1 all but the last
        _whole("two_sample", two_sample or {}, "max_songs", 1, 1_000_000, nullable=True)
        _seed_from("two_sample", two_sample or {})
        return
    if mode == "continuation":
        block, opts = "scorecard", scorecard
        _whole(block, opts, "max_songs", 1, 1_000_000, nullable=True)
        _seconds(block, opts, "seed_seconds", BOUNDS.seed_seconds)
        _seed_from(block, opts)
        _seconds(block, opts, "length_seconds", BOUNDS.length_seconds)
        _whole(block, opts, "num_samples", 1, BOUNDS.num_samples)
    elif mode in ("infill", "accompany"):
        block, opts = "infill", infill
        _whole(block, opts, "max_songs", 1, 1_000_000, nullable=True)
        _whole(block, opts, "first_bar", 1, BOUNDS.length_bars)
        _whole(block, opts, "bars", 1, BOUNDS.length_bars)
        _seconds(block, opts, "seconds", BOUNDS.length_seconds)
        _choice(block, opts, "accompany_from", ACCOMPANY_FROM)
        _choice(block, opts, "accompany_scheme", ACCOMPANY_SCHEMES)
        if opts.get("accompany_context") is not None:  # null: the task's own default
            _choice(block, opts, "accompany_context", ACCOMPANY_CONTEXTS)
            if opts.get("accompany_scheme") == "infill":  # its prompt is the infill format's own
                raise EvaluateError("infill.accompany_context is for infill.accompany_scheme=lead")
        for key in ("accompany_chords", "accompany_song"):
            if not isinstance(opts.get(key, False), bool):
                raise EvaluateError(f"infill.{key} must be true or false, got {opts.get(key)!r}")
    else:
        return
    try:
        SamplingOptions.from_mapping(opts).check_sampling()
    except GenerateError as err:
        raise EvaluateError(f"{block}.{err}") from None


def _whole_list(block: str, opts: dict, key: str, low: int) -> None:
    values = opts.get(key)
    if not isinstance(values, list) or not values or any(
            isinstance(v, bool) or not isinstance(v, int) or v < low for v in values):
        raise EvaluateError(f"{block}.{key} must be a list of whole numbers >= {low}, got {values!r}")


def check_common(values: dict) -> None:
    """EvaluateError naming the first bad top-level option, the ``nll:``, ``motif:`` or ``recall:`` block's."""
    top = {k: values.get(k) for k in ("batch_size", "context", "stride")}
    _whole("", {"batch_size": top["batch_size"]}, "batch_size", 1, 4096)
    for key in ("context", "stride"):
        _whole("", top, key, 1, 1_000_000, nullable=True)
    device = str(values.get("device"))
    problem = None if device == "auto" else device_problem(device)
    if problem:
        raise EvaluateError(f"device={device}: {problem.replace('use cpu,', 'use auto, cpu,')}")
    if values.get("split") not in SPLITS:
        raise EvaluateError(f"split must be one of {', '.join(SPLITS)}, got {values.get('split')!r}")
    mode = values.get("mode")
    if mode in ("nll", "all"):  # 0 or -1 would be read as no limit, or all but the last songs
        _whole("nll", values.get("nll") or {}, "max_songs", 1, 1_000_000, nullable=True)
    if mode == "motif":
        m = values["motif"]
        for key, high in (("num_seeds", 10_000), ("ngram", 64), ("max_tokens", BOUNDS.max_tokens)):
            _whole("motif", m, key, 1, high)
        _whole("motif", m, "max_per_group", 1, 1_000_000, nullable=True)
        for key, high in (("seed_seconds", BOUNDS.seed_seconds), ("length_seconds", BOUNDS.length_seconds),
                          ("window_seconds", BOUNDS.length_seconds)):
            _seconds("motif", m, key, high)
        if m.get("stride_seconds") is not None:
            _seconds("motif", m, "stride_seconds", BOUNDS.seed_seconds)
        if isinstance(m.get("min_score"), bool) or not isinstance(m.get("min_score"), (int, float)) \
                or not 0 <= m["min_score"] <= 1:
            raise EvaluateError(f"motif.min_score must be in [0, 1], got {m.get('min_score')!r}")
    if mode == "recall":
        r = values["recall"]
        _whole_list("recall", r, "gaps", 0)
        _whole_list("recall", r, "contexts", 1)
        for key in ("num_probes", "passage", "ngram", "repeat_windows", "targets", "num_stretches"):
            _whole("recall", r, key, 1, 1_000_000)
        _whole("recall", r, "skip", 0, 1_000_000)
        _whole("recall", r, "transpose", -11, 11)


def check_task_model(mode: str, infill: dict, tok, checkpoint) -> None:
    """EvaluateError when the loaded model cannot do ``mode`` (infill / accompany need a metrical model, the
    `PERFORMANCE_MODES` a Performance-event one), naming the checkpoint."""
    from musictx.io.infill_format import InfillIds
    from musictx.io.tokenizers import is_metrical

    name = f"checkpoint={checkpoint or 'piano'}"
    if mode in PERFORMANCE_MODES and is_metrical(tok):
        also = " and mode=nll for its likelihood" if mode == "all" else ""
        raise EvaluateError(f"{name}: mode={mode} measures Performance-event models (checkpoint=piano, or one "
                            "trained on data prepared with tokenizer=performance) and this is a metrical (REMI) "
                            f"model; use mode=continuation for its continuations{also}")
    if mode not in ("infill", "accompany"):
        return
    if not is_metrical(tok):
        raise EvaluateError(f"{name}: mode={mode} needs a metrical (REMI) model that knows the infill format "
                              "(checkpoint=pop_infill)")
    if mode == "infill" or infill.get("accompany_scheme") == "infill":
        try:
            InfillIds.of(tok)
        except ValueError as err:
            what = "mode=infill" if mode == "infill" else "infill.accompany_scheme=infill"
            raise EvaluateError(f"{name}: {what} needs a model fine-tuned on the infill format "
                                  f"(checkpoint=pop_infill): {err}") from None


def each_song(songs: list, work: Callable[[int, Path], dict], skipped: list[tuple[str, str]],
              progress: Callable[[str], None], what: str) -> Iterator[dict]:
    """``work(k, song)`` for each song, yielded; a song it fails on is added to ``skipped`` as (song, reason)
    and said in one line, and the next one goes on. Ctrl-C is not caught, and one that Python swallowed (in a
    finalizer, between two songs) still stops the run before the next song."""
    with remembered_ctrl_c() as pressed:
        for k, path in enumerate(songs):
            if pressed():
                raise KeyboardInterrupt
            try:
                if not Path(path).is_file():
                    raise EvaluateError("no such file (the split lists it; the prep's input folder has no file there)")
                card = work(k, Path(path))
            except Exception as err:  # noqa: BLE001 - one bad song never ends a run over many
                reason = " ".join(str(err).split()) or type(err).__name__
                skipped.append((str(path), reason))
                progress(f"{what}: {k + 1}/{len(songs)} skipped {path}: {reason}")
                continue
            progress(f"{what}: {k + 1}/{len(songs)} {Path(path).name}")
            yield card


def no_songs_left(skipped: list[tuple[str, str]], what: str) -> EvaluateError:
    """The error of a run whose every song was skipped: the first one's reason."""
    first = f"; the first, {skipped[0][0]}: {skipped[0][1]}" if skipped else ""
    return EvaluateError(f"{what}: no song could be used ({len(skipped)} skipped{first})")


def skipped_tsv(skipped: list[tuple[str, str]]) -> str:
    """``skipped.tsv``'s text: a header, then one ``song<TAB>reason`` row per skipped song."""
    rows = ["song\treason"] + [f"{song}\t{' '.join(reason.split())}" for song, reason in skipped]
    return "\n".join(rows) + "\n"
