"""Training without Hydra, for a fixed wall-clock budget: the run a lent GPU does in one call (issue 51).

``musictx-train`` composes its config with Hydra, which the GPU machine's image does not have. This builds
the same objects (`MusicDataModule`, `MusicLitModule`, a Lightning ``Trainer``) from one typed
`PlainTrainOptions` and trains until a deadline rather than for a number of steps:

- the learning rate warms up over ``warmup_steps`` (at most a tenth of the budget) and then follows half a
  cosine over the *time* budget, or over ``max_steps`` where they run out first (`WallClockCosine`), so the run
  ends at ``min_ratio`` of its peak whatever speed the card gives; ``max_steps`` gives networks of different
  speeds the same tokens (the paper's comparison) with the same schedule over them;
- every ``every_s`` seconds (`MinuteExport`) it scores a fixed set of validation windows, writes the weights
  as fp16 safetensors in files of at most ``max_shard_mb`` (`save_model_folder`; a copy comes back from the
  machine even when the call is cut short) and ``train.json`` with the history so far; the last export is at
  the end of training, and Lightning's own ``last.ckpt`` (optimizer included) stays in ``run_dir``.

    python -m musictx.training.plain --data carry/pop_large --out $OUT --budget-s 240   # defaults: 8 x 512, L 2048
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import lightning as L
import torch

from musictx.checkpoints.bundle import write_bundle
from musictx.checkpoints.model_store import load_model_folder, save_model_folder
from musictx.decoding import eval_mode
from musictx.io.jsonio import write_json
from musictx.training.callbacks import LastCheckpoint
from musictx.training.checkpoint_io import AtomicCheckpointIO
from musictx.training.data import MusicDataModule
from musictx.training.lit_module import MusicLitModule
from musictx.training.recall_windows import RecallCurriculum
from musictx.training.windows import FixedWindows


@dataclass
class PlainTrainOptions:
    """One plain training run (the keys mirror conf/: model.net.*, data.*, schedule.*, trainer.*)."""

    data_dir: str                      # a musictx-prep folder (tokenizer.json, <split>.bin, <split>.idx.npy)
    out_dir: str                       # minute exports: model/ (config.json + shards) and train.json
    run_dir: str = "/tmp/musictx_plain_run"  # Lightning's last.ckpt (optimizer too; stays on the machine)
    # model (conf/model/*.yaml's net): the paper's comparison, the same sizes and tokens for each
    net: str = "music_transformer"     # music_transformer | transformer (absolute positions) | lstm
    n_layers: int = 8
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 1024
    dropout: float = 0.1
    max_rel_dist: int | None = None    # None: seq_len // 2
    attn_impl: str = "triton"          # the fused kernel; efficient / skew / naive as in the config
    attn_block_size: int = 128
    # data
    seq_len: int = 2048
    batch_size: int = 16
    num_workers: int = 4
    max_transpose: int = 5
    # the recall curriculum on the train windows (`RecallCurriculum`, whose defaults these are; prob 0: off): what
    # the shipped `piano` was fine-tuned with, and what recall guidance needs from a model (docs/piano-paper-size.md)
    recall_prob: float = RecallCurriculum.prob
    recall_repeats: int = RecallCurriculum.repeats
    recall_min_len: int = RecallCurriculum.min_len
    recall_max_len: int = RecallCurriculum.max_len
    recall_loop_prob: float = RecallCurriculum.loop_prob
    val_windows: int = 64              # validation windows scored at each export (evenly spread, fixed)
    seed: int = 1234
    # optimisation
    lr: float = 6e-4
    warmup_steps: int = 200
    min_ratio: float = 0.1
    weight_decay: float = 0.0
    # device and budget
    accelerator: str = "gpu"
    precision: str = "bf16-mixed"
    compile: bool = False
    budget_s: float = 240.0            # wall-clock seconds of training (from the first batch)
    max_steps: int = -1                # also stop here (-1: the budget alone)
    every_s: float = 60.0              # export (and validate) this often
    max_shard_mb: float = 15.0
    bundle: str = ""                   # after each export, out_dir packed as BUNDLE.tar.K-of-N parts
    bundle_mb: float = 15.0            # ... of at most this size (the device tool brings back 16 MiB a file)
    keep_best: bool = False            # export the weights only when the validation NLL is the lowest so far
    # a model folder an earlier window exported (same shape and data): its weights are the start, its tokens
    # seen and validation NLL carry on, so lent GPU windows add up (the optimizer starts afresh, warmed up again)
    init_dir: str = ""
    threads: int | None = None

    def recall(self) -> dict:
        """The data module's ``recall`` options (`musictx.training.recall_windows.RecallCurriculum`)."""
        return {"prob": self.recall_prob, "repeats": self.recall_repeats, "min_len": self.recall_min_len,
                "max_len": self.recall_max_len, "loop_prob": self.recall_loop_prob}

    def net_config(self, vocab_size: int) -> dict:
        """The net's config as the model store builds it (conf/model/<net>.yaml's keys)."""
        common = {"name": self.net, "vocab_size": vocab_size, "n_layers": self.n_layers, "d_model": self.d_model,
                  "dropout": self.dropout}
        if self.net == "lstm":  # Performance RNN's shape: the embedding and the hidden state of one size
            return {**common, "hidden_size": self.d_model}
        attention = {"n_heads": self.n_heads, "d_ff": self.d_ff, "max_seq_len": self.seq_len,
                     "gradient_checkpointing": False}
        if self.net == "transformer":
            return {**common, **attention, "positions": "sinusoidal"}
        if self.net != "music_transformer":
            raise ValueError(f"--net {self.net}: one of music_transformer, transformer, lstm")
        return {**common, **attention, "max_rel_dist": self.max_rel_dist, "attn_impl": self.attn_impl,
                "attn_block_size": self.attn_block_size}


