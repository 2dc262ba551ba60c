"""The pop-large GPU call (issue 51; docs/gpu.md): three steps in one call of the lent machine, each writing
what it has into ``--out`` ($OUT) as soon as it has it.

    OUT=... bash scripts/gpu_pop.sh            # on the GPU: installs carry/wheels, then runs this
    OUT=/tmp/x bash scripts/gpu_pop.sh tiny    # the same on CPU at a tiny size (tests/test_gpu_pop.py)

1. ``tests``: the ``gpu``-marked tests (tests/test_cuda.py: every kernel against the fp64 naive one, fp32 and
   bf16; a bf16 training step; torch.compile; the efficient kernel's memory; cached decoding).
2. ``kernels``: the kernel table (`bench.attention_gpu`: triton, efficient, skew, flex, sdpa; forward
   + backward, bf16, d 512, 8 heads, L = 1k..8k) -> kernels.json (the markdown table is in gpu.log too).
3. ``train``: the larger pop model (`musictx.training.plain`: 8 x 512, L 2048, bf16, the triton kernel) on the
   carried arrays (carry/pop_large: the train split with POP909's extra arrangements) until the budget's
   end, exporting fp16 safetensors shards (< 16 MiB each) and train.json every minute. With ``--runs
   large,mid,small`` (RUNS below) the runs train side by side on the one GPU, each exporting its folder
   as ``NAME.tar.K-of-N`` parts (`musictx.checkpoints.bundle`), so that three fit the 8 files.

What comes back, at most 8 files: gpu.log (everything printed), report.json (each step's status and
time), kernels.json, train.json, model/config.json and model/model-0000k-of-0000N.safetensors (N <= 3);
with ``--runs``, gpu.log, report.json, kernels.json and the runs' parts (large 3, mid and small 1 each).
A step that fails or runs out of time is recorded and the next one runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_FILES, MAX_FILE_MB, MAX_TOTAL_MB, MAX_DEPTH = 8, 16, 64, 2  # what the device tool brings back from $OUT

TINY_KERNELS = ["--device", "cpu", "--dtype", "fp32", "--lengths", "128,256", "--impls", "triton,efficient,skew,sdpa",
                "--d-model", "64", "--n-heads", "2", "--repeats", "2", "--warmup", "1", "--rounds", "1"]
TINY_TRAIN = ["--accelerator", "cpu", "--precision", "32-true", "--n-layers", "1", "--d-model", "32", "--n-heads", "2",
              "--d-ff", "64", "--seq-len", "128", "--batch-size", "2", "--attn-impl", "efficient",
              "--attn-block-size", "32", "--every-s", "3", "--num-workers", "0", "--val-windows", "4",
              "--warmup-steps", "2", "--max-shard-mb", "0.03", "--threads", "1"]


# The runs a GPU call can train side by side (--runs): the options each adds to musictx.training.plain's
# defaults (8 x 512, L 2048, batch 16, the triton kernel, bf16). mid and small are sized for a CPU's decoding
# (docs/gpu.md: a 4 x 256 step costs 1.7x pop's on one thread, 3 x 192 is pop's own shape).
RUNS = {
    "large": [],
    "mid": ["--n-layers", "4", "--d-model", "256", "--n-heads", "4", "--d-ff", "1024", "--seq-len", "1024",
            "--batch-size", "32", "--lr", "1e-3", "--num-workers", "3"],
    "small": ["--n-layers", "3", "--d-model", "192", "--n-heads", "3", "--d-ff", "768", "--seq-len", "1024",
              "--batch-size", "32", "--lr", "1e-3", "--num-workers", "3"],
    # the paper's comparison at its base size (issue 64), on the piano arrays (--data carry/piano): the same
    # windows, batch and tokens for each; --init carries each one's best weights so far into the next window
    "paper_mt": ["--net", "music_transformer", "--n-layers", "6", "--d-model", "512", "--n-heads", "8", "--d-ff",
                 "1024", "--seq-len", "2048", "--batch-size", "8", "--num-workers", "3"],
    "paper_vanilla": ["--net", "transformer", "--n-layers", "6", "--d-model", "512", "--n-heads", "8", "--d-ff",
                      "1024", "--seq-len", "2048", "--batch-size", "8", "--num-workers", "3"],
    # the piano model people get, at the shipped piano's own shape (a decoding step a Zen 3 thread can afford:
    # the paper's 6 x 512 writes 2-4x real time there, docs/piano-paper-size.md): started from the shipped
    # weights (carry/paper_init/piano_small, a copy that gpu_pop_carry.sh --piano makes), so each window adds to
    # the model in git, the one state that outlives a machine
    "piano_small": ["--net", "music_transformer", "--n-layers", "3", "--d-model", "192", "--n-heads", "3", "--d-ff",
                    "768", "--max-rel-dist", "512", "--seq-len", "2048", "--batch-size", "16", "--lr", "3e-4",
                    "--num-workers", "3"],
    # fp32: window 1's bf16-mixed LSTM (cuDNN) stayed at 4.85 nats; the CPU's learn in fp32 and in bf16 (oneDNN)
    "paper_lstm": ["--net", "lstm", "--n-layers", "3", "--d-model", "512", "--seq-len", "2048", "--batch-size", "8",
                   "--num-workers", "3", "--precision", "32-true"],
    # pop with its chords in the tokens (issue 65: harmony that moves), at mid's size, from scratch on its own
    # arrays (--data ...,pop_chords=carry/pop_chords: POP909 with its other arrangements, tokenizer.chords=true)
    "pop_chords": ["--n-layers", "4", "--d-model", "256", "--n-heads", "4", "--d-ff", "1024", "--seq-len", "1024",
                   "--batch-size", "32", "--lr", "1e-3", "--num-workers", "3"],
}


class Log:
    """Everything printed goes to stdout and to gpu.log (line by line, so a cut call keeps it)."""

    def __init__(self, path: Path):
        self.file = path.open("a", buffering=1)
        self.lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self.lock:
            print(line, flush=True)
            self.file.write(line + "\n")

    def prefixed(self, name: str):
        """This log with ``[name]`` before each line (a run among several)."""
        return lambda line: self(f"[{name}] {line}")


def run_step(name: str, cmd: list[str], timeout_s: float, log: Log, env: dict | None = None) -> dict:
    """Run ``cmd`` with its output streamed into the log; killed (its process group) after ``timeout_s``."""
    log(f"=== {name}: {' '.join(cmd)} (limit {timeout_s:.0f} s)")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, start_new_session=True)
    reader = threading.Thread(target=lambda: [log(line.rstrip("\n")) for line in proc.stdout], daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=max(timeout_s, 1))
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    reader.join(timeout=5)
    result = {"rc": proc.returncode, "seconds": round(time.monotonic() - t0, 1), "timed_out": timed_out}
    log(f"=== {name}: {'timed out' if timed_out else 'rc ' + str(proc.returncode)} after {result['seconds']} s")
    return result


def run_together(cmds: dict[str, list[str]], timeout_s: float, log: Log) -> dict:
    """Run every command at once, each one's lines prefixed with its name in the log; all are killed after
    ``timeout_s``. Returns {name: {rc, seconds, timed_out}}."""
    results: dict[str, dict] = {}

    def run(name: str, cmd: list[str]) -> None:
        results[name] = run_step(name, cmd, timeout_s, log.prefixed(name))

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in cmds.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def check_out(out: Path) -> list[str]:
    """What in ``out`` would not come back from the device tool (files, sizes, depth, names)."""
    files = [p for p in out.rglob("*") if p.is_file()]
    problems = []
    if len(files) > MAX_FILES:
        problems.append(f"{len(files)} files, more than {MAX_FILES}: {sorted(str(p.relative_to(out)) for p in files)}")
    total = sum(p.stat().st_size for p in files)
    if total > MAX_TOTAL_MB * 2**20:
        problems.append(f"{total / 2**20:.1f} MiB in all, more than {MAX_TOTAL_MB}")
    for p in files:
        rel = p.relative_to(out)
        if p.stat().st_size > MAX_FILE_MB * 2**20:
            problems.append(f"{rel}: {p.stat().st_size / 2**20:.1f} MiB, more than {MAX_FILE_MB}")
        if len(rel.parts) > MAX_DEPTH + 1:
            problems.append(f"{rel}: deeper than {MAX_DEPTH} folders")
        if not all(c.isalnum() or c in "._-" for part in rel.parts for c in part):
            problems.append(f"{rel}: a name the transfer refuses")
    return problems


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, dict[str, str]]:
    """The options, checked (a bad one exits with its message), and `data_by_run`'s folders."""
    p = argparse.ArgumentParser(prog="scripts/gpu_pop.py", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=os.environ.get("OUT"), help="the folder that comes back ($OUT)")
    p.add_argument("--tiny", action="store_true", help="on CPU at a tiny size (the tests)")
    p.add_argument("--data", default=str(REPO / "carry" / "pop_large"),
                   help="the prepared arrays: DIR for every run, and NAME=DIR for run NAME's own (comma-separated: "
                   "carry/piano,pop_chords=carry/pop_chords)")
    p.add_argument("--budget-s", type=float, default=450.0, help="the whole command's wall-clock budget")
    p.add_argument("--tests-s", type=float, default=150.0,
                   help="the tests' limit (killed after; they took 104 s on an H200)")
    p.add_argument("--kernels-s", type=float, default=125.0, help="the kernel table's limit")
    p.add_argument("--steps", default="tests,kernels,train")
    p.add_argument("--runs", default="", help=f"train these side by side, each bundled (of {', '.join(RUNS)}); "
                   "empty: one run with the options given")
    p.add_argument("--stage", default=None, help="where side-by-side runs write before bundling: a new or empty "
                   "folder (default: a new temporary one)")
    p.add_argument("--init", default="", help="a folder of the runs' best weights so far, one model folder NAME/ "
                   "each (an earlier window's, imported): a run with one starts from it, so windows add up")
    p.add_argument("--max-steps", type=int, default=-1, help="each run stops here, its learning rate's cosine over "
                   "these steps (the same tokens for each; -1: the budget alone)")
    p.add_argument("train_args", nargs="*", help="more --<option> value pairs for musictx.training.plain, "
                   "after a lone --: ... --runs paper_mt -- --lr 3e-4 --recall-prob 0.6")
    own, extra = split_at_dashes(sys.argv[1:] if argv is None else argv)
    args = p.parse_intermixed_args(own)
    args.train_args = [*args.train_args, *extra]
    if args.out is None:
        p.error("--out (or $OUT) is required")
    unknown = [r for r in args.runs.split(",") if r and r not in RUNS]
    if unknown:
        p.error(f"--runs: unknown run(s) {', '.join(unknown)}; known: {', '.join(RUNS)}")
    try:
        data = data_by_run(args.data, [r for r in args.runs.split(",") if r])
    except ValueError as err:
        p.error(f"--data: {err}")
    if args.stage and Path(args.stage).exists() and any(Path(args.stage).iterdir()):
        p.error(f"--stage {args.stage}: not empty (its runs would be bundled with this call's)")
    return args, data


