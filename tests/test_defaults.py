"""Each default is written once: the sampling defaults in `SamplingOptions` (tests/test_sampling_options.py holds
the YAML files to that), nowhere in the code that samples; the model's context and the efficient kernel's query
block in `musictx.models`, which the YAML a user overrides states with the same value."""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path

import torch
import yaml

from musictx.decoding.decoding_options import DecodingOptions
from musictx.decoding.hooks.bar_repeats import MAX_REPEATS
from musictx.decoding.hooks.recall_guidance import RecallGuidance
from musictx.decoding.hooks.registry import HOOKS
from musictx.decoding.sampling import SpecialIds, generate
from musictx.decoding.sampling_options import SamplingOptions
from musictx.generation.generate_options import GenerateOptions
from musictx.io.tokenizer import EventTokenizer
from musictx.models import MusicTransformer, VanillaTransformer
from musictx.models.attention import BLOCK_SIZE, RelativeSelfAttention
from musictx.models.transformer import CONTEXT
from musictx.paths import CONF_DIR
from musictx.tasks.continue_metrical import sample_bars
from musictx.tasks.continue_seed import sample_continuations
from musictx.training.data import MusicDataModule

from .gen_fixtures import tiny_net
from .test_recall_guidance import guided

# the decoding settings, and the hooks' names given flat (each hook's options live in its own file)
SAMPLING = {f.name for f in fields(DecodingOptions)} | {"best_of"} | {spec.name for spec in HOOKS}
TOK = EventTokenizer()


def _defaults(fn) -> dict:
    return {name: p.default for name, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


def test_the_sampling_code_takes_the_options_object_and_restates_none_of_its_defaults():
    assert set(inspect.signature(generate).parameters) == {"net", "tokenizer", "prompt", "opts", "hooks",
                                                           "max_new_tokens"}
    for fn in (generate, sample_continuations, sample_bars, RecallGuidance):
        assert not SAMPLING & set(_defaults(fn)), fn  # no sampling option beside the options object


def test_default_options_sample_what_the_defaults_written_out_sample():
    """The numbers a reader finds in sampling_options.py are the ones generate() and its hooks use when given nothing
    else, recall guidance included (top_p 0.95 bounds its plausible set, recall_local 64 its recent branch)."""
    net = tiny_net("music_transformer", max_seq_len=128)  # longer than recall_local: guidance acts
    prompt = torch.randint(0, TOK.pad_id, (2, 100), generator=torch.Generator().manual_seed(0))  # it slides
    written_out = SamplingOptions(temperature=1.0, top_k=None, top_p=0.95, seed=0, use_cache=True, slide=None,
                                  keep_seed=512, hooks={"recall_guidance": {"strength": 1.0, "local": 64,
                                                                            "against": "recent", "draws": "pitch"}})
    runs = [generate(net, SpecialIds(pad_id=TOK.pad_id), prompt, opts, guided(opts), max_new_tokens=40)
            for opts in (SamplingOptions(), written_out)]
    assert torch.equal(runs[0], runs[1])
    # the premise: the defaults are not inert here
    guided_off = SamplingOptions(hooks={"recall_guidance": {"strength": 0.0}})
    assert not torch.equal(generate(net, SpecialIds(pad_id=TOK.pad_id), prompt, guided_off, guided(guided_off),
                                    max_new_tokens=40),
                           runs[0])


def _yaml(name: str) -> dict:
    return yaml.safe_load((Path(CONF_DIR) / f"{name}.yaml").read_text())


def test_the_bar_repeat_limit_is_written_once_in_the_code():
    assert GenerateOptions().hooks.bar_repeats.max_repeats == MAX_REPEATS
    assert "max_bar_repeats" not in _yaml("generate") and "max_bar_repeats" not in _defaults(sample_bars)


def test_context_and_query_block_are_written_once_in_the_code_and_stated_alike_in_the_yaml():
    assert _defaults(MusicTransformer)["max_seq_len"] == _defaults(VanillaTransformer)["max_seq_len"] == CONTEXT
    assert _defaults(MusicDataModule)["seq_len"] == CONTEXT == _yaml("data/default")["seq_len"]
    assert _defaults(MusicTransformer)["attn_block_size"] == _defaults(RelativeSelfAttention)["block_size"]
    assert _yaml("model/music_transformer")["net"]["attn_block_size"] == BLOCK_SIZE
    for overlay in ("music_transformer_piano", "music_transformer_pop"):  # they inherit it: no second number
        assert "attn_block_size" not in _yaml(f"model/{overlay}")["net"], overlay
