"""Evaluate a model on a prepared split: likelihood and/or continuation statistics.

    musictx-evaluate data.dir=data/piano split=test             # the shipped piano model
    musictx-evaluate checkpoint=outputs/.../last.ckpt data.dir=data/maestro split=test
    musictx-evaluate checkpoint=... mode=continuation continuation.num_seeds=16
    musictx-evaluate checkpoint=... mode=all output_dir=out/eval
    musictx-evaluate checkpoint=... mode=motif motif.num_seeds=16 motif.length_seconds=60   # forgetting curve
    musictx-evaluate checkpoint=... mode=motif motif.seed_midi=my_motif.mid                 # your own seed
    musictx-evaluate checkpoint=... mode=recall data.dir=data/piano split=test           # copy gain, context

``mode=recall`` (`musictx.evaluation.recall`) measures whether the model uses what it has heard: the copy gain of a
repeated passage against the gap since it was heard, the NLL of in-window repeats, NLL vs context length;
it also writes ``recall.png``.

``mode=motif`` (`musictx.evaluation.motif`) continues seeds that hold a repeating motif past the model's context and
measures, window by window, how much of the motif comes back; it also writes ``forgetting_curve.png``.

Writes ``metrics.json`` in ``output_dir`` and prints a table. Works for every model musictx-train makes.
"""

from __future__ import annotations

from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from musictx.commands.config_help import with_key_help
from musictx.evaluation.scoring import score_pieces
from musictx.io.jsonio import write_json
from musictx.io.token_store import TokenArrays, load_tokenizer
from musictx.paths import CONF_DIR

MODES = ("nll", "continuation", "all", "motif", "recall")
NESTED = ("data", "continuation", "motif", "recall")  # groups of evaluate.yaml whose keys are checked too


class EvaluateError(ValueError):
    """A bad option; the message names it."""


def check_config(cfg: DictConfig) -> None:
    """Refuse, before any work, keys that evaluate.yaml does not have (a ``+typo=...`` would otherwise be
    ignored silently), an unknown mode and bad continuation settings. Raises EvaluateError."""
    known = OmegaConf.load(f"{CONF_DIR}/evaluate.yaml")
    unknown = [str(k) for k in cfg if k not in known and k != "hydra"]
    for group in NESTED:
        if isinstance(cfg.get(group), DictConfig) and isinstance(known.get(group), DictConfig):
            unknown += [f"{group}.{k}" for k in cfg[group] if k not in known[group]]
    if unknown:
        raise EvaluateError(f"unknown option(s) {sorted(unknown)}; evaluate.yaml has "
                            f"{sorted(str(k) for k in known if k != 'hydra')}")
    if cfg.mode not in MODES:
        raise EvaluateError(f"mode must be one of {MODES}, got {cfg.mode!r}")
    if cfg.mode in ("continuation", "all"):
        from musictx.evaluation.continuation import continuation_options

        try:
            continuation_options(cfg.continuation)
        except ValueError as err:
            raise EvaluateError(str(err)) from None


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def eval_context(cfg: DictConfig, net, meta: dict) -> int:
    """Tokens of context per window: the option, else the model's own, else its training length."""
    if cfg.get("context"):
        return int(cfg.context)
    if getattr(net, "max_seq_len", None):
        return int(net.max_seq_len)
    seq_len = (meta.get("hparams") or {}).get("seq_len") or (meta.get("data") or {}).get("seq_len")
    return int(seq_len or 1024)