def main(argv: list[str] | None = None) -> int:
    args, data = parse(argv)
    t_start = time.monotonic()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "gpu.log")
    py = sys.executable
    report = {"command": " ".join([Path(py).name, *sys.argv]), "tiny": args.tiny, "steps": {}}

    def save_report():
        tmp = out / ".report.json.tmp"
        tmp.write_text(json.dumps(report, indent=1) + "\n")
        tmp.replace(out / "report.json")

    probe = subprocess.run([py, "-c", "import torch; print(torch.__version__, torch.cuda.is_available() and "
                            "torch.cuda.get_device_name())"], capture_output=True, text=True)
    report["device"] = probe.stdout.strip() or probe.stderr.strip()[-300:]
    log(f"device: {report['device']}; budget {args.budget_s:.0f} s; data {data}")
    save_report()
    steps = args.steps.split(",")
    if "tests" in steps:
        cmd = [py, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--noconftest", "-m", "gpu", "-rA",
               "tests/test_cuda.py"]
        report["steps"]["tests"] = run_step("tests", cmd, args.tests_s, log)
        save_report()
    if "kernels" in steps:
        cmd = [py, "-m", "bench", "attention_gpu", "--json", str(out / "kernels.json"), "--rounds", "2",
               "--max-seconds", str(max(args.kernels_s - 20, 10))]
        report["steps"]["kernels"] = run_step("kernels", cmd + (TINY_KERNELS if args.tiny else []), args.kernels_s,
                                              log)
        save_report()
    if "train" in steps:
        report["steps"].update(train(args, data, out, args.budget_s - (time.monotonic() - t_start), log))
        save_report()
    problems = check_out(out)
    report["out_files"] = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
    report["out_problems"] = problems
    report["seconds"] = round(time.monotonic() - t_start, 1)
    save_report()
    log(f"done in {report['seconds']} s; $OUT: {', '.join(report['out_files'])}"
        + (f"; WILL NOT ALL COME BACK: {'; '.join(problems)}" if problems else ""))
    failed = [k for k, v in report["steps"].items() if v["rc"] != 0]
    return 1 if failed or problems else 0


