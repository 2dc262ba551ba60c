"""Key keep (Performance events): a pitch class the continuation owes its seed leans up, one it overplays leans
down, the NOTE_ON block's total and every -inf kept; through `generate`, a net drifting off its seed's pitch
classes comes back toward them (measured on the decoded notes as the scorecard measures them)."""

from __future__ import annotations

import numpy as np
import torch

from musictx.decoding.hook import LogitsHook
from musictx.decoding.hooks.key_keep import KeyKeep
from musictx.decoding.hooks.registry import HOOKS
from musictx.decoding.sampling import generate
from musictx.decoding.sampling_options import SamplingOptions
from musictx.evaluation.scorecard_metrics import pitch_class_histogram
from musictx.io.tokenizer import EventTokenizer

from .gen_fixtures import tiny_net

TOK = EventTokenizer()
LAY = TOK.layout
ONS = slice(LAY.note_on, LAY.note_off)
C_MAJOR = (60, 62, 64, 65, 67, 69, 71)


def on(p: int) -> int:
    return LAY.note_on + p - TOK.config.pitch_min


def shift(seconds: float) -> int:
    return LAY.time_shift + round(seconds / TOK.config.time_step) - 1


def c_major_seed(times: int = 4) -> list[int]:
    return [i for _ in range(times) for p in C_MAJOR for i in (on(p), shift(0.2))]


def test_an_owed_class_leans_up_an_overplayed_one_down_and_the_total_stays():
    hook = KeyKeep(TOK, 2.0)
    hook.start(torch.tensor([c_major_seed()]))
    logits = torch.zeros(1, TOK.vocab_size)
    assert torch.allclose(hook(logits), logits)  # nothing made yet: the balance is the seed's
    for p in C_MAJOR * 2:
        hook.update(torch.tensor([on(p)]))
    hook.update(torch.tensor([on(67)]))
    assert torch.allclose(hook(logits), logits)  # a drift within the tolerance: free
    for _ in range(40):
        hook.update(torch.tensor([on(67)]))  # G over and over: G overplayed, the rest owed
    out = hook(logits)
    assert out[0, on(67)] < 0 < out[0, on(60)]  # G leans down, C leans up
    assert out[0, on(79)] == out[0, on(67)]  # by pitch class, in every octave
    assert out[0, on(61)] < out[0, on(60)]  # C#, which the seed never sounds, owes less than C
    assert float((out[0, on(60)] - out[0, on(67)])) <= 2 * 2.0 + 1e-6  # at most the strength either way
    assert torch.isclose(out[0, ONS].logsumexp(0), logits[0, ONS].logsumexp(0))  # a note starts as often
    assert torch.equal(out[0, LAY.note_off:], logits[0, LAY.note_off:])  # offs, shifts, velocities untouched


def test_rows_keep_their_own_seed_and_minus_inf_stays():
    hook = KeyKeep(TOK, 1.0)
    hook.start(torch.tensor([c_major_seed(1) + [shift(0.2)] * 66, [on(61), shift(0.2)] * 40]))
    for _ in range(8):
        hook.update(torch.tensor([on(61), on(61)]))
    logits = torch.zeros(2, TOK.vocab_size)
    logits[0, on(62)] = float("-inf")
    out = hook(logits)
    assert out[0, on(61)] < out[0, on(60)]  # row 0's seed is C major: C# overplayed
    assert (out[1] - logits[1]).abs().max() < 0.1  # row 1's seed is all C#: its balance is (nearly) kept
    assert out[1, on(61)] > out[0, on(61)]  # row 1's seed is all C#: no C# is too many there
    assert out[0, on(62)].isneginf()


def test_the_hook_is_made_for_a_piano_continuation_only():
    spec = next(s for s in HOOKS if s.name == "key_keep")
    assert spec.kinds == ("performance",) and spec.tasks == ("continue",)


def _seed_correlation(ids: np.ndarray, seed: np.ndarray) -> float:
    hist = pitch_class_histogram(TOK.decode_notes(ids))
    return float(np.corrcoef(hist, pitch_class_histogram(TOK.decode_notes(seed)))[0, 1])


def test_generate_with_the_hook_comes_back_to_the_seeds_pitch_classes():
    """A net that drifts to the black keys (a hook before, as the net's own preference): with the key keep its
    notes come back toward the seed's C major."""
    net = tiny_net("music_transformer", max_seq_len=64)

    class Drift(LogitsHook):  # every NOTE_ON of a black key, and a short note after each
        def __call__(self, logits):
            out = logits.clone()
            out[:, [on(p) for p in (61, 63, 66, 68, 70)]] += 4.0
            return out

    seed = c_major_seed()
    prompt = torch.tensor([seed])
    opts = SamplingOptions(top_p=None, seed=5, hooks={"recall_guidance": {"strength": 0.0}})

    def kept(hooks) -> float:
        ids = generate(net, TOK, prompt, opts, hooks, max_new_tokens=400)[0].numpy()
        return _seed_correlation(ids[len(seed):], np.asarray(seed))

    free, held = kept([Drift()]), kept([Drift(), KeyKeep(TOK, 3.0)])
    assert held > free + 0.3
