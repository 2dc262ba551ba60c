"""Benchmark one training step (forward + backward + AdamW step) of each model: tokens/s and MFU.

    python -m bench.train                      # base sizes, B=2, L=1024, 1 thread
    python -m bench.train --seq-len 256 --steps 2 --models mt-efficient,lstm

MFU is model FLOPs per second over a peak measured in the same process with the same thread count: the
median rate of a 2048^3 fp32 matmul. The cases run interleaved (one step of each, then a peak matmul,
round after round), so load from other processes on a shared machine falls on all of them alike.
Model FLOPs per step (B windows of L tokens, causal attention):

    6 * N * B * L                 N = weights used in matmuls (2-d parameters, no embedding lookups)
  + n_layers * 3 * 2 * B * d_model * (2 * P + P_rel)
      P = L^2 / 2: the causal (query, key) pairs, each in q.k and in a.v;
      P_rel = R * L - R * (R - 1) / 2 with R = min(max_rel_dist, L): the pairs with a relative
      embedding, each in q.E_r (Music Transformer only; P_rel = 0 for the vanilla Transformer);
      2 FLOPs per multiply-add over d_model = n_heads * d_head, 3 * for forward + backward.
  The LSTM's recurrent matmuls are in N (6 * N * B * L covers them).

The same model FLOPs are counted for the "efficient" and "skew" kernels (the efficient one recomputes
logits in backward and skew computes the full L x L square: extra work is not counted, as usual for MFU).
"""

from __future__ import annotations

import os
import statistics
import time

from musictx.console.args import COUNT, OneLineParser, number

CASES = {  # name: (model class name in musictx.models, extra constructor kwargs)
    "mt-efficient": ("MusicTransformer", {"attn_impl": "efficient"}),
    "mt-skew": ("MusicTransformer", {"attn_impl": "skew"}),
    "vanilla": ("VanillaTransformer", {}),
    "lstm": ("LSTMBaseline", {}),
}
BASE = {"n_layers": 6, "d_model": 512, "n_heads": 8, "d_ff": 1024, "dropout": 0.1}
LSTM = {"n_layers": 3, "d_model": 512, "dropout": 0.1}
VOCAB = 390


def matmul_seconds(a, b) -> float:
    """Seconds of one fp32 matmul a @ b: the peak rate is 2 * n^3 / this, for n x n inputs."""
    t0 = time.perf_counter()
    a @ b
    return time.perf_counter() - t0


def matmul_params(net) -> int:
    """Weights that take part in matmuls: every parameter of 2 dims except embedding tables, plus an
    embedding table that is also the output projection (weight tying)."""
    from torch import nn

    emb = {id(m.weight) for m in net.modules() if isinstance(m, nn.Embedding)}
    tied = {id(m.weight) for m in net.modules() if isinstance(m, nn.Linear)} & emb
    return sum(p.numel() for p in net.parameters() if p.dim() == 2 and (id(p) not in emb or id(p) in tied))


def attention_flops(net, batch: int, length: int) -> float:
    """Causal attention FLOPs of one step, forward + backward (see the module docstring)."""
    cfg = net.get_config()
    if "n_heads" not in cfg:
        return 0.0
    pairs = length**2 / 2
    r = min(cfg.get("max_rel_dist") or 0, length)
    rel_pairs = r * length - r * (r - 1) / 2
    return cfg["n_layers"] * 3 * 2 * batch * cfg["d_model"] * (2 * pairs + rel_pairs)


def model_flops(net, batch: int, length: int) -> float:
    return 6 * matmul_params(net) * batch * length + attention_flops(net, batch, length)


def build(case: str, length: int):
    import musictx.models as models

    cls_name, extra = CASES[case]
    sizes = LSTM if case == "lstm" else {**BASE, "max_seq_len": length}
    return getattr(models, cls_name)(vocab_size=VOCAB, **sizes, **extra)


