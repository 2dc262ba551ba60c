"""A hook that reshapes only some draws says after which ids (`LogitsHook.acts_after`), and `generate` calls it
only there. The skipped calls must be the ones that would have changed nothing: with the shipped `pop` on the
bundled motif (which restates a phrase and has a bass line, so every lean acts somewhere), each gated hook is
audited at every draw, and its tokens are the tokens of the run where nothing is skipped."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from musictx.checkpoints.model_store import load_pretrained
from musictx.decoding.hook import DecoderWrapper, LogitsHook, StopRule
from musictx.decoding.hooks.metrical_guard import RemiGuard
from musictx.decoding.hooks.registry import build_hooks
from musictx.decoding.sampling import _Drawer, generate
from musictx.decoding.sampling_options import SamplingOptions
from musictx.paths import BUNDLED_MOTIF
from musictx.tasks import metrical_seed
from musictx.tasks.continue_metrical import bars_prompt


class Audited(LogitsHook):
    """A gated hook called at every draw: where its gate would have skipped it, it must return the logits as they
    came (counted in ``skipped``); where the gate lets it through, it runs (``acted``: it changed something)."""

    def __init__(self, inner: LogitsHook):
        self.inner, self.skipped, self.acted, self.last = inner, 0, 0, []

    def start(self, prompt):
        self.inner.start(prompt)
        assert self.inner.acts_after is not None, f"{type(self.inner).__name__} declares no acts_after"
        self.last = prompt[:, -1].tolist()

    def __call__(self, logits):
        out = self.inner(logits.clone())
        if not any(self.inner.acts_after[i] for i in self.last):
            torch.testing.assert_close(out, logits, rtol=0, atol=0)
            self.skipped += 1
        elif not torch.equal(out, logits):
            self.acted += 1
        return out

    def update(self, next_ids, done):
        self.inner.update(next_ids, done)
        self.last = next_ids.tolist()


@pytest.fixture(name="motif_prompt", scope="module")
def fixture_motif_prompt():
    torch.set_num_threads(1)
    net, tok = load_pretrained("pop")
    seed = metrical_seed(tok, BUNDLED_MOTIF)
    sampling = replace(SamplingOptions(), best_of=1, seed=3)
    return net.eval(), tok, lambda: bars_prompt(net, tok, seed, sampling, num_samples=2, bars=6)


def test_the_draws_a_hook_is_not_called_at_are_draws_it_leaves_alone(motif_prompt):
    net, tok, make = motif_prompt
    prompt = make()
    hooks = build_hooks(prompt.hooks)
    gated = [h for h in hooks if type(h).__name__ in ("MotifEcho", "PhraseReturn", "BassLean", "RecallGuidance")]
    assert len(gated) == 4  # the shipped leans whose gates are set by start (recall guidance: audited by its own rows)
    audited = [h if isinstance(h, (StopRule, DecoderWrapper)) or h not in gated else Audited(h) for h in hooks]
    plain = generate(net, tok, prompt.ids, prompt.hooks.sampling, audited, max_new_tokens=prompt.max_new_tokens)
    for hook in audited:
        if isinstance(hook, Audited):  # each is skipped at some draws and acts at others
            assert hook.skipped > 0 and hook.acted > 0, (type(hook.inner).__name__, hook.skipped, hook.acted)
    fresh = make()
    gated_run = generate(net, tok, fresh.ids, fresh.hooks.sampling, build_hooks(fresh.hooks),
                         max_new_tokens=fresh.max_new_tokens)
    assert torch.equal(gated_run, plain)


def test_a_hook_is_called_only_after_the_ids_it_names(motif_prompt):
    net, tok, make = motif_prompt
    prompt = make()
    after_program = tok.type_of == "Program"

    class AfterProgram(LogitsHook):
        acts_after = after_program

        def __init__(self):
            self.called_after = []

        def __call__(self, logits):
            self.called_after.append(self.last)
            return logits

        def start(self, prompt):
            self.last = prompt[0, -1].item()

        def update(self, next_ids, done):
            self.last = next_ids[0].item()

    spy = AfterProgram()
    out = generate(net, tok, prompt.ids[:1], prompt.hooks.sampling, [spy], max_new_tokens=200)
    drawn_after = out[0, prompt.ids.shape[1] - 1:-1].tolist()  # the id before each draw
    assert spy.called_after == [i for i in drawn_after if after_program[i]]
    assert len(spy.called_after) > 10


def test_the_guard_masks_pad_for_the_sampler_and_the_tokens_stay_the_same(motif_prompt):
    """The REMI guard always sets PAD to -inf and is called first at every draw, so the sampler leaves PAD to it
    (`_Drawer.leave_pad_to`); with the guard not saying so, the sampler masks PAD itself: the same tokens."""
    net, tok, make = motif_prompt
    prompt = make()
    hooks = build_hooks(prompt.hooks)
    guard = next(h for h in hooks if isinstance(h, RemiGuard))
    assert tok.pad_id in guard.always_forbids
    drawer = _Drawer(prompt.hooks.sampling, torch.device("cpu"), 10, tok.pad_id, tok)
    drawer.leave_pad_to([(LogitsHook(), None), (guard, None)])  # a hook before it would see PAD's logit
    assert drawer.masks_pad
    drawer.leave_pad_to([(guard, None)])
    assert not drawer.masks_pad
    left = generate(net, tok, prompt.ids, prompt.hooks.sampling, hooks, max_new_tokens=prompt.max_new_tokens)
    fresh = make()
    hooks = build_hooks(fresh.hooks)
    next(h for h in hooks if isinstance(h, RemiGuard)).always_forbids = frozenset()  # the sampler masks PAD itself
    masked = generate(net, tok, fresh.ids, fresh.hooks.sampling, hooks, max_new_tokens=fresh.max_new_tokens)
    assert torch.equal(left, masked)
    for row in left[:, prompt.ids.shape[1]:].tolist():  # PAD only fills a sample after it completes
        drawn = row[: row.index(tok.pad_id)] if tok.pad_id in row else row
        assert len(drawn) > 50 and all(i == tok.pad_id for i in row[len(drawn):])