WARMUP_MAX_FRACTION = 0.1  # a slow card must not spend its whole budget warming up


def cosine_multiplier(step: int, fraction: float, warmup_steps: int, min_ratio: float) -> float:
    """Linear warm-up over ``warmup_steps`` updates or the first tenth of the time budget, whichever ends
    first, then half a cosine over the fraction of the time budget used, from 1 to ``min_ratio``."""
    warm = min(1.0, max(step / warmup_steps, fraction / WARMUP_MAX_FRACTION)) if warmup_steps > 0 else 1.0
    fraction = min(max(fraction, 0.0), 1.0)
    return warm * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * fraction)))


class WallClockCosine(L.Callback):
    """Sets every parameter group's lr before each update from the time used (the module's own LambdaLR is
    constant: it puts the base lr back after each step, and this sets it again before the next)."""

    def __init__(self, clock: TrainClock, warmup_steps: int, min_ratio: float, max_steps: int = -1):
        self.clock, self.warmup_steps, self.min_ratio, self.max_steps = clock, warmup_steps, min_ratio, max_steps
        self.lr = 0.0

    def progress(self, step: int) -> float:
        """The share of the run done at update ``step``: of the time budget, or of ``max_steps`` where they
        run out first."""
        steps = step / self.max_steps if self.max_steps > 0 else 0.0
        return max(self.clock.fraction(), steps)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        step = trainer.global_step + 1
        mult = cosine_multiplier(step, self.progress(step), self.warmup_steps, self.min_ratio)
        for opt in trainer.optimizers:
            for group in opt.param_groups:
                group["lr"] = group.get("initial_lr", group["lr"]) * mult
        self.lr = trainer.optimizers[0].param_groups[0]["lr"]


class TrainClock(L.Callback):
    """Wall-clock seconds since the first training batch; asks Lightning to stop once they pass the budget."""

    def __init__(self, budget_s: float):
        self.budget_s, self.t0 = budget_s, None

    def elapsed(self) -> float:
        return 0.0 if self.t0 is None else time.monotonic() - self.t0

    def fraction(self) -> float:
        return self.elapsed() / self.budget_s if self.budget_s > 0 else 1.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.t0 is None:
            self.t0 = time.monotonic()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.elapsed() >= self.budget_s:
            trainer.should_stop = True