class Case:
    """One model with its optimizer and a fixed random batch; `step()` times one training step."""

    def __init__(self, name: str, batch: int, length: int):
        import torch

        torch.manual_seed(0)
        self.name, self.net = name, build(name, length)
        ids = torch.randint(0, VOCAB - 2, (batch, length + 1))
        self.x, self.y = ids[:, :-1], ids[:, 1:]
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=1e-4)
        self.flops = model_flops(self.net, batch, length)
        self.times: list[float] = []

    def step(self) -> float:
        """Seconds of forward, cross-entropy, backward and AdamW step."""
        import torch.nn.functional as F

        t0 = time.perf_counter()
        logits = self.net(self.x)  # (B, L, V)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), self.y.reshape(-1))
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0


def run(args) -> list[dict]:
    """Rounds of one step of every case and one peak matmul, interleaved, so that load from other
    processes on a shared machine falls on all cases alike; medians over the timed rounds."""
    import torch

    cases = [Case(name, args.batch_size, args.seq_len) for name in args.models]
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    peak_times = []
    for i in range(args.warmup + args.steps):
        timed = i >= args.warmup
        last = {case.name: case.step() for case in cases}
        peak_times.append(matmul_seconds(a, b))
        if timed:
            for case in cases:
                case.times.append(last[case.name])
        print(f"  round {i + 1}/{args.warmup + args.steps}{'' if timed else ' (warm-up)'}: "
              + ", ".join(f"{k} {1000 * t:.0f} ms" for k, t in last.items()), flush=True)
    peak_times = peak_times[args.warmup:]
    peak = 2 * n**3 / statistics.median(peak_times)
    rows = []
    for case in cases:
        step_s = statistics.median(case.times)
        rows.append({"case": case.name, "params": sum(p.numel() for p in case.net.parameters()),
                     "matmul_params": matmul_params(case.net), "step_s": step_s,
                     "tokens_per_s": args.batch_size * args.seq_len / step_s,
                     "gflop_per_step": case.flops / 1e9, "mfu": case.flops / step_s / peak,
                     "peak_gflops": peak / 1e9})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| model | params (M) | matmul params (M) | ms / step | tokens/s | model GFLOP / step | MFU |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['params'] / 1e6:.2f} | {r['matmul_params'] / 1e6:.2f} | "
                     f"{1000 * r['step_s']:.0f} | {r['tokens_per_s']:.0f} | {r['gflop_per_step']:.1f} | "
                     f"{100 * r['mfu']:.1f}% |")
    by = {r["case"]: r["tokens_per_s"] for r in rows}
    ratios = [f"tokens/s {a} / {b}: {by[a] / by[b]:.2f}"
              for a, b in (("mt-efficient", "mt-skew"), ("mt-efficient", "vanilla")) if a in by and b in by]
    return "\n".join(lines + ([""] + ratios if ratios else []))


def main(argv=None) -> None:
    p = OneLineParser(prog="python -m bench train", description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=COUNT, default=1)
    p.add_argument("--seq-len", type=COUNT, default=1024)
    p.add_argument("--batch-size", type=COUNT, default=2)
    p.add_argument("--steps", type=COUNT, default=3, help="timed steps (rounds) per model; the median is reported")
    p.add_argument("--warmup", type=number(int, low=0), default=1)
    p.add_argument("--models", default=",".join(CASES), help=f"comma-separated, from {', '.join(CASES)}")
    args = p.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if unknown := set(args.models) - set(CASES):
        p.error(f"unknown models {sorted(unknown)}; choose from {', '.join(CASES)}")
    # Idle OpenMP threads must not spin on a shared machine; must be set before torch starts OpenMP.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    torch.set_num_threads(args.threads)
    print(f"B={args.batch_size} L={args.seq_len} threads={args.threads} torch {torch.__version__}, "
          f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}; median of {args.steps} steps after "
          f"{args.warmup} warm-up, cases interleaved round by round; fwd + bwd + AdamW step, fp32")
    rows = run(args)
    print(f"\nmatmul peak (fp32, 2048^3, {args.threads} thread(s)): {rows[0]['peak_gflops']:.1f} GFLOP/s")
    print("model FLOPs/step = 6*N*B*L + n_layers*3*2*B*d_model*(2*P + P_rel); N = 2-d weights without "
          "embedding tables; P = L^2/2 causal pairs; P_rel = R*L - R*(R-1)/2, R = min(max_rel_dist, L) "
          "(relative attention only); LSTM: 6*N*B*L")
    print(table(rows))


if __name__ == "__main__":
    main()
