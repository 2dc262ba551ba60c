"""One GPU step per call of the lent machine (issue 22; docs/gpu.md), each inside a 10-minute call.

    python scripts/gpu_step.py tests  --out $OUT          # install carried wheels (carry/wheels), run -m gpu tests
    python scripts/gpu_step.py kernels --out $OUT         # the kernel table: kernels.md, kernels.json
    python scripts/gpu_step.py train  --out $OUT --minutes 8   # experiment=paper_recall, resumed from last.ckpt
    python scripts/gpu_step.py export --out $OUT          # last.ckpt -> fp16 model folder in files < 16 MiB

The prepared token arrays travel in the git-ignored ``carry/`` folder (``carry/piano``, ``carry/folk``: what
``musictx-prep`` wrote, ~27 MB) and the run folder stays on the machine between calls (``--run-dir``,
outside the repository copy that each call replaces), so each ``train`` call resumes where the last one
stopped; its ``metrics.csv`` and ``train.log`` come back in ``--out``. ``--tiny`` runs the same steps at a
size a CPU trains in seconds (the tests use it, with ``--device cpu``).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

# musictx is imported inside the steps, not here: on the GPU machine its dependencies (symusic, hydra...) are
# installed by the `tests` step from carry/wheels, after this script has started.
REPO = Path(__file__).resolve().parents[1]
CARRY = REPO / "carry"
NEEDED = ("hydra", "omegaconf", "miditok", "symusic", "mido", "pretty_midi")  # what the GPU image lacks
TINY = ["model.net.n_layers=1", "model.net.d_model=32", "model.net.n_heads=2", "model.net.d_ff=32",
        "model.net.attn_block_size=16", "data.seq_len=64", "data.batch_size=2", "data.val_batch_size=2",
        "data.num_workers=0", "data.recall.min_len=8", "data.recall.max_len=16", "trainer.max_steps=40",
        "trainer.val_check_interval=5", "trainer.limit_val_batches=1", "schedule.warmup_steps=2",
        "trainer.log_every_n_steps=1"]


def run_tests(args) -> int:
    """Install the carried wheels (if any) and run the gpu-marked tests; the report goes to --out."""
    wheels = CARRY / "wheels"
    # only where something is missing (the GPU image): carry/wheels also holds the pop-large call's cp312 wheels
    # (scripts/gpu_pop_carry.sh), which a development environment that has them all must not try to install
    if wheels.is_dir() and any(importlib.util.find_spec(m) is None for m in NEEDED):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels),
                        "--no-deps", *map(str, sorted(wheels.glob("*.whl")))], check=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e",
                        str(REPO)], check=True)
    report = args.out / "gpu_tests.txt"
    with report.open("w") as f:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "-rs"],
                              cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
    print(report.read_text()[-3000:])
    return done.returncode


def trained_seconds(last: Path) -> float:
    """The train time a run's last.ckpt has used: Lightning's Timer counts ``max_time`` over the whole run,
    resumes included, so each call's limit is this plus its own minutes."""
    from musictx.checkpoints.model_store import read_checkpoint

    timer = read_checkpoint(last).get("callbacks", {}).get("Timer", {})
    return float(timer.get("time_elapsed", {}).get("train", 0.0))


def max_time(seconds: float) -> str:
    """Lightning's "DD:HH:MM:SS" for a number of seconds (whole, at least 1)."""
    seconds = max(int(round(seconds)), 1)
    return f"00:{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def train_command(args) -> list[str]:
    """The musictx-train command line of one call: resume when the run folder has a last.ckpt."""
    run_dir = Path(args.run_dir)
    last = run_dir / "checkpoints" / "last.ckpt"
    before = trained_seconds(last) if last.exists() else 0.0
    cmd = [sys.executable, "-m", "musictx.commands.train", "experiment=paper_recall",
           f"data.dir={args.data}/piano", f"data.mix.dir={args.data}/folk", f"hydra.run.dir={run_dir}",
           f"+trainer.max_time={max_time(before + args.minutes * 60)}"]
    if last.exists():
        cmd.append("ckpt_path=last")
    if args.device == "cpu":
        cmd += ["trainer.accelerator=cpu", "trainer.precision=32-true"]
    return cmd + (TINY if args.tiny else []) + list(args.overrides)


def run_train(args) -> int:
    cmd = train_command(args)
    print(" ".join(cmd), flush=True)
    done = subprocess.run(cmd, cwd=REPO)
    run_dir = Path(args.run_dir)
    for name, src in (("metrics.csv", run_dir / "csv" / "metrics.csv"), ("train.log", run_dir / "train.log")):
        if src.exists():
            shutil.copyfile(src, args.out / name)
    return done.returncode


def kernels_command(args) -> list[str]:
    """The attention table at the paper's size in bf16 (a CPU-sized, fp32 one with --device cpu --tiny)."""
    cmd = [sys.executable, "-m", "bench", "attention_gpu", "--json", str(args.out / "kernels.json"),
           "--rounds", "2"]
    if args.device == "cpu":
        cmd += ["--device", "cpu", "--dtype", "fp32"]
    if args.tiny:
        # longer than the efficient kernel's query block (64): shorter inputs take the skew path
        cmd += ["--lengths", "128,256", "--impls", "triton,efficient,skew,sdpa", "--d-model", "64", "--n-heads", "2",
                "--repeats", "2", "--warmup", "1"]
    return cmd


def run_kernels(args) -> int:
    cmd = kernels_command(args)
    print(" ".join(cmd), flush=True)
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    (args.out / "kernels.md").write_text(done.stdout + ("\n" + done.stderr[-4000:] if done.returncode else ""))
    print(done.stdout, done.stderr[-4000:], sep="\n")
    return done.returncode


def run_export(args) -> int:
    from musictx.checkpoints.export import export

    last = Path(args.run_dir) / "checkpoints" / "last.ckpt"
    out = export(str(last), str(args.out / "model"), "float16", max_shard_mb=args.max_shard_mb)
    print(f"wrote {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/gpu_step.py", description=__doc__.splitlines()[0])
    p.add_argument("step", choices=["tests", "kernels", "train", "export"])
    p.add_argument("--out", type=Path, required=True, help="the folder whose files come back ($OUT)")
    p.add_argument("--run-dir", default="/root/musictx_paper_run", help="kept on the machine between calls")
    p.add_argument("--data", default=str(CARRY), help="the folder holding piano/ and folk/ (prepared)")
    p.add_argument("--minutes", type=float, default=8.0, help="train: stop after this much wall time")
    p.add_argument("--max-shard-mb", type=float, default=15.0, help="export: the largest weights file")
    p.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    p.add_argument("--tiny", action="store_true", help="a CPU-sized model (tests)")
    p.add_argument("overrides", nargs="*", help="more musictx-train overrides (train)")
    args = p.parse_intermixed_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    return {"tests": run_tests, "kernels": run_kernels, "train": run_train, "export": run_export}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
