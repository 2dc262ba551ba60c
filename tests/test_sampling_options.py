"""One set of sampling defaults: the decoding settings (`DecodingOptions`) and each hook's options (in the hook's
own file, gathered as `HookOptions`). The YAML files refer to them instead of repeating the numbers, and
musictx-generate, musictx-evaluate (through Hydra or from Python), the app and its page all start there."""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path

import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from musictx.app.core import Settings
from musictx.console.config_help import key_help  # importing it registers the ${sampling:...} resolver
from musictx.decoding.decoding_options import DecodingOptions
from musictx.decoding.hooks.registry import HOOKS
from musictx.decoding.option_fields import help_of
from musictx.decoding.sampling_options import SamplingOptions, reference
from musictx.evaluation.continuation import continuation_options
from musictx.evaluation.motif import motif_sampling
from musictx.evaluation.run import evaluation_options
from musictx.generation.generate_options import GenerateOptions
from musictx.paths import CONF_DIR

SAMPLING = [f.name for f in fields(SamplingOptions) if f.name != "hooks"]  # the decoding settings and best_of


def raw(name: str) -> dict:
    """A YAML file of conf/ as written (references unresolved)."""
    return yaml.safe_load((Path(CONF_DIR) / f"{name}.yaml").read_text())


def blocks_with_sampling_keys() -> list[tuple[str, dict]]:
    """(where, block) of every block in conf/ that sets sampling options: generate.yaml's top level and every
    ``continuation:`` or ``motif:`` block (evaluate.yaml's, an experiment's ``evaluate:``)."""
    found = [("generate.yaml", raw("generate"))]

    def walk(where: str, node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("continuation", "motif") and isinstance(value, dict):
                    found.append((f"{where}:{key}", value))
                walk(f"{where}:{key}", value)

    for path in sorted(Path(CONF_DIR).rglob("*.yaml")):
        walk(str(path.relative_to(CONF_DIR)), yaml.safe_load(path.read_text()))
    return found


# The one setting evaluations choose for themselves: they measure the model's own distribution, where
# generation samples with recall guidance (its default, in the hook's options).
MEASURED = {"recall_guidance": {"strength": 0.0}}


def test_no_config_file_writes_a_sampling_default():
    blocks = blocks_with_sampling_keys()
    assert {where for where, _ in blocks} >= {"generate.yaml", "evaluate.yaml:continuation", "evaluate.yaml:motif"}
    for where, block in blocks:
        assert not set(block) & {spec.name for spec in HOOKS}, f"{where}: a hook's name given flat"
        for name in SAMPLING:
            if name in block:
                assert block[name] == reference(name), f"{where}: {name}: {block[name]!r} repeats a default"
        if "hooks" in block:  # a block's own hook settings: only the measured distribution's
            assert where.startswith("evaluate.yaml") and block["hooks"] == MEASURED, where
            assert SamplingOptions().hooks.recall_guidance.strength != 0.0


def test_generate_yaml_lists_every_option_and_composes_to_the_defaults(tmp_path):
    written = raw("generate")
    # tokenizer: a check for scripts only; Hydra reads tokenizer= as conf/tokenizer/ (musictx-generate refuses it)
    assert set(written) - {"defaults", "hydra"} == {f.name for f in fields(GenerateOptions)} - {"hooks", "tokenizer"}
    assert {"hooks": "shipped"} in written["defaults"]  # the hooks' options: their own group, from their files
    defaults = GenerateOptions()
    for key in set(written) - {"defaults", "hydra", "checkpoint", "output_dir", *SAMPLING}:
        assert written[key] == getattr(defaults, key), key
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("generate", overrides=["checkpoint=x.ckpt", f"output_dir={tmp_path}", "top_k=5"])
        echo = compose("generate", overrides=["hooks.bass_lean.strength=1.3", "hooks.bar_repeats.max_repeats=null",
                                              "output_dir=x"])
    opts = GenerateOptions.from_mapping(OmegaConf.to_container(cfg, resolve=True))
    assert opts == GenerateOptions(checkpoint="x.ckpt", output_dir=str(tmp_path), top_k=5)
    echoed = GenerateOptions.from_mapping(OmegaConf.to_container(echo, resolve=True))
    assert echoed.hooks.bass_lean.strength == 1.3 and echoed.hooks.bar_repeats.max_repeats is None
    assert echoed.hooks.motif_echo == opts.hooks.motif_echo  # the other groups as shipped


def test_evaluate_blocks_sample_with_the_defaults_through_hydra_and_from_python():
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("evaluate", overrides=["continuation.top_p=0.5"])
    block = {name: OmegaConf.to_container(cfg[name], resolve=True) for name in ("continuation", "motif")}
    assert continuation_options(block["continuation"]).sampling == SamplingOptions(top_p=0.5, hooks=MEASURED)
    assert motif_sampling(block["motif"]) == SamplingOptions(hooks=MEASURED)
    # evaluation_options reads the YAML without Hydra: the references are still text there, the group absent
    opts = evaluation_options(motif={"temperature": 0.8})
    assert continuation_options(opts.continuation).sampling == SamplingOptions(hooks=MEASURED)
    assert motif_sampling(opts.motif) == SamplingOptions(temperature=0.8, hooks=MEASURED)


def test_from_mapping_takes_the_default_for_missing_or_unresolved_keys():
    got = SamplingOptions.from_mapping({"top_p": reference("top_p"), "top_k": 8, "num_seeds": 3})
    assert got == SamplingOptions(top_k=8)


def test_the_app_and_its_page_start_at_the_defaults():
    import gradio as gr

    from musictx.app.page import _controls

    start, sampling = Settings(), SamplingOptions()
    assert (start.temperature, start.top_p, start.seed) == (sampling.temperature, sampling.top_p, sampling.seed)
    with gr.Blocks():
        controls = _controls()
    assert [c.value for c in controls] == [start.seed_seconds, start.length_seconds, start.temperature, start.top_p,
                                          start.num_samples, start.seed, start.seed_from, start.recall_guidance,
                                          start.density, start.instruments, start.drums == "loop", start.ending]
    assert start.recall_guidance == sampling.hooks.recall_guidance.strength


def test_help_shows_the_numbers_the_references_stand_for():
    lines = key_help("generate", "musictx-generate").splitlines()
    settings = [(name, value) for name, value in asdict(DecodingOptions()).items()]
    settings += [(f"hooks.{spec.name}.{name}", value) for spec in HOOKS if spec.options
                 for name, value, _ in help_of(spec.options)]
    for name, value in settings:
        shown = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        assert any(line.split()[0] == f"{name}={shown}" for line in lines if line.startswith("  ")), name
    assert not any("${sampling" in line for line in lines if line.startswith("  "))



def test_a_bad_polyphony_ratio_is_named_and_a_good_one_caps_the_continuations():
    import numpy as np
    import pytest

    from musictx.decoding.errors import GenerateError
    from musictx.decoding.hooks.guard import MIN_POLYPHONY
    from musictx.tasks.continue_seed import sample_continuations
    from musictx.tasks.seeds import Seed

    from .gen_fixtures import tiny_net
    from .test_guard import LAY, TOK, _sounding_counts, on, shift

    with pytest.raises(GenerateError, match="hooks.guard.polyphony_ratio must be > 0 or null, got 0"):
        SamplingOptions(hooks={"guard": {"polyphony_ratio": 0.0}}).check_sampling()
    net = tiny_net("music_transformer", max_seq_len=64, seed=1)
    seed = Seed(ids=np.array([LAY.velocity + 15, on(60), on(64), shift(20)]), seconds=0.2)

    def most(ratio):
        opts = SamplingOptions(seed=3, hooks={"guard": {"polyphony_ratio": ratio, "max_note_seconds": None},
                                              "recall_guidance": {"strength": 0.0}})
        rows = sample_continuations(net, TOK, seed, opts, num_samples=4, length_seconds=None, max_tokens=600)
        return max(max(_sounding_counts(list(seed.ids) + list(row))) for row in rows)

    assert most(None) > MIN_POLYPHONY  # the premise: this net piles notes up
    assert most(1.0) == MIN_POLYPHONY  # the seed holds 2 at once: the floor is the cap


def test_note_cap_follows_the_seeds_long_notes():
    import numpy as np
    import pytest

    from musictx.decoding.hooks.guard import note_cap
    from musictx.tasks.seeds import Seed

    from .test_guard import LAY, TOK, on, shift

    def seed_of(held_steps: int) -> Seed:  # four notes, each held held_steps x 10 ms
        ids = [LAY.velocity + 15]
        for p in (60, 62, 64, 65):
            ids += [on(p), shift(held_steps), LAY.note_off + p]
        return Seed(ids=np.array(ids), seconds=4 * held_steps / 100)

    assert note_cap(TOK, seed_of(100), 5.0, 2.0) == pytest.approx(2.0)  # 1 s notes: at most 2 s
    assert note_cap(TOK, seed_of(20), 5.0, 2.0) == 1.0  # never below 1 s
    assert note_cap(TOK, seed_of(100), 1.5, 2.0) == 1.5  # never above max_note_seconds
    assert note_cap(TOK, seed_of(100), 5.0, None) == 5.0 and note_cap(TOK, seed_of(100), None, 2.0) is None


def test_a_hooks_name_given_as_an_option_is_told_where_its_options_are():
    import pytest

    from musictx.decoding.errors import GenerateError
    from musictx.generation.generate_options import check_option_names, override_names

    names = override_names(["seed_midi=x.mid", "hooks.bass_lean.strength=1.3", "hydra.run.dir=y"])
    assert names == ["seed_midi", "hooks.bass_lean.strength"]
    check_option_names(names)  # the hooks' spelling passes
    for spec in HOOKS:
        if spec.options:
            with pytest.raises(GenerateError, match=rf"^option '{spec.name}' is a hook: set hooks\.{spec.name}\."):
                check_option_names(override_names([f"{spec.name}=1"]))
    with pytest.raises(GenerateError, match="unknown option 'strenth' in hooks.bass_lean; did you mean 'strength'"):
        check_option_names(["hooks.bass_lean.strenth"])
    with pytest.raises(GenerateError, match="unknown option 'bass_lan' in hooks; did you mean 'bass_lean'"):
        check_option_names(["hooks.bass_lan.strength"])
    with pytest.raises(GenerateError, match="option 'bass_lean' is a hook: set hooks.bass_lean.strength"):
        SamplingOptions.from_mapping({"bass_lean": 1.3})  # a YAML block or a script's dict too


def test_evaluate_help_names_each_blocks_hooks():
    lines = key_help("evaluate", "musictx-evaluate").splitlines()
    said = next(line for line in lines if line.startswith("logits hooks"))
    assert "BLOCK.hooks.NAME.FIELD=DEFAULT, BLOCK one of scorecard, infill, two_sample, continuation, motif" in said
    assert any(line.split()[0] == "hooks.bass_lean.strength=2.0" for line in lines if line.startswith("  "))