class MinuteExport(L.Callback):
    """Every ``every_s`` seconds and at the end: validation NLL on fixed windows, the fp16 weights in shards
    (out/model/), and out/train.json with the options and the history."""

    def __init__(self, opts: PlainTrainOptions, clock: TrainClock, schedule: WallClockCosine, tokenizer):
        self.opts, self.clock, self.schedule, self.tokenizer = opts, clock, schedule, tokenizer
        self.out = Path(opts.out_dir)
        self.history: list[dict] = []
        self.last_export = 0.0
        self.loss_sum, self.loss_n, self.tokens = None, 0, 0
        self.val = None  # (x, y) of the fixed validation windows, made at the first export
        self.before = {"tokens_seen": 0, "val_nll": math.inf, "windows": 0}  # what earlier windows did (init_dir)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        self.loss_sum = loss.detach().float() if self.loss_sum is None else self.loss_sum + loss.detach().float()
        self.loss_n += 1
        self.tokens += batch[0].numel()
        if self.clock.elapsed() - self.last_export >= self.opts.every_s:
            self.export(trainer, pl_module)

    def on_train_start(self, trainer, pl_module) -> None:
        """Started from earlier weights (init_dir): the bar that keep_best holds new exports to is what those
        weights score on this run's own windows, not the figure their record carries, which may come from
        other windows or data (a shipped model's card)."""
        if self.opts.init_dir:
            recorded, self.before["val_nll"] = self.before["val_nll"], self.validate(pl_module)
            self.before["recorded_val_nll"] = recorded
            print(f"[plain] the starting weights: val {self.before['val_nll']:.4f} on this run's windows (their "
                  f"record: {recorded:.4f})", flush=True)

    def on_train_end(self, trainer, pl_module) -> None:
        if self.history and self.history[-1]["step"] == trainer.global_step:  # exported at this very step
            self.write(pl_module, final=True)
        else:
            self.export(trainer, pl_module, final=True)

    def _val_batches(self, device):
        if self.val is None:
            windows = FixedWindows(self.opts.data_dir, "validation", self.opts.seq_len, self.tokenizer)
            n = min(self.opts.val_windows, len(windows))
            picks = [round(k * (len(windows) - 1) / max(n - 1, 1)) for k in range(n)]
            xs, ys = zip(*(windows[i] for i in picks), strict=True)
            self.val = torch.stack(xs), torch.stack(ys)
        x, y = self.val
        bs = self.opts.batch_size
        return [(x[i:i + bs].to(device), y[i:i + bs].to(device)) for i in range(0, len(x), bs)]

    @torch.no_grad()
    def validate(self, pl_module) -> float:
        nll = count = 0.0
        dtype = torch.bfloat16 if "bf16" in self.opts.precision else torch.float16
        autocast = "16" in self.opts.precision and self.opts.precision != "32-true"
        with eval_mode(pl_module):  # each module's own train flag back after
            for x, y in self._val_batches(pl_module.device):
                with torch.autocast(pl_module.device.type, dtype=dtype, enabled=autocast):
                    s, _, c = pl_module.loss_terms(x, y)
                nll, count = nll + float(s), count + float(c)
        return nll / max(count, 1.0)

    def export(self, trainer, pl_module, final: bool = False) -> None:
        t0 = time.monotonic()
        elapsed = self.clock.elapsed()
        row = {"step": trainer.global_step, "train_s": round(elapsed, 1),
               "train_loss": float(self.loss_sum) / self.loss_n if self.loss_n else None,
               "lr": self.schedule.lr, "tokens_per_s": round(self.tokens / elapsed) if elapsed else None,
               "tokens_seen": self.before["tokens_seen"] + self.tokens, "val_nll": self.validate(pl_module)}
        if torch.cuda.is_available() and pl_module.device.type == "cuda":
            row["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        info = {"global_step": trainer.global_step, "val_nll": row["val_nll"], "data": self.opts.data_dir,
                "tokens_seen": row["tokens_seen"], "windows": self.before["windows"] + 1,
                "recipe": f"musictx.training.plain {json.dumps(dataclasses.asdict(self.opts))}"}
        # the best so far counts the earlier windows' too: a window that does not improve keeps their weights
        best = min([r["val_nll"] for r in self.history] + [self.before["val_nll"]])
        row["saved"] = not self.opts.keep_best or row["val_nll"] < best
        if row["saved"]:  # with keep_best, the folder keeps the export with the lowest validation NLL so far
            folder = save_model_folder(pl_module.net, self.tokenizer, self.out / "model", "float16", info=info,
                                       max_shard_mb=self.opts.max_shard_mb)
            (folder / "tokenizer.json").unlink(missing_ok=True)  # config.json holds it; the files back are few
        row["export_s"] = round(time.monotonic() - t0, 2)
        self.history.append(row)
        self.loss_sum, self.loss_n = None, 0
        self.last_export = self.clock.elapsed()
        self.write(pl_module, final)
        print(f"[plain] step {row['step']} {row['train_s']:.0f} s: train {row['train_loss']}, val {row['val_nll']:.4f}"
              f", lr {row['lr']:.2e}, {row['tokens_per_s']} tokens/s, export {row['export_s']} s", flush=True)


    def write(self, pl_module, final: bool) -> None:
        record = {"options": dataclasses.asdict(self.opts), "final": final, "before": self.before,
                  "params": sum(p.numel() for p in pl_module.net.parameters()),
                  "device": device_name(pl_module.device), "history": self.history}
        write_json(self.out / "train.json", record, what="training")
        if self.opts.bundle:  # the few files a GPU call brings back (several runs side by side)
            write_bundle(self.out, Path(self.opts.bundle), self.opts.bundle_mb)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    return f"cpu (torch {torch.__version__})"


