"""The infill copy cache (musictx.decoding.hooks.copy_cache): the longest earlier match, the mixture it makes
with the net's distribution, and, with the shipped pop_infill model on a POP909 song whose bars 9-12 come
back later in the song, that the right side of the song then makes the real middle far more likely and
the sampled bars play the song's own music again."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from musictx.checkpoints.model_store import load_pretrained
from musictx.decoding.errors import GenerateError
from musictx.decoding.hooks.copy_cache import (
    CONTINUE_WEIGHTS,
    CopyCache,
    longest_match,
    mix_log_probs,
    mixture_nll,
    weight_of,
)
from musictx.decoding.sampling_options import SamplingOptions
from musictx.evaluation.infill_scorecard import middle_nll
from musictx.io.infill_format import BarSplitter
from musictx.tasks.infill import copy_history, infill_song
from musictx.tasks.song_bars import parse_bars, read_song

from .test_metrical import POP, needs_pop

SONG = POP / "003" / "003.mid"  # bars 9-12 return after bar 12 (3/4 of their ids in long matches), not before


def brute_longest(h: np.ndarray) -> tuple[int, list[int]]:
    best, nexts = 0, []
    for k in range(1, min(len(h) - 1, 24) + 1):
        found = [j + 1 for j in range(k - 1, len(h) - 1) if list(h[j - k + 1:j + 1]) == list(h[-k:])]
        if not found:
            break
        best, nexts = k, [int(h[j]) for j in found]
    return best, nexts


def test_longest_match_agrees_with_a_brute_force_search():
    rng = np.random.default_rng(0)
    for _ in range(200):
        h = rng.integers(0, 3, int(rng.integers(2, 50)))
        k, nexts = longest_match(h)
        assert (k, sorted(nexts.tolist())) == (lambda b: (b[0], sorted(b[1])))(brute_longest(h))
    assert longest_match(np.array([5]))[0] == 0 and longest_match(np.array([1, 2]))[0] == 0


def test_the_mixture_is_a_distribution_that_keeps_forbidden_ids_out():
    log_p = torch.log_softmax(torch.tensor([0.0, 1.0, 2.0, -float("inf"), 0.5]), dim=-1)
    q = np.array([0.0, 0.0, 0.5, 0.0, 0.5])
    mixed = mix_log_probs(log_p, q, 0.6)
    assert float(mixed.exp().sum()) == pytest.approx(1.0, abs=1e-6)
    assert mixed[3] == -float("inf") and mixed[4] > log_p[4]
    assert torch.equal(mix_log_probs(log_p, q, 0.0), log_p)
    assert weight_of(0) == 0 and weight_of(30) > 0.9 and weight_of(5) < weight_of(9) < weight_of(20)


def test_the_hook_follows_the_drawn_ids_and_leans_on_long_matches():
    history = np.array([7, 1, 2, 3, 4, 5, 6] * 3 + [1, 2, 3, 4, 5, 6])
    hook = CopyCache(history)
    hook.start(torch.zeros(2, 1, dtype=torch.long))
    hook.update(torch.tensor([7, 11]), torch.zeros(2, dtype=torch.bool))  # row 0: ... 5 6 7, a long match
    logits = torch.zeros(2, 12)
    out = hook(logits)
    assert float(out[0].exp().sum()) == pytest.approx(1.0, abs=1e-5)
    assert int(out[0].argmax()) == 1  # 7 was followed by 1 every time
    assert torch.allclose(out[1], torch.log_softmax(logits[1], dim=-1))  # 11 never seen: the net alone


def test_a_continuation_copies_each_rows_own_prompt():
    """history=None (task=continue): each row's cache is its own prompt, then what that row has drawn."""
    prompt = torch.tensor([[7, 1, 2, 3, 4, 5, 6] * 4, [7, 8, 9, 3, 4, 5, 6] * 4])  # (2, 28)
    hook = CopyCache(None, weights=CONTINUE_WEIGHTS)
    hook.start(prompt)
    hook.update(torch.tensor([7, 7]), torch.zeros(2, dtype=torch.bool))  # both rows: ... 5 6 7, a long match
    out = hook(torch.zeros(2, 12))
    assert int(out[0].argmax()) == 1 and int(out[1].argmax()) == 8  # each row goes on as its own prompt did
    assert float(out[0].exp()[1]) > 0.5  # a match of 8 ids and more: the fitted weight is large
    hook.update(torch.tensor([11, 2]), torch.zeros(2, dtype=torch.bool))  # row 0 leaves its prompt; row 1 too
    out = hook(torch.zeros(2, 12))
    assert torch.allclose(out[0], torch.log_softmax(torch.zeros(12), dim=-1))  # 11 never seen: the net alone