def evaluate_nll(net, tok, arrays: TokenArrays, cfg: DictConfig, context: int, device) -> dict:
    totals = score_pieces(net, arrays.piece, len(arrays), arrays.lengths, context=context,
                          stride=cfg.get("stride"), batch_size=cfg.batch_size, pad_id=tok.pad_id, device=device,
                          progress=cfg.get("progress", True))
    return {**totals.as_dict(), "context": context, "stride": cfg.get("stride") or max(context // 2, 1)}


def evaluation_config(**overrides) -> DictConfig:
    """evaluate.yaml's settings with ``overrides`` merged in (nested dicts for its groups) and without its
    Hydra block: the config `run_evaluation` takes, for scripts that evaluate several models."""
    cfg = OmegaConf.load(f"{CONF_DIR}/evaluate.yaml")
    cfg.pop("hydra")
    cfg.merge_with({"output_dir": "unused", **overrides})
    return cfg


def run_evaluation(cfg: DictConfig) -> dict:
    """The whole job as a function (tests and the compare experiment call it)."""
    from musictx.checkpoints.model_store import load_model

    check_config(cfg)
    device = pick_device(cfg.device)
    net, tok, meta = load_model(cfg.get("checkpoint"), map_location=device)
    data_tok = load_tokenizer(cfg.data.dir)
    tok.check_compatible(data_tok, what=f"data {cfg.data.dir}")
    arrays = TokenArrays(cfg.data.dir, cfg.split)
    if len(arrays) == 0:
        raise ValueError(f"split {cfg.split!r} of {cfg.data.dir} has no pieces")
    context = eval_context(cfg, net, meta)
    result = {"checkpoint": meta["ref"], "model_path": meta["path"], "data_dir": str(cfg.data.dir), "split": cfg.split,
              "model": meta["model"].get("target"), "params": sum(p.numel() for p in net.parameters()),
              "global_step": meta.get("global_step")}
    if cfg.mode in ("nll", "all"):
        result["nll"] = evaluate_nll(net, tok, arrays, cfg, context, device)
    if cfg.mode in ("continuation", "all"):
        from musictx.evaluation.continuation import evaluate_continuations

        result["continuation"] = evaluate_continuations(net, tok, arrays, cfg.continuation, device)
    if cfg.mode == "motif":
        from musictx.evaluation.motif import evaluate_motif

        result["motif"] = evaluate_motif(net, tok, arrays, cfg.motif, device)
    if cfg.mode == "recall":
        from musictx.evaluation.recall import evaluate_recall

        result["recall"] = evaluate_recall(net, tok, arrays, OmegaConf.to_container(cfg.recall), context, device,
                                           progress=print if cfg.get("progress", True) else (lambda _: None))
    return result


def format_table(result: dict) -> str:
    lines = [f"{result['model']} ({result['params']:,} params, step {result['global_step']}) on "
             f"{result['data_dir']} [{result['split']}]"]
    if "nll" in result:
        n = result["nll"]
        lines += ["| tokens | NLL (nats/token) | bits/token | perplexity | accuracy |", "|---|---|---|---|---|",
                  f"| {n['tokens']:,} | {n['nll']:.4f} | {n['bits_per_token']:.4f} | {n['ppl']:.3f} | "
                  f"{n['accuracy']:.4f} |"]
    if "continuation" in result:
        from musictx.evaluation.continuation import format_continuation_table

        lines.append(format_continuation_table(result["continuation"]))
    if "motif" in result:
        from musictx.evaluation.motif import format_motif_table

        lines.append(format_motif_table(result["motif"]))
    if "recall" in result:
        from musictx.evaluation.recall import format_recall_table

        lines.append(format_recall_table(result["recall"]))
    return "\n".join(lines)


def write_result(result: dict, output_dir: str | Path) -> Path:
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = write_json(out / "metrics.json", result, what="metric")  # NaN would be invalid JSON: null
    if "motif" in result:  # the forgetting curve beside the numbers it plots
        from musictx.evaluation.motif import plot_forgetting_curves, result_label

        plot_forgetting_curves([result["motif"]], out / "forgetting_curve.png", [result_label(result, "model")])
    if "recall" in result:
        from musictx.evaluation.motif import result_label
        from musictx.evaluation.recall import plot_recall

        plot_recall([result["recall"]], [result_label(result, "model")], out / "recall.png")
    return path


@with_key_help("evaluate", "musictx-evaluate")
@hydra.main(config_path=CONF_DIR, config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from musictx.checkpoints.model_store import ModelLoadError
    from musictx.io.tokenizer import TokenizerMismatchError

    try:
        result = run_evaluation(cfg)
    except (EvaluateError, ModelLoadError, TokenizerMismatchError) as err:
        raise SystemExit(f"musictx-evaluate: error: {err}") from None
    path = write_result(result, cfg.output_dir)
    print(format_table(result))
    print(f"\nwrote {path}")
    OmegaConf.save(cfg, Path(cfg.output_dir) / "evaluate_config.yaml")


if __name__ == "__main__":
    main()
