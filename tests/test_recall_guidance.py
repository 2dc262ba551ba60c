"""Recall guidance (musictx.decoding.hooks.recall_guidance): the contrast of the whole window with its recent
ids, exactly as written; no change where it should make none; a net that half-learned to copy copies more
often with it; its options are checked."""

from __future__ import annotations

import pytest
import torch

from musictx.decoding import FastDecoder, reference_steps
from musictx.decoding.errors import GenerateError
from musictx.decoding.filters import top_p_filter
from musictx.decoding.hooks.recall_guidance import GuidedDecoder, RecallGuidance
from musictx.decoding.sampling import generate
from musictx.decoding.sampling_options import SamplingOptions
from musictx.decoding.window import WindowDecoder
from musictx.io.tokenizer import EventTokenizer
from musictx.models import MusicTransformer

from .test_recall import _copier

TOK = EventTokenizer()
PERIOD = 24


def guided(opts: SamplingOptions) -> list[RecallGuidance]:
    """The hook list `build_hooks` makes of recall guidance alone: the guidance the options ask for, if any."""
    guidance = guidance_of(opts)
    return [guidance] if guidance else []


def guidance_of(opts: SamplingOptions) -> RecallGuidance | None:
    return RecallGuidance.of(opts.hooks.recall_guidance, opts.top_p)


def _net() -> MusicTransformer:
    torch.manual_seed(3)
    return MusicTransformer(TOK.vocab_size, n_layers=2, d_model=32, n_heads=2, d_ff=32, max_seq_len=128).eval()


@torch.inference_mode()
def test_guided_logits_are_the_whole_window_pushed_away_from_its_recent_ids():
    net, weight, local = _net(), 1.5, 16
    window = torch.randint(0, TOK.vocab_size - 2, (2, 40))
    decoder = RecallGuidance(weight, local, 0.9, "recent").around(WindowDecoder(net, use_cache=True), net)
    plain = decoder.restart(window)  # (2, V): the whole window's logits, as without guidance
    torch.testing.assert_close(plain, net(window)[:, -1], atol=1e-5, rtol=1e-5)
    out = decoder.guide(plain.clone())
    log_all = plain.log_softmax(-1)
    log_recent = net(window[:, -local:])[:, -1].log_softmax(-1)  # the branch sees the last 16 ids only
    kept = ~top_p_filter(log_all, 0.9).isneginf()
    expected = log_all + weight * (log_all - log_recent)
    torch.testing.assert_close(out[kept], expected[kept], atol=1e-5, rtol=1e-5)
    assert out[~kept].isneginf().all() and 0 < kept.sum(-1).min() < TOK.vocab_size  # the nucleus bounds it
    assert decoder.guided_steps == 1
    step = decoder.guide(decoder.step(torch.cat([window, window[:, :1]], dim=1)))  # the cached path too
    assert decoder.guided_steps == 2 and step.isneginf().any()


def test_guided_steps_run_both_branches_in_one_pass_and_sample_the_same_ids(monkeypatch):
    """Both branches take the same new id at a cached step: the net decodes the two caches together (its
    products on both rows at once), which changes the logits by float rounding only, so the samples are
    those of stepping each branch alone; restarts and slides still work around it."""
    net = _net()
    prompt = torch.randint(0, TOK.vocab_size - 2, (2, 40), generator=torch.Generator().manual_seed(1))
    together, pairs = FastDecoder.step_together, []

    def counted(decoder, ids, caches):
        pairs.append(len(caches))
        return together(decoder, ids, caches)

    def sample():
        opts = SamplingOptions(top_p=0.95, seed=7, hooks={"recall_guidance": {"strength": 1.5, "local": 8}})
        return generate(net, None, prompt, opts, guided(opts), max_new_tokens=150)

    monkeypatch.setattr(FastDecoder, "step_together", counted)
    paired = sample()
    with reference_steps():  # no engine: one branch after the other, through the general forward
        alone = sample()
    assert torch.equal(paired, alone)
    assert len(pairs) > 100 and set(pairs) == {2}  # every step but the branch's restarts (each 8th)


@torch.inference_mode()
def test_against_the_continuation_the_branch_sees_the_new_music_and_never_the_seed():
    """With ``against="continuation"`` the contrast is the window without the seed: once there are ``local``
    new ids the branch holds all of them (grown by cached steps), also after a slide pins the seed."""
    net, local, t0, pin = _net(), 4, 30, 8
    prompt = torch.randint(0, TOK.vocab_size - 2, (2, t0))
    guidance = RecallGuidance(1.0, local, 0.95, "continuation")
    decoder = guidance.around(WindowDecoder(net, use_cache=True), net, pinned=pin)
    decoder.restart(prompt)
    window = prompt
    for n in range(1, 12):
        window = torch.cat([window, torch.randint(0, TOK.vocab_size - 2, (2, 1))], dim=1)
        decoder.step(window)
        branch = window[:, t0:] if n >= local else window[:, -decoder.recent_len:]
        assert decoder.recent_len == branch.shape[1] >= min(n, local)
        torch.testing.assert_close(decoder.recent_logits, net(branch)[:, -1], atol=1e-5, rtol=1e-5)
    slid = torch.cat([prompt[:, -pin:], window[:, t0 + 3:]], dim=1)  # the window slid: seed pinned, 8 new ids
    decoder.restart(slid)
    torch.testing.assert_close(decoder.recent_logits, net(window[:, t0 + 3:])[:, -1], atol=1e-5, rtol=1e-5)
    grown = torch.cat([slid, window[:, :1]], dim=1)
    decoder.step(grown)
    torch.testing.assert_close(decoder.recent_logits, net(grown[:, pin:])[:, -1], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="against must be one of recent, continuation"):
        RecallGuidance(1.0, 64, 0.95, "seed")


