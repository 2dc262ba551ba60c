"""The sampler's other truncations and temperatures: min-p, locally typical sampling and a temperature per kind
of token, on hand-made distributions and through `generate` with a real tokenizer."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from musictx.decoding.errors import GenerateError
from musictx.decoding.filters import kind_temperatures, min_p_filter, sample_next, typical_filter
from musictx.decoding.sampling import SpecialIds, generate
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.tokenizer import EventTokenizer

from .gen_fixtures import tiny_net

TOK = EventTokenizer()
PLAIN = SamplingOptions(top_p=None, hooks={"recall_guidance": {"strength": 0.0}})


def kept(logits: torch.Tensor) -> list[int]:
    return torch.isfinite(logits).nonzero().flatten().tolist()


def test_min_p_keeps_the_ids_at_least_that_share_of_the_likeliest():
    logits = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    assert kept(min_p_filter(logits, 0.2)) == [0, 1, 2]  # 0.05 < 0.2 * 0.5
    assert kept(min_p_filter(logits, 0.5)) == [0, 1]
    assert kept(min_p_filter(logits, 1.0)) == [0]
    flat = torch.zeros(2, 6)  # unsure: every id stays
    assert kept(min_p_filter(flat, 0.9)[0]) == list(range(6))
    kept_values = min_p_filter(logits, 0.2)[[0, 1, 2]]
    assert torch.equal(kept_values, logits[[0, 1, 2]])  # what stays is not changed
    with pytest.raises(ValueError, match="min_p"):
        min_p_filter(logits, 1.5)


def test_typical_sampling_keeps_the_ids_nearest_the_entropy_first():
    probs = torch.tensor([0.6, 0.25, 0.1, 0.05])
    entropy = float(-(probs * probs.log()).sum())  # 1.074 nats
    # surprisals 0.51, 1.39, 2.30, 3.00: nearest the entropy come 1 (0.31 away), then 0 (0.56), 2, 3
    order = (-probs.log() - entropy).abs().argsort().tolist()
    assert order == [1, 0, 2, 3]
    logits = probs.log()
    assert kept(typical_filter(logits, 0.2)) == [1]  # 0.25 alone reaches 0.2
    assert kept(typical_filter(logits, 0.8)) == [0, 1]  # 0.25 + 0.6 reach 0.8
    assert kept(typical_filter(logits, 0.9)) == [0, 1, 2]
    assert torch.equal(typical_filter(logits, 1.0), logits)
    # ids already out (-inf) stay out and count nothing
    cut = logits.clone()
    cut[3] = float("-inf")
    assert 3 not in kept(typical_filter(cut, 0.99))
    with pytest.raises(ValueError):
        typical_filter(logits, 0.0)


def test_sample_next_with_min_p_and_typical_draws_from_what_they_keep():
    probs = torch.tensor([0.15, 0.5, 0.05, 0.3])
    logits = probs.log().expand(40_000, -1)
    gen = torch.Generator().manual_seed(0)
    freq = torch.bincount(sample_next(logits, min_p=0.2, generator=gen), minlength=4).float() / len(logits)
    assert freq[2] == 0  # 0.05 < 0.2 * 0.5: never drawn
    torch.testing.assert_close(freq[[0, 1, 3]], probs[[0, 1, 3]] / 0.95, atol=0.01, rtol=0)
    # typical at 0.5: 0.3 (surprisal 1.20, entropy 1.14) then 0.15 (1.90) or 0.5 (0.69): 0.3 + 0.5 -> ids 1, 3
    freq = torch.bincount(sample_next(logits, typical_p=0.5, generator=gen), minlength=4).float() / len(logits)
    assert freq[0] == 0 and freq[2] == 0
    torch.testing.assert_close(freq[[1, 3]], torch.tensor([0.5, 0.3]) / 0.8, atol=0.01, rtol=0)


def test_a_temperature_per_kind_scales_only_that_kinds_ids():
    factors = kind_temperatures(TOK, {"VELOCITY": 2.0, "TIME_SHIFT": 0.5})  # (V,)
    kinds = TOK.type_of
    assert factors.shape == (TOK.vocab_size,)
    assert torch.all(factors[torch.from_numpy(kinds == "VELOCITY")] == 2.0)
    assert torch.all(factors[torch.from_numpy(kinds == "TIME_SHIFT")] == 0.5)
    assert torch.all(factors[torch.from_numpy(np.isin(kinds, ["NOTE_ON", "NOTE_OFF"]))] == 1.0)
    assert kind_temperatures(TOK, None) is None
    with pytest.raises(ValueError, match="no token kind 'Pich'.*its kinds: EOS, NOTE_OFF, NOTE_ON"):
        kind_temperatures(TOK, {"Pich": 1.2})


def test_generate_with_one_temperature_for_every_kind_is_that_temperature():
    """A factor of 0.5 on every kind draws what temperature 0.5 draws (the same noise); a factor on one kind
    changes the samples."""
    net = tiny_net("music_transformer")
    prompt = torch.full((2, 4), 62)
    every = {kind: 0.5 for kind in set(TOK.type_of.tolist())}
    pad = SpecialIds(pad_id=TOK.pad_id)

    def run(**options):
        return generate(net, TOK if "temperature_by_kind" in options else pad, prompt, replace(PLAIN, **options),
                        [], max_new_tokens=60)

    by_kind = run(temperature_by_kind=every)
    assert torch.equal(by_kind, run(temperature=0.5))
    assert not torch.equal(run(temperature_by_kind={"NOTE_ON": 3.0}), run())


@pytest.mark.parametrize("options, message", [
    ({"min_p": 1.5}, "min_p must be in"),
    ({"typical_p": 0.0}, "typical_p must be in"),
    ({"temperature_by_kind": {"Pitch": 0}}, "temperature_by_kind.Pitch must be > 0"),
    ({"temperature_by_kind": {"Pitch": float("nan")}}, "temperature_by_kind.Pitch must be a finite number"),
    ({"temperature_by_kind": 1.2}, "temperature_by_kind must be a mapping"),
])
def test_bad_truncation_settings_are_named(options, message):
    with pytest.raises(GenerateError, match=message):
        SamplingOptions(**options).check_sampling()


def test_temperature_by_kind_from_yaml_becomes_a_plain_dict():
    from omegaconf import OmegaConf

    opts = SamplingOptions(temperature_by_kind=OmegaConf.create({"Pitch": 1.2, "Position": 1}))
    opts.check_sampling()
    assert opts.temperature_by_kind == {"Pitch": 1.2, "Position": 1.0}
    assert type(opts.temperature_by_kind) is dict
