"""The note echo (Performance events): the next note leans toward how the seed went on from the same last
intervals, transposed too; a note starting keeps the probability the model gave it; the guard's -inf stay."""

from __future__ import annotations

import torch

from musictx.decoding.hook import HookInputs
from musictx.decoding.hooks.note_echo import NoteEcho
from musictx.decoding.hooks.registry import build_hooks
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.tokenizer import EventTokenizer
from musictx.tasks.seeds import Seed

TOK = EventTokenizer()
LAY = TOK.layout
LOW = TOK.config.pitch_min


def on(p):
    return LAY.note_on + p - LOW


def shift(steps):
    return LAY.time_shift + steps - 1


def echo_after(seed_pitches, line_pitches, strength=2.0):
    echo = NoteEcho(TOK, strength)
    prompt = [x for p in seed_pitches for x in (on(p), shift(10))]
    echo.start(torch.tensor([prompt]))
    for p in line_pitches:
        echo.update(torch.tensor([on(p)]))
    return echo


def test_the_next_note_leans_to_the_seeds_continuation_transposed():
    # the seed's figure: up 2, up 2, down 4 (C D E C, twice, after G A B C); the line plays it a fifth higher
    echo = echo_after([67, 69, 71, 60, 62, 64, 60, 62, 64, 60], [67, 69, 71])
    logits = torch.zeros(1, TOK.vocab_size)
    out = echo(logits)
    ons = out[0, LAY.note_on:LAY.note_off]
    assert int(ons.argmax()) + LOW == 67  # 71 - 4 (2 of 3 matches; 71 - 11 the third)
    assert out[0, on(60)] > out[0, on(61)]
    off_key = echo_after([60, 62, 64, 60, 62, 64, 60], [66, 68, 70])  # F# G# A#: the seed sounds no F#
    assert torch.equal(off_key(logits), logits)
    assert torch.equal(out[0, LAY.note_off:], logits[0, LAY.note_off:])  # only the NOTE_ONs change
    mass = torch.logsumexp(out[0, LAY.note_on:LAY.note_off], 0)
    assert torch.allclose(mass, torch.logsumexp(logits[0, LAY.note_on:LAY.note_off], 0))  # a note: as likely


def test_forbidden_notes_stay_forbidden_and_no_match_changes_nothing():
    echo = echo_after([67, 69, 71, 60, 62, 64, 60, 62, 64, 60], [67, 69, 71])
    logits = torch.zeros(1, TOK.vocab_size)
    logits[0, on(67)] = float("-inf")
    assert torch.isinf(echo(logits)[0, on(67)])
    lost = echo_after([60, 62, 64], [30, 80])  # an interval of 50 is nowhere in the seed
    assert torch.equal(lost(torch.zeros(1, TOK.vocab_size)), torch.zeros(1, TOK.vocab_size))
    assert torch.equal(echo_after([60, 62, 64, 60], [67, 69, 71], 0.0)(logits), logits)


def test_the_registry_makes_it_for_piano_continuations_only_when_asked():
    seed = Seed(torch.tensor([on(60), shift(10)]).numpy(), 0.1, None, 0.0, None)
    echo, quiet = (SamplingOptions(hooks={"note_echo": {"strength": s}}) for s in (1.5, 0.0))
    names = [type(h).__name__ for h in build_hooks(HookInputs("continue", TOK, echo, seed=seed))]
    assert names[:2] == ["NoteGrammarGuard", "NoteEcho"]  # right after the grammar, before the other leans
    assert "NoteEcho" not in [type(h).__name__ for h in build_hooks(HookInputs("continue", TOK, quiet, seed=seed))]