def test_against_the_continuation_cached_and_recomputed_sampling_agree_across_slides():
    net = _net()  # max_seq_len 128: 150 new ids slide the window twice
    prompt = torch.randint(0, TOK.vocab_size - 2, (2, 40))
    guidance = dict(strength=1.5, local=8, against="continuation")
    cached = _sample(net, prompt, **guidance, n=150)
    assert torch.equal(_sample(net, prompt, **guidance, use_cache=False, n=150), cached)
    assert not torch.equal(_sample(net, prompt, n=150), cached)  # it guided


def test_ids_the_sampler_forbids_stay_forbidden_even_when_they_were_all_the_model_wanted():
    """The guard may forbid the whole nucleus (a NOTE_OFF of a note it already ended): guidance then
    re-ranks the ids left, and never returns a row with nothing to draw (which argmax read as id 0)."""
    net = _net()
    window = torch.randint(0, TOK.vocab_size - 2, (2, 40))
    decoder = RecallGuidance(2.0, 16, 0.95, "recent").around(WindowDecoder(net, use_cache=True), net)
    logits = decoder.restart(window) * 50  # sharp, as a trained net's often are
    nucleus = ~top_p_filter(logits.log_softmax(-1), 0.95).isneginf()
    top = logits.topk(40, dim=-1).indices  # (2, 40): the whole nucleus and more
    assert nucleus.sum(-1).max() <= 40
    masked = logits.scatter(-1, top, float("-inf"))
    out = decoder.guide(masked)
    assert not out.isnan().any() and out.gather(-1, top).isneginf().all()
    assert (~out.isneginf()).sum(-1).min() >= 1


@torch.inference_mode()
def test_every_velocity_is_plausible_where_one_is_when_the_sampler_draws_their_value_past_the_nucleus():
    """With full_velocity the sampler draws a velocity's value from all of them (`sample_next`'s family), so
    guidance keeps every VELOCITY id plausible in a row where one is, and only there; without it, its nucleus."""
    net = _net()
    window = torch.randint(0, TOK.vocab_size - 2, (1, 100))  # longer than the recent branch's 64: guided
    velocity = torch.zeros(TOK.vocab_size, dtype=torch.bool)
    velocity[torch.as_tensor(TOK.velocity_ids())] = True
    options = SamplingOptions().hooks.recall_guidance
    outs = {}
    for full in (True, False):
        decoder = RecallGuidance.of(options, 0.9, TOK, full_velocity=full).around(WindowDecoder(net, True), net)
        logits = decoder.restart(window) * 50  # sharp, as a trained net's often are
        logits[:, velocity] = -2000.0  # every velocity far outside the nucleus, but one
        logits[0, TOK.velocity_ids()[5]] = logits.max() + 1
        outs[full] = decoder.guide(logits.clone())
        away = logits.clone()
        away[:, velocity] = -2000.0  # no velocity plausible: none made so
        assert outs[full][0, ~velocity].isneginf().sum() > 0  # the nucleus still bounds the other ids
        assert decoder.guide(away)[0, velocity].isneginf().all()
    assert not outs[True][0, velocity].isneginf().any()
    assert outs[False][0, velocity].isneginf().sum() == velocity.sum() - 1

def _sample(net, prompt, n=24, use_cache=True, top_p=None, **guidance):
    """``n`` raw ids (no PAD, no EOS) drawn with seed 11 (no nucleus unless ``top_p``), guided as ``guidance``
    (the hook's options: strength, 0 unless given; local; against) says."""
    opts = SamplingOptions(seed=11, top_p=top_p, use_cache=use_cache,
                           hooks={"recall_guidance": {"strength": 0.0, **guidance}})
    return generate(net, None, prompt, opts, guided(opts), max_new_tokens=n)


def test_no_weight_or_a_window_within_the_recent_branch_samples_as_plain_sampling():
    net = _net()
    prompt = torch.randint(0, TOK.vocab_size - 2, (3, 20))
    # this random net's logits are nearly flat: a narrow nucleus (which also bounds what guidance finds
    # plausible) lets the small contrast between the window and its recent ids show
    plain = _sample(net, prompt, top_p=0.5)
    assert torch.equal(_sample(net, prompt, top_p=0.5, strength=2.0, local=64), plain)  # 44 ids < 64
    assert not torch.equal(_sample(net, prompt, top_p=0.5, strength=2.0, local=8), plain)