def train(args: argparse.Namespace, data: dict[str, str], out: Path, left: float, log) -> dict:
    """The train step with ``left`` seconds of the budget: one run, or ``--runs`` side by side; each run's
    `run_step` record by name."""
    py = sys.executable
    # start-up (data, model, first batches) and the final export come on top of the training budget
    margin = 30.0 if args.tiny else 35.0
    runs = args.runs.split(",") if args.runs else []
    budget = f"{max(left - margin, 5):.0f}"
    if not runs:  # one run, its files as they are: model/ and train.json (the H200's call)
        cmd = [py, "-m", "musictx.training.plain", "--data", data[""], "--out", str(out), "--budget-s", budget,
               *(TINY_TRAIN if args.tiny else []), "--max-steps", str(args.max_steps), *args.train_args]
        return {"train": run_step("train", cmd, max(left - 5, 10), log)}
    # several side by side on the one GPU, each packed into NAME.tar.K-of-N parts
    stage = Path(args.stage or tempfile.mkdtemp(prefix="gpu_pop_stage_"))
    cmds = {name: [py, "-m", "musictx.training.plain", "--data", data.get(name, data[""]), "--budget-s", budget,
                   "--out", str(stage / name), "--run-dir", str(stage / f"{name}_run"),
                   "--bundle", str(out / name), "--keep-best", "true", *RUNS[name],
                   # tiny: a stand-in's shape, which no carried weights fit
                   *(TINY_TRAIN if args.tiny else init_args(args.init, name)), "--max-steps",
                   str(args.max_steps), *args.train_args]
            for name in runs}
    return run_together(cmds, max(left - 5, 10), log)


