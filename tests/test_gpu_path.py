"""The GPU configuration's pieces, run on CPU through the real configs and the real Lightning Trainer:
the efficient attention kernel end to end in fp32 and bf16-mixed, bf16-mixed for every model, and
torch.compile (inductor) of the Music Transformer with no graph break. DDP is in tests/test_ddp.py.

Windows are longer than the attention block (64 > 16 tokens): shorter inputs take the skew path.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir

from musictx.commands.train_objects import build
from musictx.models import build_model
from musictx.models.attention import RelativeSelfAttention
from musictx.paths import CONF_DIR

STEPS, VAL_BATCHES, LAYERS = 3, 2, 2
SHRINK = ["experiment=tiny", "logger=none", "data.seq_len=64", "data.batch_size=4", "model.net.d_model=32",
          f"model.net.n_layers={LAYERS}", f"trainer.max_steps={STEPS}", f"trainer.val_check_interval={STEPS}",
          f"trainer.limit_val_batches={VAL_BATCHES}", "++trainer.enable_progress_bar=false",
          "++trainer.enable_model_summary=false", "~callbacks.progress_bar"]
TRANSFORMER = ["model.net.n_heads=2", "model.net.d_ff=64", "model.net.dropout=0.1"]
RELATIVE = [*TRANSFORMER, "model.net.attn_impl=efficient", "model.net.attn_block_size=16"]
OPS = ("musictx::relative_attention_v4", "musictx::relative_attention_v4_backward")


def compose_train(data_dir: Path, out_dir: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=[*SHRINK, f"data.dir={data_dir}", f"paths.output_dir={out_dir}",
                                           *overrides])


def autocast_spy(module: torch.nn.Module, seen: list) -> None:
    """Record, on each call of `module` in training, whether CPU autocast is on, its dtype, and the
    module's input and output dtypes."""
    def hook(mod, inputs, output):
        if mod.training:
            seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), inputs[0].dtype,
                         output.dtype))

    module.register_forward_hook(hook)


def fit_profiled(cfg) -> tuple:
    """Fit under the profiler: (module, trainer, calls per custom attention op)."""
    L.seed_everything(cfg.seed)
    datamodule, module, trainer = build(cfg)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        trainer.fit(module, datamodule=datamodule)
    calls = Counter(e.name for e in prof.events() if e.name in OPS)
    return module, trainer, calls


def assert_trained(trainer: L.Trainer) -> None:
    assert trainer.global_step == STEPS and trainer.num_val_batches == [VAL_BATCHES]
    metrics = trainer.callback_metrics
    assert torch.isfinite(metrics["val/loss"]) and torch.isfinite(metrics["train/loss"])


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_efficient_kernel_trains_through_lightning(precision, prepared_dir, tmp_path):
    cfg = compose_train(prepared_dir, tmp_path, "model=music_transformer", *RELATIVE, f"trainer.precision={precision}")
    L.seed_everything(cfg.seed)
    seen_qkv, seen_proj = [], []
    datamodule, module, trainer = build(cfg)
    attn = module.net.blocks[0].attn
    autocast_spy(attn.qkv, seen_qkv)  # its output holds the q, k, v the kernel gets
    autocast_spy(attn.proj, seen_proj)  # its input is the kernel's output
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        trainer.fit(module, datamodule=datamodule)
    calls = Counter(e.name for e in prof.events() if e.name in OPS)
    assert_trained(trainer)
    # every layer of every training step and validation batch ran the custom op, and its backward
    assert calls == {OPS[0]: LAYERS * (STEPS + VAL_BATCHES), OPS[1]: LAYERS * STEPS}
    bf16 = precision == "bf16-mixed"
    low = torch.bfloat16 if bf16 else torch.float32
    assert type(trainer.precision_plugin).__name__ == ("MixedPrecision" if bf16 else "Precision")
    assert len(seen_qkv) == len(seen_proj) == STEPS
    for on, dtype, _, qkv_out in seen_qkv:
        assert on == bf16 and (dtype == torch.bfloat16 or not bf16) and qkv_out == low
    assert all(kernel_out == low for *_, kernel_out, _ in seen_proj)  # the kernel answers in its inputs' dtype


