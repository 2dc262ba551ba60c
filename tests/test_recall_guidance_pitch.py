"""Recall guidance on a REMI model's Pitch draws only (``hooks.recall_guidance.draws=pitch``, shipped): the
shipped `pop` continuing the bundled motif is guided exactly at the draws after a Program id, its recent
branch catches up on the ids it skipped in the whole window's pass, and the samples are those of the
general forward; ``draws=every`` guides every draw, as a Performance model always does."""

from __future__ import annotations

import pytest

from musictx.checkpoints.model_store import load_model
from musictx.decoding import FastDecoder, reference_steps
from musictx.decoding.hooks.recall_guidance import RecallGuidance
from musictx.decoding.sampling import _Drawer
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.tokenizer import EventTokenizer
from musictx.paths import BUNDLED_MOTIF
from musictx.tasks.continue_metrical import sample_bars
from musictx.tasks.metrical_seeds import metrical_seed

BARS = 3


@pytest.fixture(name="pop", scope="module")
def fixture_pop():
    net, tok, _ = load_model("pop")
    return net, tok, metrical_seed(tok, BUNDLED_MOTIF)


def _continue(pop, monkeypatch, draws: str, batch: int = 1) -> tuple[list, list]:
    """(new ids of each sample, the guided decoders made) of a ``BARS``-bar continuation, seed 3."""
    net, tok, prompt = pop
    made, around = [], RecallGuidance.around

    def recorded(self, decoder, net, pinned=0):
        made.append(around(self, decoder, net, pinned))
        return made[-1]

    monkeypatch.setattr(RecallGuidance, "around", recorded)
    sampling = SamplingOptions(seed=3, best_of=1, hooks={"recall_guidance": {"draws": draws}})
    return sample_bars(net, tok, prompt, sampling, num_samples=batch, bars=BARS), made


def test_pop_is_guided_at_each_pitch_draw_and_only_there(pop, monkeypatch):
    net, tok, prompt = pop
    calls = {"catch_up": 0, "together": 0}
    for name in calls:
        original = getattr(FastDecoder, "step_catching_up" if name == "catch_up" else "step_together")

        def counted(*args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(FastDecoder, "step_catching_up" if name == "catch_up" else "step_together", counted)
    (ids,), (decoder,) = _continue(pop, monkeypatch, "pitch")
    programs = tok.type_of[ids] == "Program"
    assert len(prompt.ids) > decoder.guidance.local  # the branch runs from the first draw
    assert (tok.type_of[ids[1:][programs[:-1]]] == "Pitch").all()  # the grammar: a Pitch after each Program
    assert decoder.guided_steps == programs.sum() > 10  # each Pitch draw guided, nothing else
    assert calls["catch_up"] > 0.6 * decoder.guided_steps  # the branch catches up in the window's pass ...
    assert calls["catch_up"] + calls["together"] <= decoder.guided_steps  # ... and never runs unguided
    assert len(ids) > 3 * decoder.guided_steps  # most draws pay for no second branch


@pytest.mark.parametrize("batch", [1, 2])
def test_pitch_only_guidance_samples_as_the_general_forward_does(pop, monkeypatch, batch):
    """The engine's catch-up pass against the general forward (the branch fed its skipped ids by the net's
    own cached forward; every id asked of the net): the same ids for one sample, whose TimeSig and Program ids
    the engine feeds with the next id, and for a batch of 2 whose rows are guided at different draws."""
    skipped = _count_skips(monkeypatch)
    fast, _ = _continue(pop, monkeypatch, "pitch", batch=batch)
    folded = len(skipped)
    with reference_steps():
        general, _ = _continue(pop, monkeypatch, "pitch", batch=batch)
    assert all(len(a) == len(b) and (a == b).all() for a, b in zip(fast, general, strict=True))
    assert len(skipped) == folded and (folded > 10 if batch == 1 else True)
    assert batch == 1 or not (len(fast[0]) == len(fast[1]) and (fast[0] == fast[1]).all())


def _count_skips(monkeypatch) -> list:
    """The draws that the sampler skips from now on (an id its grammar leaves alone), one entry each."""
    skipped, skip = [], _Drawer.skip

    def counted(self, shape):
        skipped.append(shape)
        skip(self, shape)

    monkeypatch.setattr(_Drawer, "skip", counted)
    return skipped


def test_every_draw_is_guided_when_asked_and_a_performance_model_always_is(pop, monkeypatch):
    skipped = _count_skips(monkeypatch)
    (ids,), (decoder,) = _continue(pop, monkeypatch, "every")
    # every draw the net is asked for: the ids after the opening Bar (the prompt's own) and the Bar that would open
    # one bar more (cut), less those the grammar leaves alone (a TimeSig after a Bar, the one track's Program)
    assert decoder.guided_steps == len(ids) - len(skipped) and len(skipped) > 3
    pitch_only, _ = _continue(pop, monkeypatch, "pitch")
    assert not (len(pitch_only[0]) == len(ids) and (pitch_only[0] == ids).all())  # it changes the music
    options = SamplingOptions(hooks={"recall_guidance": {"draws": "pitch"}})
    performance = RecallGuidance.of(options.hooks.recall_guidance, 0.95, EventTokenizer())
    assert performance.leads is None  # its next draw's kind is unknown before the draw
    assert RecallGuidance.of(options.hooks.recall_guidance, 0.95, pop[1]).leads.sum() == len(
        pop[1].ids_of_type("Program"))
    with pytest.raises(Exception, match="draws must be one of pitch, every"):
        SamplingOptions(hooks={"recall_guidance": {"draws": "notes"}}).check_sampling()
