"""Back from the GPU: the files of ``bash scripts/gpu_pop.sh`` ($OUT) -> a model folder every command loads.

    python scripts/import_pop_large.py /work/.device/<...>/files   [--to outputs/pop_large/model]
        [--data data/pop_large --windows 16]
    python scripts/import_pop_large.py <files> --run mid --to outputs/pop_mid/model   # a --runs call's bundle

With ``--run NAME`` the run's ``NAME.tar.K-of-N`` parts are put together and unpacked first (beside ``--to``).

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
import shutil
import sys
from pathlib import Path

import torch

from musictx.checkpoints.bundle import bundle_names, read_bundle
from musictx.checkpoints.model_store import load_model_folder, save_model_folder

ROOT = Path(__file__).resolve().parents[1]
RUN_FILES = ("report.json", "train.json", "kernels.json", "gpu.log")


def model_dir_of(returned: Path) -> Path:
    """The returned model folder: ``returned/model`` ($OUT as it came back) or ``returned`` itself."""
    for folder in (returned / "model", returned):
        if (folder / "config.json").is_file():
            return folder
    raise SystemExit(f"{returned}: no model/config.json (is this the folder the GPU call's files came back in?)")


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
        raise SystemExit(f"{folder}: shards missing: {', '.join(missing)} (the call was cut during an export?)")
    net, tokenizer, meta = load_model_folder(folder)  # every shard read whole and checked finite
    # trained with the fused kernel, which runs on CUDA only: "auto" keeps it there and takes the efficient
    # kernel (the same function) on a CPU, so every command loads the folder anywhere
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
            shutil.copyfile(path, to.parent / name)
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
            raise SystemExit(f"validation NLL on the CPU {summary['cpu_val_nll_windows']:.4f} != {gpu:.4f} on the "
                             "GPU: the weights did not come back as trained")
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/import_pop_large.py", description=__doc__.splitlines()[0])
    p.add_argument("returned", type=Path, help="the folder the GPU call's files came back in ($OUT's copy)")
    p.add_argument("--to", type=Path, default=ROOT / "outputs" / "pop_large" / "model")
    p.add_argument("--data", type=Path, default=None, help="the prepared arrays (data/pop_large) to check NLL on")
    p.add_argument("--windows", type=int, default=16)
    p.add_argument("--run", default=None, help="a side-by-side run's bundle (NAME.tar.K-of-N) to import")
    args = p.parse_args(argv)
    returned = args.returned
    if args.run:
        found = bundle_names(returned)
        if args.run not in found:
            raise SystemExit(f"{returned}: no bundle {args.run!r}; found: {', '.join(found) or 'none'}")
        returned = read_bundle(returned, args.run, args.to.parent / f"{args.run}_returned")
        for name in RUN_FILES:  # the call's own files (gpu.log, report.json, kernels.json) go beside it too
            if (args.returned / name).is_file() and not (returned / name).exists():
                shutil.copyfile(args.returned / name, returned / name)
    summary = import_run(returned, args.to, args.data, args.windows)
    print(json.dumps(summary, indent=1))
    return 0 if summary["reloads_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
