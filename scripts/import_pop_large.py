"""Back from the GPU: the files of ``bash scripts/gpu_pop.sh`` ($OUT) -> a model folder every command loads.

    python scripts/import_pop_large.py /work/.device/<...>/files   [--to outputs/pop_large/model]
        [--data data/pop_large --windows 16]
    python scripts/import_pop_large.py <files> --run mid --to outputs/pop_mid/model   # a --runs call's bundle

With ``--run NAME`` the run's ``NAME.tar.K-of-N`` parts are checked against their manifest, put together and
unpacked first (into ``NAME_returned`` beside ``--to``; `musictx.checkpoints.bundle` refuses links, odd names
and mixed or cut sets before anything is written).

Writes go through the commands' output policy (`musictx.safe_output`): ``--to`` may not be inside the
installed package (its shipped models), and no file this import did not write is replaced unless
``--overwrite``. Every refusal is one line ``import_pop_large.py: error: ...``, exit status 1.

1. reads the returned ``model/`` (config.json and the fp16 shards it lists: each one checked whole and finite)
   and rebuilds the net from them (`load_model_folder`);
2. writes a loadable model folder at ``--to``: config.json, one model.safetensors (fp16) and MidiTok's
   tokenizer.json, with the run's figures (GPU, steps, tokens/s, validation NLL) in the config's ``info``;
3. copies report.json, train.json and kernels.json (and gpu.log) beside it (``--to``'s parent), for the docs;
4. with ``--data``, scores ``--windows`` fixed validation windows on the CPU in fp32: the NLL must agree with
   the last validation NLL the GPU measured in bf16 on the same windows (within 2%), which checks that the
   weights came back whole and in the right order.

Then evaluate it as docs/gpu.md says (NLL per note, the continuation scorecard, the two-sample test, speed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import torch

from musictx.checkpoints.bundle import BundleError, bundle_names, read_bundle
from musictx.checkpoints.model_store import (
    CONFIG_FILE,
    NATIVE_TOKENIZER_FILE,
    WEIGHTS_FILE,
    load_model_folder,
    save_model_folder,
)
from musictx.console.guard import command_guard, fail
from musictx.safe_output import OutputError, check_new, overwrite_allowed, target_problem, write_bytes

ROOT = Path(__file__).resolve().parents[1]
RUN_FILES = ("report.json", "train.json", "kernels.json", "gpu.log")
PROG = "import_pop_large.py"


class ImportRefused(ValueError):
    """What this import cannot do with the files it was given: one line naming the folder."""


def model_dir_of(returned: Path) -> Path:
    """The returned model folder: ``returned/model`` ($OUT as it came back) or ``returned`` itself."""
    for folder in (returned / "model", returned):
        if (folder / "config.json").is_file():
            return folder
    raise ImportRefused(f"{returned}: no model/config.json (is this the folder the GPU call's files came back in?)")


def window_nll(net, tokenizer, data_dir: Path, seq_len: int, windows: int) -> float:
    """NLL (nats/token) over the fixed validation windows `musictx.training.plain.MinuteExport` scores."""
    from musictx.training.windows import FixedWindows

    ds = FixedWindows(data_dir, "validation", seq_len, tokenizer)
    n = min(windows, len(ds))
    picks = [round(k * (len(ds) - 1) / max(n - 1, 1)) for k in range(n)]
    nll = count = 0.0
    with torch.no_grad():
        for i in picks:
            x, y = ds[i]
            logits = net(x[None]).float()
            keep = y != tokenizer.pad_id
            nll += float(torch.nn.functional.cross_entropy(logits[0][keep], y[keep], reduction="sum"))
            count += int(keep.sum())
    return nll / max(count, 1)


def import_run(returned: Path, to: Path, data: Path | None = None, windows: int = 16) -> dict:
    """Write the loadable folder; returns what it checked (the summary printed)."""
    folder = model_dir_of(returned)
    config = json.loads((folder / "config.json").read_text())
    shards = config.get("weights_files") or ["model.safetensors"]
    missing = [s for s in shards if not (folder / s).is_file()]
    if missing:
        raise ImportRefused(f"{folder}: shards missing: {', '.join(missing)} (the call was cut during an export?)")
    net, tokenizer, meta = load_model_folder(folder)  # every shard read whole and checked finite
    # trained with the fused kernel, which runs on CUDA only: "auto" keeps it there and takes the efficient
    # kernel (the same function) on a CPU, so every command loads the folder anywhere
    if hasattr(net, "set_attn_impl"):  # the Music Transformer; the baselines have no relative attention
        net.set_attn_impl("auto")
    run = {}
    for name in RUN_FILES:
        for where in (returned, folder.parent):
            if (where / name).is_file():
                run[name] = where / name
                break
    train = json.loads(run["train.json"].read_text()) if "train.json" in run else {}
    # the export whose weights these are: the last one saved (a keep_best run skips those that were worse)
    last = next((r for r in reversed(train.get("history") or []) if r.get("saved", True)), {})
    info = {**meta["info"], "gpu": train.get("device"), "train_s": last.get("train_s"),
            "tokens_per_s": last.get("tokens_per_s"), "gpu_val_nll_windows": last.get("val_nll"),
            "shards_back": len(shards)}
    to.mkdir(parents=True, exist_ok=True)
    save_model_folder(net, tokenizer, to, "float16", info=info)
    for name, path in run.items():
        if path.resolve() != (to.parent / name).resolve():
            write_bytes(to.parent / name, path.read_bytes(), "--to")
    summary = {"folder": str(to), "params": sum(p.numel() for p in net.parameters()), "shards": len(shards),
               "global_step": meta["info"].get("global_step"), "gpu": train.get("device"),
               "gpu_val_nll_windows": last.get("val_nll")}
    reloaded, _, _ = load_model_folder(to)
    same = all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), reloaded.state_dict().values(),
                                                  strict=True))
    summary["reloads_equal"] = same
    if data is not None:
        seq_len = train.get("options", {}).get("seq_len", net.max_seq_len)
        n = train.get("options", {}).get("val_windows", windows)
        summary["cpu_val_nll_windows"] = window_nll(reloaded, tokenizer, data, seq_len, n)
        gpu = last.get("val_nll")
        if gpu is not None and abs(summary["cpu_val_nll_windows"] - gpu) > 0.02 * gpu + 1e-3:
            raise ImportRefused(f"validation NLL on the CPU {summary['cpu_val_nll_windows']:.4f} != {gpu:.4f} on "
                                "the GPU: the weights did not come back as trained")
    return summary


def check_to(to: Path, returned: Path, run: str | None) -> None:
    """Before any work: ``--to`` and its folder (which gets the run's files) are allowed, and nothing there
    that this import would write exists (unless --overwrite)."""
    problem = target_problem(to) or target_problem(to.parent)
    if problem:
        raise OutputError(f"--to {to}: {problem}")
    sources = {(where / n).resolve() for where in (returned, returned.parent) for n in RUN_FILES}
    run_files = [to.parent / n for n in RUN_FILES if (to.parent / n).resolve() not in sources]  # not copied
    check_new([to / CONFIG_FILE, to / WEIGHTS_FILE, to / NATIVE_TOKENIZER_FILE, *run_files], "--to")
    unpacked = to.parent / f"{run}_returned"
    if run and os.path.lexists(unpacked) and not overwrite_allowed():
        raise OutputError(f"{unpacked} already exists and this import did not write it; pass --overwrite to "
                          "replace it, or choose another --to")


def unpack_run(returned: Path, run: str, to: Path) -> Path:
    """The run's bundle unpacked beside ``to`` (NAME_returned), with the call's own files copied in."""
    found = bundle_names(returned) if returned.is_dir() else []
    if run not in found:
        raise ImportRefused(f"{returned}: no bundle {run!r}; found: {', '.join(found) or 'none'}")
    unpacked = read_bundle(returned, run, to.parent / f"{run}_returned", replace=overwrite_allowed())
    for name in RUN_FILES:  # the call's own files (gpu.log, report.json, kernels.json) go beside it too
        if (returned / name).is_file() and not (unpacked / name).exists():
            shutil.copyfile(returned / name, unpacked / name)
    return unpacked


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    p.error = lambda message: fail(PROG, message)  # one line, exit 1, as every refusal
    p.add_argument("returned", type=Path, help="the folder the GPU call's files came back in ($OUT's copy)")
    p.add_argument("--to", type=Path, default=ROOT / "outputs" / "pop_large" / "model")
    p.add_argument("--data", type=Path, default=None, help="the prepared arrays (data/pop_large) to check NLL on")
    p.add_argument("--windows", type=int, default=16)
    p.add_argument("--run", default=None, help="a side-by-side run's bundle (NAME.tar.K-of-N) to import")
    p.add_argument("--overwrite", action="store_true", help="replace the files an earlier import wrote at --to")
    args = p.parse_args(argv)
    if args.windows < 1:
        p.error(f"--windows {args.windows}: must be at least 1")
    with command_guard(PROG, overwrite=args.overwrite, extra=(BundleError, ImportRefused), flag="--overwrite"):
        check_to(args.to, args.returned, args.run)
        returned = unpack_run(args.returned, args.run, args.to) if args.run else args.returned
        try:
            summary = import_run(returned, args.to, args.data, args.windows)
        except BaseException:
            if args.run:  # the folder this import unpacked goes with it: a second try needs no --overwrite
                shutil.rmtree(returned, ignore_errors=True)
            raise
    print(json.dumps(summary, indent=1))
    return 0 if summary["reloads_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
