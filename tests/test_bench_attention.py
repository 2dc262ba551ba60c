"""`python -m bench attention`: the whole table from one run, cells skipped with a reason, and the
FlexAttention anchor computing the model's relative attention."""

from __future__ import annotations

import pytest
import torch

from bench.attention import _parse, format_table, goal_lines, main, skip_reason, summarise
from musictx.models.attention import RelativeSelfAttention


@pytest.mark.slow
def test_benchmark_prints_every_cell_of_a_small_table(capsys):
    main(["--lengths", "32,64", "--impls", "naive,skew,efficient,sdpa", "--rounds", "1", "--repeats", "1",
          "--d-model", "16", "--n-heads", "2", "--block-size", "16"])
    out = capsys.readouterr().out
    for length in (32, 64):
        for impl in ("naive", "skew", "efficient", "sdpa"):
            assert f"| {length} | {impl} |" in out
    assert "failed" not in out and "| 64 | sdpa | " in out and "1.00x" in out


def test_cells_that_would_not_fit_are_skipped_with_a_reason():
    args = _parse([])
    assert "GiB" in skip_reason("naive", 8192, args) and "GiB" in skip_reason("skew", 65536, args)
    assert skip_reason("efficient", 8192, args) is None and skip_reason("sdpa", 8192, args) is None


def test_ratios_are_medians_of_within_round_ratios():
    def cell(scale):
        return {k: scale for k in ("cold_s", "cold_rss_mib", "warm_ms", "fwd_ms", "peak_mib")} | {"fwd_only": False}

    # round 2 ran under load: both cells slow, their ratio unchanged
    rounds = [{("efficient", 2048): cell(3.0), ("sdpa", 2048): cell(2.0)},
              {("efficient", 2048): cell(6.0), ("sdpa", 2048): cell(4.0)},
              {("efficient", 2048): {"error": "rc 1"}, ("sdpa", 2048): cell(2.0)}]
    s = summarise(rounds, "efficient", 2048)
    assert s["warm_ms_x"] == pytest.approx(1.5) and s["rounds"] == 2
    table = format_table({("efficient", 2048): s, ("naive", 2048): {"skipped": "skipped: needs ~32 GiB"}})
    assert "| 2048 | efficient | 4.50 |" in table and "skipped: needs ~32 GiB" in table
    assert any("warm time at L=2048: 1.50x SDPA (goal <= 1.3x): MISSED" in line for line in goal_lines(
        {("efficient", 2048): s}))


def test_flex_anchor_computes_the_models_relative_attention():
    """The FlexAttention layer (run eagerly here: compiling takes a while) gives the relative layer's
    output, clipped table included (max_rel_dist 20 < 64 tokens)."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    from torch.nn.attention.flex_attention import flex_attention

    from bench.attention_cases import build_layer

    torch.manual_seed(0)
    flex = build_layer("flex", 32, 2, 64, 20, 16)
    flex.flex = flex_attention  # eager
    reference = RelativeSelfAttention(32, 2, 20, impl="naive")
    reference.load_state_dict(flex.state_dict())
    x = torch.randn(2, 64, 32)
    with torch.no_grad():  # flex has no backward on CPU
        torch.testing.assert_close(flex(x), reference(x), rtol=1e-4, atol=1e-5)
