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


def test_copy_cache_option_is_checked():
    with pytest.raises(GenerateError, match="hooks.copy_cache.strength must be in"):
        SamplingOptions(hooks={"copy_cache": {"strength": 1.5}}).check_sampling()


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