def data_by_run(spec: str, runs: list[str]) -> dict[str, str]:
    """``--data``'s folders: {"": every run's, NAME: run NAME's own}. Each named run must be one of ``runs``
    (a folder given to a run that is not trained is a typo), and a run without its own needs the common one."""
    data: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, folder = item.rpartition("=")
        if name in data:
            raise ValueError(f"{'run ' + name if name else 'the common folder'} given twice in {spec!r}")
        if name and name not in runs:
            raise ValueError(f"{item!r} names a run this call does not train (--runs: {', '.join(runs) or 'none'})")
        data[name] = folder
    if "" not in data and (not runs or any(r not in data for r in runs)):
        raise ValueError(f"no folder for {', '.join(r for r in runs if r not in data) or 'the run'} in {spec!r}")
    data.setdefault("", "")
    return data


def split_at_dashes(argv: list[str]) -> tuple[list[str], list[str]]:
    """(this script's arguments, the runs' own options after a lone ``--``, passed on as they are)."""
    if "--" not in argv:
        return list(argv), []
    at = argv.index("--")
    return list(argv[:at]), list(argv[at + 1:])


def init_args(init: str, name: str) -> list[str]:
    """``--init-dir`` for run ``name`` where the carried folder holds its best weights so far, else nothing."""
    for folder in ([Path(init) / name / "model", Path(init) / name] if init else []):  # as imported, or bare
        if (folder / "config.json").is_file():
            return ["--init-dir", str(folder)]
    return []


if __name__ == "__main__":
    sys.exit(main())