@pytest.mark.parametrize("model", ["transformer", "lstm"])
def test_bf16_mixed_trains_the_baselines(model, prepared_dir, tmp_path):
    """bf16 autocast reaches the nets (the Music Transformer's run is the test above)."""
    extra = TRANSFORMER if model == "transformer" else ["model.net.dropout=0.1"]
    cfg = compose_train(prepared_dir, tmp_path, f"model={model}", *extra, "trainer.precision=bf16-mixed")
    L.seed_everything(cfg.seed)
    seen = []
    datamodule, module, trainer = build(cfg)
    autocast_spy(module.net.head, seen)
    trainer.fit(module, datamodule=datamodule)
    assert_trained(trainer)
    # the head's input is a LayerNorm's output for the transformer (fp32 under autocast); its output is bf16
    assert len(seen) == STEPS and all((on, dtype, out) == (True, torch.bfloat16, torch.bfloat16)
                                      for on, dtype, _, out in seen), seen


@pytest.mark.slow  # compiling with inductor takes minutes on 2 cores; torch._dynamo.explain below runs by default
def test_compiled_music_transformer_trains_through_lightning(prepared_dir, tmp_path):
    """model.compile=true with the default (inductor) backend, under the GPU config's bf16-mixed."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    cfg = compose_train(prepared_dir, tmp_path, "model=music_transformer", *RELATIVE, "model.compile=true",
                        "trainer.precision=bf16-mixed")
    assert "backend" not in cfg.model.compile_kwargs  # inductor
    try:
        L.seed_everything(cfg.seed)
        datamodule, module, trainer = build(cfg)
        trainer.fit(module, datamodule=datamodule)
        assert_trained(trainer)
        assert module.net._compiled_call_impl is not None and sum(counters["inductor"].values()) > 0
        assert counters["stats"]["unique_graphs"] >= 1 and not counters["graph_break"], dict(counters["graph_break"])
        # One more training step of the compiled net, as Lightning ran them (compiling traced the op, so
        # the profile of fit counts tracing calls too): the compiled graph calls the kernel in every layer.
        graphs = counters["stats"]["unique_graphs"]
        x, _ = next(iter(datamodule.train_dataloader()))
        with trainer.precision_plugin.forward_context(), torch.profiler.profile() as prof:  # Lightning's autocast
            module.net.train()(x).float().mean().backward()
        names = Counter(e.name for e in prof.events())
        assert counters["stats"]["unique_graphs"] == graphs, "the extra step recompiled"
        assert names[OPS[0]] == names[OPS[1]] == LAYERS and any(n.startswith("Torch-Compiled Region") for n in names)
    finally:
        torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_no_graph_break_in_the_model_or_the_attention_layer(dtype):
    torch.manual_seed(0)
    net = build_model("music_transformer", 64, d_model=32, n_layers=2, n_heads=2, d_ff=64, dropout=0.1,
                      max_seq_len=64, attn_block_size=16).train()
    ids = torch.randint(0, 64, (2, 64))
    layer = RelativeSelfAttention(32, 2, 20, dropout=0.1, block_size=16).train()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        for fn, arg in ((net, ids), (layer, torch.randn(2, 64, 32))):
            explained = torch._dynamo.explain(fn)(arg)
            assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
            targets = [n.target for n in explained.graphs[0].graph.nodes]
            assert torch.ops.musictx.relative_attention_v4.default in targets  # one opaque call, in the graph
    torch._dynamo.reset()


def test_compile_kwargs_use_atens_rng_on_cpu_only():
    from musictx.training.lit_module import compile_kwargs_for

    assert compile_kwargs_for({}, "cpu") == {"options": {"fallback_random": True}}
    assert compile_kwargs_for({"options": {"fallback_random": False}}, "cpu")["options"] == {"fallback_random": False}
    for kwargs, device in (({}, "cuda"), ({"backend": "eager"}, "cpu"), ({"mode": "max-autotune"}, "cpu")):
        assert compile_kwargs_for(kwargs, device) == kwargs
