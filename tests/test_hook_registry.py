"""The hook registry: every hook describes itself, `build_hooks` is the one place a list is built, each task
gets its hooks in their order, and a strength of 0 leaves a hook out."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import torch

import musictx
from musictx.decoding.hook import KINDS, HookInputs, LogitsHook, StopRule
from musictx.decoding.hooks.registry import HOOKS, HookOptions, _check_needs, build_hooks, hooks_for
from musictx.decoding.sampling_options import SamplingOptions
from musictx.generation.generate_options import GenerateOptions
from musictx.io.metrical_tokenizer import MetricalTokenizer
from musictx.io.midi_io import Notes
from musictx.io.tokenizer import EventTokenizer
from musictx.tasks.registry import TASKS
from musictx.tasks.seeds import Seed

PACKAGE = Path(musictx.__file__).resolve().parent
PERFORMANCE, METRICAL = EventTokenizer(), MetricalTokenizer()


def names(hooks) -> list[str]:
    return [type(h).__name__ for h in hooks]


def test_every_spec_is_complete_and_owns_its_options():
    """A hook's options are its own dataclass, in its own file, each field with one line of help; the run's
    options hold them as one group per hook (``hooks.NAME``) and no flat hook option besides."""
    assert len({spec.name for spec in HOOKS}) == len(HOOKS)
    for spec in HOOKS:
        assert (spec.tasks is None or set(spec.tasks) <= set(TASKS)) and set(spec.kinds) <= set(KINDS) and spec.kinds
        assert spec.help and "\n" not in spec.help
        if spec.options is not None:
            assert spec.options.__module__ == spec.make.__module__, spec.name  # declared beside its hook
            assert all(f.metadata["help"] and "\n" not in f.metadata["help"] for f in fields(spec.options))
    groups = {f.name: f.type for f in fields(HookOptions)}
    assert groups == {spec.name: spec.options for spec in HOOKS if spec.options}
    assert {f.name for f in fields(GenerateOptions)} & set(groups) == set()
    for task in TASKS:  # a run's hooks come in the registry's order, each after those it needs
        for kind in KINDS:
            names = [spec.name for spec in hooks_for(task, kind)]
            assert names == [spec.name for spec in HOOKS if spec.name in names]
    _check_needs(HOOKS)
    by_name = {spec.name: spec for spec in HOOKS}
    assert by_name["counter_rest"].needs == ("given_notes",)
    with pytest.raises(ValueError, match="hook counter_rest needs given_notes: list it after them"):
        _check_needs((by_name["counter_rest"], by_name["given_notes"]))


def test_continuation_hooks_in_order_and_off_at_zero():
    every = SamplingOptions()
    song = [0, 80]  # PIANO and MELODY: the melody presence is made for a song's tracks only
    metrical = build_hooks(HookInputs("continue", METRICAL, every, programs=song, on_step=lambda *_: None))
    assert names(metrical) == ["RemiCursor", "RemiGuard", "BarRepeatLimit", "MotifEcho", "PhraseReturn", "BassLean",
                               "MelodyPresence", "OnStep", "RecallGuidance"]
    # one cursor for the run, followed first; every metrical hook reads it and follows nothing itself
    readers = [h for h in metrical if hasattr(h, "cursor")]
    assert len(readers) == 6 and all(h.cursor is metrical[0] and not h._own_cursor for h in readers)
    off = SamplingOptions(hooks={"motif_echo": {"strength": 0}, "bass_lean": {"strength": 0},
                                 "phrase_return": {"strength": 0},
                                 "recall_guidance": {"strength": 0},
                                 "metrical_guard": {"enabled": False}, "melody_presence": {"strength": 0},
                                 "bar_repeats": {"max_repeats": None}})
    assert build_hooks(HookInputs("continue", METRICAL, off, programs=song)) == []


def test_performance_continuation_gets_its_guard_and_recall_guidance():
    notes = Notes(np.array([0.0, 0.5]), np.array([0.5, 1.0]), np.array([60, 64]), np.array([80, 80]))
    seed = Seed(PERFORMANCE.encode_notes(notes), 1.0, None, 0.0, None)
    hooks = build_hooks(HookInputs("continue", PERFORMANCE, SamplingOptions(), seed=seed))
    assert names(hooks) == ["NoteGrammarGuard", "NoteEcho", "Pace", "TopRepeat", "RecallGuidance"]


@pytest.mark.parametrize("task", ["infill", "accompany"])
def test_infill_and_accompaniment_make_no_recall_guidance_or_echo(task):
    specs = [spec.name for spec in hooks_for(task, "remi")]
    assert "recall_guidance" not in specs and "motif_echo" not in specs 
    assert "metrical_guard" in specs and "bar_repeats" in specs


def test_infill_puts_the_copy_cache_first():
    history = np.array([METRICAL.bar_id, 5, 6, 7], dtype=np.int64)
    hooks = build_hooks(HookInputs("infill", METRICAL, SamplingOptions(), programs=[0], history=history))
    assert names(hooks) == ["RemiCursor", "CopyCache", "RemiGuard", "BarRepeatLimit"]
    no_cache = SamplingOptions(hooks={"copy_cache": {"strength": 0.0}})
    assert names(build_hooks(HookInputs("infill", METRICAL, no_cache, programs=[0], history=history))) == [
        "RemiCursor", "RemiGuard", "BarRepeatLimit"]


def _hook_classes() -> set[str]:
    """Every LogitsHook subclass defined in the package."""
    found = {"LogitsHook"}
    trees = {p: ast.parse(p.read_text()) for p in PACKAGE.rglob("*.py")}
    grew = True
    while grew:
        grew = False
        for tree in trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in found and any(
                        isinstance(b, ast.Name) and b.id in found for b in node.bases):
                    found.add(node.name)
                    grew = True
    return found - {"LogitsHook"}


def test_no_hook_is_made_outside_its_own_file():
    """A hook list is built only by `build_hooks`: a hook class is instantiated only in the file that defines
    it (its spec's make), nowhere else in the package."""
    classes = _hook_classes()
    assert {"RemiGuard", "RepeatEcho", "RecallGuidance", "OnStep"} <= classes
    bad = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else (
                    node.func.value.id if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                    and node.func.attr == "of" else None)
                if name in classes and name not in defined:
                    bad.append(f"{path.relative_to(PACKAGE)}:{node.lineno} makes {name}")
    assert bad == []
    assert issubclass(type(build_hooks(HookInputs("continue", METRICAL, SamplingOptions(), programs=[0]))[0]),
                      LogitsHook)


def test_the_length_rule_is_a_hook_that_build_hooks_makes():
    """`generate` takes no stop function: the task's length (bars, or seconds) is a hook that ends samples."""
    bars = build_hooks(HookInputs("infill", METRICAL, SamplingOptions(), programs=[0], stop_after_bars=3))
    assert names(bars)[-1] == "BarLimit" and isinstance(bars[-1], StopRule)
    ids = torch.tensor([METRICAL.bar_id, 5])
    done = [bars[-1].finished(ids) for _ in range(4)]
    assert done[:3] == [None] * 3 and done[3].tolist() == [True, False]  # the 4th Bar ends row 0; None: none ends
    assert bars[-1].finished(torch.tensor([5, 5])) is None  # no Bar: nothing new ends (row 0 stays done in generate)
    assert bars[-1].finished(torch.tensor([5, METRICAL.bar_id])).tolist() == [True, False]  # row 1's 2nd Bar
    notes = Notes(np.array([0.0]), np.array([0.5]), np.array([60]), np.array([80]))
    seed = Seed(PERFORMANCE.encode_notes(notes), 1.0, None, 0.0, None)
    timed = build_hooks(HookInputs("continue", PERFORMANCE, SamplingOptions(), seed=seed, length_seconds=2.0))
    assert names(timed) == ["NoteGrammarGuard", "NoteEcho", "Pace", "TopRepeat", "SecondsLimit", "RecallGuidance"]
    assert not any(isinstance(h, StopRule) for h in timed if type(h).__name__ != "SecondsLimit")


def test_a_hook_of_the_wrong_kind_is_refused_not_ignored():
    """A hook that writes ``finished`` (or ``around``) must be a StopRule (a DecoderWrapper): generate asks only
    those, so another hook's method would never run."""
    from musictx.decoding.sampling import SpecialIds, generate

    from .gen_fixtures import tiny_net

    class Stops(LogitsHook):
        def finished(self, next_ids):
            return next_ids >= 0

    class Wraps(LogitsHook):
        def around(self, decoder, net, pinned):
            return decoder

    net, prompt = tiny_net("music_transformer"), torch.tensor([[1, 2]])
    with pytest.raises(TypeError, match="Stops defines finished\\(\\) but is not a StopRule"):
        generate(net, SpecialIds(pad_id=0), prompt, SamplingOptions(), [Stops()], max_new_tokens=2)
    with pytest.raises(TypeError, match="Wraps defines around\\(\\) but is not a DecoderWrapper"):
        generate(net, SpecialIds(pad_id=0), prompt, SamplingOptions(), [Wraps()], max_new_tokens=2)
    class Names(LogitsHook):
        def only_choice(self):
            return [3]

    with pytest.raises(TypeError, match="Names defines only_choice\\(\\) but is not a Grammar"):
        generate(net, SpecialIds(pad_id=0), prompt, SamplingOptions(), [Names()], max_new_tokens=2)

    class Ends(StopRule):  # the same method on the right kind: asked, and the sample ends after one id
        def finished(self, next_ids):
            return next_ids >= 0

    assert generate(net, SpecialIds(pad_id=0), prompt, SamplingOptions(), [Ends()], max_new_tokens=2).shape == (1, 3)


def test_a_grammars_lone_id_is_written_without_asking_the_net(monkeypatch):
    """A Grammar that leaves only id 3 after any other id: each 3 is written without a draw and fed to the net
    with the id after it, in one pass; the draws in between are the net's, never 3. Where the window slides
    (a context of 16) the net is asked after the 3 as well, and the ids are the same."""
    from musictx.decoding import DecoderWrapper, FastDecoder, Grammar, reference_steps
    from musictx.decoding.sampling import SpecialIds, generate

    from .gen_fixtures import tiny_net

    class AfterEachId(Grammar):
        def start(self, prompt):
            self.last = prompt[:, -1].tolist()

        def update(self, next_ids, done):
            self.last = next_ids.tolist()

        def __call__(self, logits):
            if self.last == [3]:
                return logits.index_fill(1, torch.tensor([3]), float("-inf"))
            return torch.full_like(logits, float("-inf")).index_fill(1, torch.tensor([3]), 0.0)

        def only_choice(self):
            return None if self.last == [3] else [3]

    passes, many = [], FastDecoder.step_many
    monkeypatch.setattr(FastDecoder, "step_many",
                        lambda self, ids, cache: passes.append(ids.shape) or many(self, ids, cache))
    net, prompt = tiny_net("music_transformer"), torch.tensor([[1, 3]])
    ids = generate(net, SpecialIds(pad_id=0), prompt, SamplingOptions(seed=1), [AfterEachId()], max_new_tokens=20)[0]
    assert (ids[3::2] == 3).all() and not (ids[2::2] == 3).any() and len(ids) == 22
    assert set(passes) == {(1, 2)} and 4 <= len(passes) < 9  # each 3 with the next draw's id, but at a slide
    with reference_steps():  # the general forward: asked after every id
        assert torch.equal(generate(net, SpecialIds(pad_id=0), prompt, SamplingOptions(seed=1), [AfterEachId()],
                                    max_new_tokens=20)[0], ids)

    class OneIdAStep:  # a hook's own decoder that knows nothing of several ids: asked after each
        def __init__(self, inner):
            self.inner, self.steps = inner, 0

        def restart(self, window):
            return self.inner.restart(window)

        def step(self, window):
            self.steps += 1
            return self.inner.step(window)

    class Wraps(DecoderWrapper):
        def around(self, decoder, net, pinned):
            self.decoder = OneIdAStep(decoder)
            return self.decoder

    wraps = Wraps()
    wrapped = generate(net, SpecialIds(pad_id=0), prompt, SamplingOptions(seed=1), [AfterEachId(), wraps],
                       max_new_tokens=20)[0]
    assert torch.equal(wrapped, ids) and wraps.decoder.steps > 2 * len(passes)  # asked after each id, a slide aside


def test_the_hooks_read_the_ids_generate_read_and_any_other_ids_themselves():
    """`generate` reads the ids it drew to the host once (`read_to_host`); a hook's ``update`` gets that same list
    for those ids (`ids_on_host`), and reads any other tensor itself, also once the run has forgotten them."""
    from musictx.decoding.hook import ids_on_host, read_to_host

    drawn, other = torch.tensor([3, 5]), torch.tensor([3, 5])
    kept = read_to_host(drawn)
    assert kept == [3, 5] and ids_on_host(drawn) is kept
    assert ids_on_host(other) == [3, 5] and ids_on_host(other) is not kept  # equal values, another tensor
    read_to_host(None)
    drawn[0] = 7
    assert ids_on_host(drawn) == [7, 5]