def _loop_share(ids: torch.Tensor, start: int) -> float:
    """Share of ids from ``start`` on that repeat the id one period back: the loop continued."""
    return (ids[:, start:] == ids[:, start - PERIOD:-PERIOD]).float().mean().item()


def test_a_net_that_half_learned_to_copy_copies_more_often_with_guidance():
    net = _copier(PERIOD, steps=150, context=4 * PERIOD)  # copies a loop ~3 times in 10 when sampled
    torch.manual_seed(5)
    prompt = torch.randint(0, TOK.vocab_size - 2, (32, PERIOD)).repeat(1, 2)  # (32, 48): a loop, twice
    guidance = dict(strength=2.0, local=PERIOD // 2)
    plain = _loop_share(_sample(net, prompt), 2 * PERIOD)
    cached = _sample(net, prompt, **guidance)
    guided = _loop_share(cached, 2 * PERIOD)
    assert 0.05 < plain < 0.8, plain  # the premise: a half-learned copy
    assert guided > plain + 0.2, (plain, guided)  # the recent 12 ids cannot see the copy; the window can
    recomputed = _sample(net, prompt, **guidance, use_cache=False)
    assert torch.equal(recomputed, cached)  # both decoding paths are guided alike


def test_the_options_refuse_a_negative_weight_and_build_guidance_only_when_on():
    assert guidance_of(SamplingOptions(hooks={"recall_guidance": {"strength": 0.0}})) is None
    assert guidance_of(SamplingOptions()).weight > 0  # generation is guided unless told otherwise
    on = guidance_of(SamplingOptions(top_p=0.9, hooks={"recall_guidance": {"strength": 1.0, "local": 32}}))
    assert (on.weight, on.local, on.plausible) == (1.0, 32, 0.9)
    with pytest.raises(GenerateError, match="hooks.recall_guidance.strength must be >= 0"):
        SamplingOptions(hooks={"recall_guidance": {"strength": -1.0}}).check_sampling()
    with pytest.raises(GenerateError, match="hooks.recall_guidance.local must be >= 1"):
        SamplingOptions(hooks={"recall_guidance": {"local": 0}}).check_sampling()
    with pytest.raises(GenerateError, match="recall_guidance.against must be one of recent, continuation, got 'seed'"):
        SamplingOptions(hooks={"recall_guidance": {"against": "seed"}}).check_sampling()
    against = SamplingOptions(hooks={"recall_guidance": {"against": "continuation"}})
    assert guidance_of(against).against == "continuation"
    with pytest.raises(ValueError, match="weight must be >= 0"):
        RecallGuidance(float("nan"), 64, 0.95, "recent")


def test_the_bundled_motif_continued_through_the_options_is_guided_only_when_asked(tmp_path):
    """The path musictx-generate, the evaluations and make continue take: `SamplingOptions` ->
    `sample_continuations` -> `generate`, on the real bundled motif file."""
    from importlib.resources import files

    from musictx.tasks.continue_seed import sample_continuations
    from musictx.tasks.seeds import seed_from_midi

    torch.manual_seed(0)
    net = MusicTransformer(TOK.vocab_size, n_layers=1, d_model=32, n_heads=2, d_ff=32, max_seq_len=256).eval()
    seed = seed_from_midi(TOK, files("musictx") / "assets" / "motif.mid", seed_seconds=4)

    def continuations(**options):
        ids = sample_continuations(net, TOK, seed, SamplingOptions(hooks={"recall_guidance": options}),
                                   num_samples=2, length_seconds=None,
                                   max_tokens=40)
        return [row.tolist() for row in ids]

    plain = continuations(strength=0.0, local=8)
    assert continuations(strength=0.0) == plain  # off: the local length changes nothing
    assert continuations(strength=3.0, local=8) != plain


def test_the_velocities_made_plausible_together_on_their_span_equal_the_mask_expression():
    """Where the velocities' ids run in a row, each row's are made plausible together in place on that span; the
    same bools as the expression over the whole family (a family that does not run in a row takes that one)."""
    family = torch.zeros(60, dtype=torch.bool)
    family[20:32] = True
    spans, whole = (GuidedDecoder.__new__(GuidedDecoder) for _ in range(2))
    spans.guidance, whole.guidance = (RecallGuidance(1.0, 8, 0.9, "recent", None, family) for _ in range(2))
    whole.guidance.family_span = None
    assert spans.guidance.family_span == (20, 32)
    gaps = family.clone()
    gaps[25] = False
    assert RecallGuidance(1.0, 8, 0.9, "recent", None, gaps).family_span is None
    g = torch.Generator().manual_seed(0)
    for batch, share in [(1, 0.97), (1, 0.5), (3, 0.97), (3, 0.999)]:
        implausible = torch.rand(batch, 60, generator=g) < share
        implausible[0, 20:32] = True  # a row without a plausible velocity stays so
        expected = whole._velocities_alike(implausible.clone())
        assert torch.equal(spans._velocities_alike(implausible.clone()), expected)
