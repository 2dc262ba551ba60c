"""Top repeat (Performance events): the NOTE_ON that would strike the last onset's top pitch again as the new top
is lowered, and nothing else; a note above it in the same onset lifts the rule; through `generate`, a net that
sticks on its top pitch repeats it far less (the top line measured as the scorecard measures it)."""

from __future__ import annotations

import numpy as np
import torch

from musictx.decoding.hook import LogitsHook
from musictx.decoding.hooks.registry import HOOKS
from musictx.decoding.hooks.top_repeat import NONE, TopRepeat
from musictx.decoding.sampling import generate
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.tokenizer import EventTokenizer
from musictx.listening.scorecard_metrics import top_line

from .gen_fixtures import tiny_net

TOK = EventTokenizer()
LAY = TOK.layout
STEP_S = TOK.config.time_step


def on(p: int) -> int:
    return LAY.note_on + p - TOK.config.pitch_min


def shift(seconds: float) -> int:
    return LAY.time_shift + round(seconds / STEP_S) - 1


def started(ids) -> TopRepeat:
    hook = TopRepeat(TOK, 3.0)
    hook.start(torch.tensor([ids]))
    return hook


def feed(hook: TopRepeat, ids) -> None:
    for i in ids:
        hook.update(torch.tensor([i]))


def test_the_last_onsets_top_is_lowered_until_something_higher_sounds():
    hook = started([on(60), on(67), shift(0.25)])  # an onset of 60 and 67: its top is 67
    logits = torch.randn(1, TOK.vocab_size)
    out = hook(logits)
    assert float(logits[0, on(67)] - out[0, on(67)]) == 3.0  # 67 now would repeat the top
    others = torch.ones(TOK.vocab_size, dtype=torch.bool)
    others[on(67)] = False
    assert torch.equal(out[0, others], logits[0, others])  # every other id untouched
    feed(hook, [on(48)])  # a bass note opens the next onset: 67 would still be its top
    assert hook.repeat_pitch()[0] == 67
    feed(hook, [on(72)])  # 72 is the new top: a 67 under it is no repeat
    assert hook.repeat_pitch()[0] == NONE and torch.equal(hook(logits), logits)
    feed(hook, [shift(0.01)])  # within 20 ms: still the same onset
    assert hook.repeat_pitch()[0] == NONE
    feed(hook, [shift(0.2)])  # time moves on: the next note opens an onset, whose top 72 would repeat
    assert hook.repeat_pitch()[0] == 72


def test_before_any_note_and_with_rows_apart_each_row_keeps_its_own_line():
    hook = TopRepeat(TOK, 3.0)
    hook.start(torch.tensor([[shift(1.0), shift(1.0)], [on(50), shift(0.5)]]))
    assert hook.repeat_pitch().tolist() == [NONE, 50]  # a silent seed has no top to repeat
    logits = torch.zeros(2, TOK.vocab_size)
    logits[1, on(50)] = float("-inf")
    out = hook(logits)
    assert torch.equal(out[0], logits[0]) and out[1, on(50)].isneginf()  # -inf stays -inf


def test_the_hook_is_made_for_a_piano_continuation_only():
    spec = next(s for s in HOOKS if s.name == "top_repeat")
    assert spec.kinds == ("performance",) and spec.tasks == ("continue",)


def _top_repeats(ids: np.ndarray) -> float:
    notes = TOK.decode_notes(ids)
    _, top = top_line(notes)
    return float(np.mean(np.diff(top) == 0))


def test_generate_with_the_hook_repeats_the_top_far_less():
    """A net that sticks on its last pitch (a hook before, as the net's own preference): with the top repeat it
    moves on, measured on the decoded notes' top line."""
    net = tiny_net("music_transformer", max_seq_len=64)

    class Sticky(LogitsHook):  # after a note, a short wait; after the wait, the last note's pitch again
        def start(self, prompt):
            self.last, self.waited = int(prompt[0, -2]), True

        def update(self, next_ids, done):
            i = int(next_ids[0])
            self.waited = i >= LAY.time_shift
            self.last = i if i < LAY.note_off else self.last

        def __call__(self, logits):
            out = logits.clone()
            out[:, self.last if self.waited else shift(0.1)] += 15.0
            return out

    prompt = torch.tensor([[on(60), shift(0.1), on(64), shift(0.1)]])
    opts = SamplingOptions(top_p=None, seed=3, hooks={"recall_guidance": {"strength": 0.0}})
    def repeats(hooks) -> float:
        return _top_repeats(generate(net, TOK, prompt, opts, hooks, max_new_tokens=300)[0].numpy())

    free, held = repeats([Sticky()]), repeats([Sticky(), TopRepeat(TOK, 15.0)])
    assert free > 0.5  # the sticky net, alone
    assert held < 0.2 < free