def build(opts: PlainTrainOptions) -> tuple[MusicDataModule, MusicLitModule, L.Trainer, MinuteExport]:
    """The DataModule, the LightningModule, the Trainer and its export callback of ``opts``."""
    dm = MusicDataModule(opts.data_dir, seq_len=opts.seq_len, batch_size=opts.batch_size,
                         num_workers=opts.num_workers, seed=opts.seed, max_transpose=opts.max_transpose,
                         stretch_range=(1.0, 1.0), pin_memory=opts.accelerator == "gpu", recall=opts.recall())
    optimizer = partial(torch.optim.AdamW, lr=opts.lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=opts.weight_decay)
    module = MusicLitModule(opts.net_config(dm.vocab_size), dm.tokenizer.to_dict(), optimizer=optimizer,
                            scheduler={"name": "constant"}, compile=opts.compile)
    clock = TrainClock(opts.budget_s)
    schedule = WallClockCosine(clock, opts.warmup_steps, opts.min_ratio, opts.max_steps)
    export = MinuteExport(opts, clock, schedule, dm.tokenizer)
    if opts.init_dir:
        export.before = start_from(module.net, opts.init_dir)
    Path(opts.run_dir).mkdir(parents=True, exist_ok=True)
    trainer = L.Trainer(accelerator=opts.accelerator, devices=1, precision=opts.precision, max_steps=opts.max_steps,
                        max_epochs=None if opts.max_steps > 0 else 10_000, limit_val_batches=0,
                        num_sanity_val_steps=0, gradient_clip_val=1.0, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False,  # LastCheckpoint: at the end
                        use_distributed_sampler=False, default_root_dir=opts.run_dir,
                        callbacks=[clock, schedule, export, LastCheckpoint(Path(opts.run_dir) / "checkpoints")],
                        plugins=[AtomicCheckpointIO()])
    return dm, module, trainer, export


def start_from(net: torch.nn.Module, folder: str) -> dict:
    """Load an earlier window's exported weights (``folder``: config.json and its shards) into ``net``, whose
    shape must be theirs; what that window's record says it had done (tokens seen, validation NLL, windows)."""
    earlier, _, meta = load_model_folder(folder)
    mine, theirs = net.state_dict(), earlier.state_dict()
    if mine.keys() != theirs.keys() or any(mine[k].shape != theirs[k].shape for k in mine):
        raise ValueError(f"--init-dir {folder}: its model ({meta['model']['config']}) is not this run's shape")
    net.load_state_dict(theirs)
    info = meta["info"]
    return {"tokens_seen": int(info.get("tokens_seen", 0)), "val_nll": float(info.get("val_nll", math.inf)),
            "windows": int(info.get("windows", 1))}


def train(opts: PlainTrainOptions) -> list[dict]:
    """Train until the budget (or ``max_steps``) is spent; returns the export history."""
    if opts.threads:
        torch.set_num_threads(opts.threads)
    if opts.accelerator == "gpu":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    L.seed_everything(opts.seed, workers=True)
    Path(opts.out_dir).mkdir(parents=True, exist_ok=True)
    dm, module, trainer, export = build(opts)
    print(f"[plain] {sum(p.numel() for p in module.net.parameters()):,} parameters, vocab {dm.vocab_size}, "
          f"windows of {opts.seq_len} x {opts.batch_size} from {opts.data_dir}, budget {opts.budget_s:.0f} s",
          flush=True)
    trainer.fit(module, datamodule=dm)
    return export.history


def parse(argv: list[str] | None = None) -> PlainTrainOptions:
    """Options from ``--data``, ``--out`` and one ``--<field>`` per other field of `PlainTrainOptions`."""
    p = argparse.ArgumentParser(prog="python -m musictx.training.plain", description=__doc__.splitlines()[0])
    p.add_argument("--data", dest="data_dir", required=True)
    p.add_argument("--out", dest="out_dir", required=True)
    for f in dataclasses.fields(PlainTrainOptions):
        if f.name in ("data_dir", "out_dir"):
            continue
        kind = {"int": int, "float": float, "str": str, "bool": lambda s: s.lower() in ("1", "true", "yes")}
        name = str(f.type).split(" |")[0]
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=kind.get(name, str), default=f.default)
    return PlainTrainOptions(**vars(p.parse_args(argv)))


def main(argv: list[str] | None = None) -> int:
    train(parse(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