def test_the_continuation_gets_the_cache_only_with_its_own_option(pop_model):
    from musictx.decoding.hook import HookInputs
    from musictx.decoding.hooks.registry import build_hooks

    _, tok = pop_model
    def made(options):
        return [type(h).__name__ for h in build_hooks(HookInputs("continue", tok, options, programs=[0, 80]))]

    assert "CopyCache" not in made(SamplingOptions())  # off by default
    on = SamplingOptions(hooks={"copy_cache": {"continuation": 0.85}})
    assert made(on)[1] == "CopyCache"  # the first hook, after the shared cursor
    assert "CopyCache" in made(SamplingOptions(hooks={"copy_cache": {"continuation": 0.85, "strength": 0}}))


def test_copy_cache_option_is_checked():
    with pytest.raises(GenerateError, match="hooks.copy_cache.strength must be in"):
        SamplingOptions(hooks={"copy_cache": {"strength": 1.5}}).check_sampling()
    with pytest.raises(GenerateError, match="hooks.copy_cache.continuation must be in"):
        SamplingOptions(hooks={"copy_cache": {"continuation": -0.1}}).check_sampling()


@pytest.fixture(name="pop_model", scope="module")
def fixture_pop_model():
    torch.set_num_threads(1)
    net, tok = load_pretrained("pop")
    return net.eval(), tok


@pytest.fixture(name="infill_model", scope="module")
def fixture_infill_model():
    torch.set_num_threads(1)
    net, tok = load_pretrained("pop_infill")
    return net.eval(), tok


@needs_pop
def test_the_right_side_of_the_song_makes_the_real_middle_likelier(infill_model):
    net, tok = infill_model
    song = read_song(tok, SONG)
    s, e = parse_bars("9-12", song)
    net_both, net_left = (middle_nll(net, tok, song, s, e, True, keep_right=k) for k in (True, False))
    both, left = (middle_nll(net, tok, song, s, e, True, keep_right=k, copy_cache=1.0) for k in (True, False))
    assert abs(net_both - net_left) < 0.1  # the network alone barely reads the right edge
    assert left - both > 0.3 and both < net_both - 0.3
    splitter = BarSplitter(tok)
    middle = np.concatenate([splitter.split(song.bar_ids(b), None)[1] for b in range(s, e)])
    none = mixture_nll(np.log(np.full((len(middle), tok.vocab_size), 1 / tok.vocab_size)), middle,
                       copy_history(tok, song, s, e, None, True), 0.0)
    assert np.allclose(none, np.log(tok.vocab_size))  # strength 0: the net's own NLL


@needs_pop
def test_sampled_bars_play_the_songs_own_music_again(infill_model):
    net, tok = infill_model
    song = read_song(tok, SONG)
    s, e = parse_bars("9-12", song)
    history = copy_history(tok, song, s, e, None, True)

    def long_match_share(middle: np.ndarray) -> float:
        ids = np.concatenate([history, middle])
        return float(np.mean([longest_match(ids[:len(history) + t])[0] >= 8 for t in range(1, len(middle))]))
    shares = {c: np.mean([long_match_share(infill_song(net, tok, song, s, e, None,
                                                       SamplingOptions(seed=k, hooks={"copy_cache": {"strength": c}})
                                                       )[1]) for k in (0, 1)])
              for c in (0.0, 1.0)}
    assert shares[1.0] > shares[0.0] + 0.2


@needs_pop
def test_the_seed_makes_a_songs_real_continuation_likelier(pop_model):
    """Three validation songs the continuation's weights were not fitted on (10 s seed from 25 s, the real next
    30 s): with the cache over the seed the real continuation is likelier; song 006 plays its seed's bars again
    and gains most (0.91 -> 0.46 nats a token when measured), song 020 does not (1.160 -> 1.148)."""
    from musictx.evaluation.copy_fit import continuation_rows, nll

    net, tok = pop_model
    rows = {n: np.array(continuation_rows(net, tok, POP / f"{n:03d}" / f"{n:03d}.mid", 10, 25, 30)) for n in (6, 8, 20)}
    alone, mixed = ({n: nll(r, table) for n, r in rows.items()} for table in ([(0, 0.0)], CONTINUE_WEIGHTS))
    assert all(mixed[n] < alone[n] for n in rows), (alone, mixed)
    assert alone[6] - mixed[6] > 0.3 and alone[20] - mixed[20] < 0.1, (alone, mixed)


@needs_pop
def test_a_pop_continuation_copies_its_seed(pop_model):
    """The shipped pop model continuing a validation song (006, whose next bars play its seed again) with
    the cache on: it is made and mixes the seed's passages in at most draws."""
    from musictx.tasks.continue_metrical import bars_prompt
    from musictx.tasks.metrical_seed import metrical_seed
    from musictx.tasks.prompt import sample

    net, tok = pop_model
    seed = metrical_seed(tok, POP / "006" / "006.mid", 10, 25)
    options = SamplingOptions(seed=0, hooks={"copy_cache": {"continuation": 0.85}})
    prompt = bars_prompt(net, tok, seed, options, num_samples=2, bars=6)
    new = sample(net, prompt)[:, len(seed.ids):]  # (2, T)
    cache = prompt.hooks.made["copy_cache"]
    assert cache.mixed > new.shape[1] // 2, (cache.mixed, new.shape)
