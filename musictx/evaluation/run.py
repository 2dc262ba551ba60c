"""The job behind ``musictx-evaluate``: a model on a prepared split, its likelihood and/or continuation,
motif or recall statistics (see `musictx.commands.evaluate` for the command line).

``mode=recall`` (`musictx.evaluation.recall`) measures whether the model uses what it has heard: the copy gain
of a repeated passage against the gap since it was heard, the NLL of in-window repeats, NLL vs context length;
it also writes ``recall.png``. ``mode=motif`` (`musictx.evaluation.motif`) continues seeds that hold a
repeating motif past the model's context and measures, window by window, how much of the motif comes back;
it also writes ``forgetting_curve.png``.

Options are `EvaluateOptions`, whose defaults are conf/evaluate.yaml's and nowhere else: the command gets
them from Hydra, scripts from `evaluation_options(**overrides)`, which reads the same file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from musictx.checkpoints.model_store import DEFAULT_MODEL, ModelLoadError, load_model
from musictx.evaluation.checks import (
    EvaluateError,
    check_common,
    check_song_options,
    check_task_model,
    no_songs_left,
    skipped_tsv,
)
from musictx.evaluation.continuation import continuation_options, evaluate_continuations, format_continuation_table
from musictx.evaluation.motif import evaluate_motif, format_motif_table, motif_sampling
from musictx.evaluation.motif_plots import plot_forgetting_curves, result_label
from musictx.evaluation.recall import evaluate_recall, format_recall_table, plot_recall
from musictx.evaluation.scorecard import format_scorecard, run_scorecard
from musictx.evaluation.scoring import score_pieces
from musictx.io.jsonio import write_json
from musictx.io.ngram_index import INDEX_FILE
from musictx.io.token_store import TokenArrays, folder_problem, load_manifest, load_tokenizer
from musictx.io.tokenizer import TokenizerMismatchError
from musictx.paths import conf_values
from musictx.safe_output import check_target, write_text

MODES = ("nll", "continuation", "token_continuation", "all", "motif", "recall", "infill", "accompany", "two_sample")
# evaluate.yaml's nested blocks; their keys are checked too
GROUPS = ("data", "nll", "scorecard", "continuation", "motif", "recall", "infill", "two_sample")


@dataclass
class EvaluateOptions:
    """The keys of conf/evaluate.yaml (see the comments there); built by `from_mapping`, which refuses
    unknown keys."""

    data: dict
    split: str
    mode: str
    batch_size: int
    device: str
    scorecard: dict
    continuation: dict
    motif: dict
    recall: dict
    infill: dict
    checkpoint: str | None = None
    context: int | None = None
    stride: int | None = None
    progress: bool = True
    output_dir: str | None = None
    overwrite: bool = False  # replace files output_dir holds already (the command checks; musictx.safe_output)
    two_sample: dict | None = None  # mode=two_sample (musictx.evaluation.two_sample_run)
    nll: dict | None = None  # mode=nll | all: max_songs

    @classmethod
    def from_mapping(cls, values: dict) -> EvaluateOptions:
        """Options of a plain dict of evaluate.yaml's keys (a composed config, without its ``hydra`` block);
        a key evaluate.yaml does not have raises EvaluateError (a ``+typo=...`` would otherwise be ignored)."""
        known = conf_values("evaluate")
        values = {k: v for k, v in values.items() if k != "hydra"}
        unknown = [k for k in values if k not in known]
        for group in GROUPS:
            if isinstance(values.get(group), dict):  # a sampling block also takes the hooks' group (checked later)
                sampling = "temperature" in known[group]
                unknown += [f"{group}.{k}" for k in values[group] if k not in known[group]
                            and not (sampling and k == "hooks")]
        if unknown:
            raise EvaluateError(f"unknown option(s) {sorted(unknown)}; evaluate.yaml has {sorted(known)}")
        return cls(**values)


def evaluation_options(**overrides) -> EvaluateOptions:
    """evaluate.yaml's settings with ``overrides`` merged in (nested dicts for its groups): what scripts
    that evaluate several models pass to `run_evaluation`."""
    # output_dir: the YAML's is Hydra's run dir
    return EvaluateOptions.from_mapping(conf_values("evaluate", GROUPS, **{"output_dir": None, **overrides}))


def check_options(opts: EvaluateOptions) -> None:
    """Refuse, before any work, an unknown mode and bad continuation settings. Raises EvaluateError."""
    if opts.mode not in MODES:
        raise EvaluateError(f"mode must be one of {', '.join(MODES)}, got {opts.mode!r}")
    check_common(vars(opts))
    try:
        if opts.mode in ("token_continuation", "all"):
            continuation_options(opts.continuation)
        if opts.mode == "motif":  # its seed and sampling, before the model loads (a huge seed failed after)
            motif_sampling(opts.motif)
        if opts.mode == "two_sample":
            from musictx.evaluation.two_sample_run import check_two_sample

            check_two_sample(opts.two_sample or {})
    except (ValueError, KeyError) as err:
        raise EvaluateError(str(err)) from None
    check_song_options(opts.mode, opts.scorecard, opts.infill, opts.two_sample)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def eval_context(opts: EvaluateOptions, net, meta: dict, prefix: str = "") -> int:
    """Tokens of context per window: the option, else the model's own, else its training length. A context or
    stride the windows cannot have is refused naming the option (``prefix``: training's ``evaluate.``)."""
    limit = getattr(net, "max_seq_len", None)
    if opts.context:
        if limit and int(opts.context) > limit:  # said before any scoring, naming the option
            raise EvaluateError(f"{prefix}context={opts.context}: the model takes at most {limit} tokens "
                                f"(max_seq_len); give {prefix}context={limit} or less, or leave it unset")
        context = int(opts.context)
    elif limit:
        context = int(net.max_seq_len)
    else:
        seq_len = (meta.get("hparams") or {}).get("seq_len") or (meta.get("data") or {}).get("seq_len")
        context = int(seq_len or 1024)
    if opts.stride and int(opts.stride) > context:  # a window would skip targets: scoring refused it in a raw line
        given = f"{prefix}context={opts.context}" if opts.context else "the model's own"
        raise EvaluateError(f"{prefix}stride={opts.stride}: more than the {context} tokens of each window's context "
                            f"({given}); give {prefix}stride={context} or less, or leave it unset ({context // 2})")
    return context


def check_training_evaluation(values: dict, net, seq_len: int, data_dir: str) -> None:
    """musictx-train's ``evaluate: {...}``: its options and its windows on the net just built, refused before the
    fit (a stride longer than the context was found only after the training, in a raw line)."""
    try:
        opts = evaluation_options(**values)
        opts.data["dir"] = data_dir  # as evaluate_after_training sets it: the training's data
        check_options(opts)
    except EvaluateError as err:
        raise EvaluateError(f"evaluate: {err}") from None
    eval_context(opts, net, {"hparams": {"seq_len": seq_len}}, prefix="evaluate.")


def evaluate_nll(net, tok, arrays: TokenArrays, opts: EvaluateOptions, context: int, device) -> dict:
    """The NLL of the split's pieces, or of its first ``nll.max_songs``; ``songs`` / ``songs_in_split`` and
    ``tokens_in_split`` say how much of the split the figures cover."""
    limit = (opts.nll or {}).get("max_songs")
    songs = min(int(limit), len(arrays)) if limit else len(arrays)
    totals = score_pieces(net, arrays.piece, songs, arrays.lengths, context=context, stride=opts.stride,
                          batch_size=opts.batch_size, pad_id=tok.pad_id, device=device, progress=opts.progress)
    in_split = int(np.maximum(np.asarray(arrays.lengths, dtype=np.int64) - 1, 0).sum())  # each piece's first: no target
    return {**totals.as_dict(), "context": context, "stride": opts.stride or max(context // 2, 1),
            "songs": songs, "songs_in_split": len(arrays), "tokens_in_split": in_split}


def nll_scope(n: dict, split: str) -> str | None:
    """The line that says how much of the split a limited ``mode=nll`` scored (None: all of it)."""
    if n.get("songs", n.get("songs_in_split")) == n.get("songs_in_split"):
        return None
    share = n["tokens"] / max(n["tokens_in_split"], 1)
    return (f"nll.max_songs={n['songs']}: NLL {n['nll']:.4f} nats/token over {n['tokens']:,} tokens, the first "
            f"{n['songs']} of the {n['songs_in_split']} songs of the {split} split ({share:.1%} of its "
            f"{n['tokens_in_split']:,} tokens): those songs' figures, not the split's (and no NLL per note)")


def run_evaluation(opts: EvaluateOptions) -> dict:
    """Load the model and the split, measure what ``opts.mode`` asks; the result as plain data."""
    check_options(opts)
    data_dir = Path(str(opts.data.get("dir")))
    if problem := folder_problem(data_dir):  # was "<dir>/tokenizer.json: missing", a file's name with a path inside it
        raise EvaluateError(f"data.dir={data_dir}: {problem} (give the folder musictx-prep wrote)")
    device = pick_device(opts.device)
    try:
        net, tok, meta = load_model(opts.checkpoint, map_location=device)
    except ModelLoadError as err:  # named as the option, as musictx-generate names it (the line named no option)
        given = str(opts.checkpoint or DEFAULT_MODEL)
        raise EvaluateError(f"checkpoint={err}" if str(err).startswith(f"{given}:") else
                            f"checkpoint={given}: {err}") from None
    check_task_model(opts.mode, opts.infill, tok, opts.checkpoint)
    data_dir = opts.data["dir"]
    if opts.mode in ("continuation", "infill", "accompany", "two_sample"):  # MIDI in, MIDI out: the songs read again
        return song_by_song(net, tok, meta, opts)
    try:
        tok.check_compatible(load_tokenizer(data_dir), what=f"data.dir={data_dir}")
    except TokenizerMismatchError as err:  # "here" is the model: named, with what to do
        raise EvaluateError(f"checkpoint={opts.checkpoint}: {err}; give data.dir a dataset prepared with the "
                            "model's tokenizer") from None
    arrays = TokenArrays(data_dir, opts.split)
    if len(arrays) == 0:
        raise EvaluateError(f"split {opts.split!r} of {data_dir} has no pieces")
    context = eval_context(opts, net, meta)
    result = _model_info(meta, net, data_dir, opts.split)
    if opts.mode in ("nll", "all"):
        result["nll"] = evaluate_nll(net, tok, arrays, opts, context, device)
        notes = load_manifest(data_dir).get("splits", {}).get(opts.split, {}).get("notes")
        # the manifest counts the whole split's notes: a limited run's tokens over them would be no figure at all
        if notes and result["nll"]["songs"] == len(arrays):  # two tokenizations compare per note, not per token
            result["nll"]["notes"] = notes
            result["nll"]["nll_per_note"] = result["nll"]["nll"] * result["nll"]["tokens"] / notes
    if opts.mode in ("token_continuation", "all"):
        result["continuation"] = evaluate_continuations(net, tok, arrays, opts.continuation, device)
    try:  # what the split cannot give (no piece long enough, too few pieces) is said as the data's problem
        if opts.mode == "motif":
            result["motif"] = evaluate_motif(net, tok, arrays, opts.motif, device)
        if opts.mode == "recall":
            result["recall"] = evaluate_recall(net, tok, arrays, opts.recall, context, device,
                                               progress=print if opts.progress else (lambda _: None))
    except ValueError as err:
        raise EvaluateError(f"mode={opts.mode}: {' '.join(str(err).split())}") from None
    return result


def _model_info(meta: dict, net, data_dir, split: str) -> dict:
    return {"checkpoint": meta["ref"], "model_path": meta["path"], "data_dir": str(data_dir), "split": split,
            "model": meta["model"].get("target"), "params": sum(p.numel() for p in net.parameters()),
            "global_step": meta.get("global_step")}


def split_songs(data_dir, split: str, mode: str = "continuation") -> list[Path]:
    """The source MIDI files of a prepared split: the prep's input folder joined with the names it listed (a
    file not found there is skipped by `each_song` with its reason)."""
    manifest = load_manifest(data_dir)
    root = manifest.get("input_dir")
    if not root or root == "None":
        raise EvaluateError(f"{data_dir}: its manifest names no input folder; mode={mode} reads the songs again")
    if not Path(root).is_dir():  # said once, not as every song skipped "no such file"
        relative = "" if Path(root).is_absolute() else f", a relative path read from the current folder {Path.cwd()}"
        raise EvaluateError(f"{Path(data_dir) / 'manifest.json'}: its input folder input_dir={root} is not there"
                            f"{relative}; mode={mode} reads the split's songs again from it (run from the folder "
                            "musictx-prep ran in, or set input_dir there to the songs' folder)")
    songs = [Path(root) / name for name in TokenArrays(data_dir, split).files]
    if not songs:
        raise EvaluateError(f"split {split!r} of {data_dir} has no songs")
    return songs


def song_by_song(net, tok, meta: dict, opts: EvaluateOptions) -> dict:
    """mode=continuation, infill or accompany: each song of the split (the first ``max_songs``) read again as
    MIDI; one that cannot be used is skipped with its reason (the result's ``skipped``, skipped.tsv)."""
    data_dir = opts.data["dir"]
    block = {"continuation": opts.scorecard, "two_sample": opts.two_sample}.get(opts.mode, opts.infill)
    songs = split_songs(data_dir, opts.split, opts.mode)
    progress = print if opts.progress else (lambda _: None)
    if opts.mode == "continuation":
        songs = songs[: block.get("max_songs") or None]
        card = run_scorecard(net, tok, songs, opts.scorecard, Path(data_dir) / INDEX_FILE, progress=progress)
        key = "scorecard"
    elif opts.mode == "two_sample":  # generated against real by classifiers
        from musictx.evaluation.two_sample_run import one_file_per_song, run_two_sample

        songs = one_file_per_song(songs)[: block.get("max_songs") or None]
        card, key = run_two_sample(net, tok, songs, opts.two_sample, progress=progress), "two_sample"
    else:
        songs = songs[: block.get("max_songs") or None]
        from musictx.evaluation.task_scorecard import run_task_scorecard

        card, key = run_task_scorecard(net, tok, songs, opts.infill, opts.mode, progress=progress), "task_scorecard"
    skipped = card.pop("skipped_reasons") if opts.mode == "two_sample" else card.pop("skipped")
    if not card["songs"]:
        raise no_songs_left(skipped, f"mode={opts.mode} on split {opts.split!r} of {data_dir}")
    return {**_model_info(meta, net, data_dir, opts.split), key: card, "skipped": skipped}


def format_table(result: dict) -> str:
    lines = [f"{result['model']} ({result['params']:,} params, step {result['global_step']}) on "
             f"{result['data_dir']} [{result['split']}]"]
    if "nll" in result:
        n = result["nll"]
        per_note = f"{n['nll_per_note']:.3f}" if "nll_per_note" in n else "-"
        lines += ["| tokens | NLL (nats/token) | NLL (nats/note) | bits/token | perplexity | accuracy |",
                  "|---|---|---|---|---|---|",
                  f"| {n['tokens']:,} | {n['nll']:.4f} | {per_note} | {n['bits_per_token']:.4f} | {n['ppl']:.3f} | "
                  f"{n['accuracy']:.4f} |"]
        lines += [scope] if (scope := nll_scope(n, result["split"])) else []
    if "scorecard" in result:
        lines.append(format_scorecard(result["scorecard"]))
    if "continuation" in result:
        lines.append(format_continuation_table(result["continuation"]))
    if "task_scorecard" in result:
        from musictx.evaluation.task_scorecard import format_task_scorecard

        lines.append(format_task_scorecard(result["task_scorecard"]))
    if "two_sample" in result:
        from musictx.evaluation.two_sample import format_two_sample

        lines.append(format_two_sample(result["two_sample"]))
    if "motif" in result:
        lines.append(format_motif_table(result["motif"]))
    if "recall" in result:
        lines.append(format_recall_table(result["recall"]))
    return "\n".join(lines)


def write_result(result: dict, output_dir: str | Path) -> Path:
    """metrics.json (NaN written as null: valid JSON), with the plots of its motif and recall parts."""
    out = check_target(output_dir, "output_dir")
    out.mkdir(parents=True, exist_ok=True)
    path = write_json(out / "metrics.json", result, what="metric")
    if result.get("skipped"):  # the songs a song-by-song mode could not use, with their reasons
        write_text(out / "skipped.tsv", skipped_tsv(result["skipped"]))
    if "motif" in result:  # the forgetting curve beside the numbers it plots
        plot_forgetting_curves([result["motif"]], out / "forgetting_curve.png", [result_label(result, "model")])
    if "recall" in result:
        plot_recall([result["recall"]], [result_label(result, "model")], out / "recall.png")
    return path


def evaluate(opts: EvaluateOptions) -> tuple[dict, Path]:
    """The whole ``musictx-evaluate`` job: measure, write metrics.json (and plots) in ``opts.output_dir``, print
    the table; returns the result and the JSON's path."""
    result = run_evaluation(opts)
    path = write_result(result, opts.output_dir)
    print(format_table(result))
    if result.get("skipped"):
        print(f"skipped {len(result['skipped'])} song(s) with their reasons: {path.with_name('skipped.tsv')}")
    print(f"\nwrote {path}")
    return result, path
