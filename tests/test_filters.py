"""The draw's filters on hand-made distributions: top-k, the nucleus and its shortcut, the draw's noise taken ahead,
a family's value past the nucleus, and the hooks' lean (`add_at`)."""

from __future__ import annotations

import pytest
import torch

from musictx.decoding.filters import (
    KeptLeans,
    NoiseStream,
    add_at,
    exponential_like_torch,
    sample_next,
    surely_in_nucleus,
    top_k_filter,
    top_p_filter,
)

INF = float("-inf")


def kept(logits: torch.Tensor) -> list[int]:
    return torch.isfinite(logits).nonzero().flatten().tolist()


def test_top_k_keeps_the_k_largest():
    logits = torch.tensor([0.1, 0.4, 0.2, 0.3]).log()
    assert kept(top_k_filter(logits, 1)) == [1]
    assert kept(top_k_filter(logits, 2)) == [1, 3]
    assert kept(top_k_filter(logits, 3)) == [1, 2, 3]
    assert torch.equal(top_k_filter(logits, 10), logits)
    kept_values = top_k_filter(logits, 2)[[1, 3]]
    assert torch.equal(kept_values, logits[[1, 3]])  # kept logits are unchanged
    batch = torch.tensor([[1.0, 3.0, 2.0], [5.0, 4.0, 0.0]])
    assert torch.isfinite(top_k_filter(batch, 2)).tolist() == [[False, True, True], [True, True, False]]
    with pytest.raises(ValueError, match="top_k"):
        top_k_filter(logits, 0)


def test_top_p_keeps_the_smallest_nucleus_and_always_the_top_token():
    # probabilities 0.15, 0.5, 0.05, 0.3 -> ranked 1 (0.5), 3 (0.3), 0 (0.15), 2 (0.05)
    logits = torch.tensor([0.15, 0.5, 0.05, 0.3]).log()
    assert kept(top_p_filter(logits, 0.1)) == [1]  # the top token even though it alone exceeds p
    assert kept(top_p_filter(logits, 0.5)) == [1]  # 0.5 reached by the top token exactly
    assert kept(top_p_filter(logits, 0.75)) == [1, 3]
    assert kept(top_p_filter(logits, 0.85)) == [0, 1, 3]
    assert kept(top_p_filter(logits, 0.99)) == [0, 1, 2, 3]
    assert torch.equal(top_p_filter(logits, 1.0), logits)
    batch = torch.stack([logits, torch.tensor([0.7, 0.1, 0.1, 0.1]).log()])
    assert torch.isfinite(top_p_filter(batch, 0.75)).tolist() == [[False, True, False, True],
                                                                   [True, True, False, False]]
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="top_p"):
            top_p_filter(logits, bad)


def test_nucleus_shortcut_never_keeps_what_the_filter_drops():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(400, 390, generator=gen) * torch.rand(400, 1, generator=gen) * 6  # flat to peaked rows
    logits[:50, :4] = 0.0  # ties at the top
    probs = logits.softmax(-1)
    kept_by_filter = torch.isfinite(top_p_filter(logits, 0.9))  # (400, 390)
    said, surely = 0, 0
    for row in range(len(logits)):
        for pick in torch.randint(0, 390, (20,), generator=gen).tolist() + [int(probs[row].argmax())]:
            said += 1
            if surely_in_nucleus(probs[row : row + 1], torch.tensor([pick]), 0.9):
                surely += 1
                assert kept_by_filter[row, pick]
    assert 0.05 < surely / said < 0.95  # both answers happen: the test reaches both sides
    # a batch is sure only when every row is
    top = probs.argmax(-1)
    assert surely_in_nucleus(probs[:3], top[:3], 0.9)
    tail = probs[1].argmin().view(1)
    assert not surely_in_nucleus(probs[:2], torch.cat([top[:1], tail]), 0.9)


def test_sample_next_with_top_p_draws_as_filter_then_draw():
    """The shortcut (draw first, filter only when the id might be outside the nucleus) gives the ids of the
    plain recipe, filter and then draw, with the same noise, on rows where it is taken and where not."""
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(3000, 390, generator=gen) * torch.rand(3000, 1, generator=gen) * 5
    for p in (0.5, 0.95):
        for batch in (1, 4):
            draws, by_recipe, shortcuts = [], [], []
            for rows in logits.split(batch):
                g1, g2 = torch.Generator().manual_seed(len(draws)), torch.Generator().manual_seed(len(draws))
                draws.append(sample_next(rows, top_p=p, generator=g1))
                noise = torch.empty(rows.shape).exponential_(generator=g2)
                by_recipe.append((top_p_filter(rows, p).softmax(-1) / noise).argmax(-1))
                probs = rows.softmax(-1)
                shortcuts.append(surely_in_nucleus(probs, (probs / noise).argmax(-1), p))
            assert torch.equal(torch.cat(draws), torch.cat(by_recipe))
            assert 0 < sum(shortcuts) < len(shortcuts)  # both ways of drawing were taken
    with pytest.raises(ValueError, match="top_p"):
        sample_next(logits[:1], top_p=1.5)


def test_sampling_follows_the_filtered_distribution():
    probs = torch.tensor([0.15, 0.5, 0.05, 0.3])
    logits = probs.log().expand(40_000, -1)
    gen = torch.Generator().manual_seed(0)
    ids = sample_next(logits, top_p=0.85, generator=gen)
    freq = torch.bincount(ids, minlength=4).float() / len(ids)
    assert freq[2] == 0  # outside the nucleus: never drawn
    torch.testing.assert_close(freq[[0, 1, 3]], probs[[0, 1, 3]] / 0.95, atol=0.01, rtol=0)
    ids = sample_next(logits, temperature=0.5, generator=gen)  # p^2, renormalised
    freq = torch.bincount(ids, minlength=4).float() / len(ids)
    torch.testing.assert_close(freq, probs**2 / (probs**2).sum(), atol=0.01, rtol=0)


def test_temperature_zero_is_argmax_and_draws_nothing():
    gen = torch.Generator().manual_seed(0)
    state = gen.get_state()
    logits = torch.randn(5, 50)
    assert torch.equal(sample_next(logits, temperature=0, top_p=0.5, generator=gen), logits.argmax(-1))
    assert torch.equal(gen.get_state(), state)
    with pytest.raises(ValueError, match="temperature"):
        sample_next(logits, temperature=-1.0)


@pytest.mark.parametrize("draws", [0, 1, 63, 64, 65, 150])
def test_noise_stream_draws_what_one_call_per_draw_draws(draws):
    ahead, per_call = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    stream = NoiseStream(ahead, draws_left=200)
    for _ in range(draws):
        assert torch.equal(stream.next(torch.Size([2, 7])), torch.empty(2, 7).exponential_(generator=per_call))
    stream.close()
    assert torch.equal(ahead.get_state(), per_call.get_state())


@pytest.mark.parametrize("seed", [0, 7, 2026])
def test_the_noise_is_torchs_exponential_number_for_number(seed):
    """The noise streams' numbers (`exponential_like_torch`: uniform doubles, then their logarithm in vector ops) are
    torch's own ``exponential_`` floats, bit for bit, 2 M of them a seed, and leave the generator where it would."""
    mine, torchs = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    got = exponential_like_torch((1000, 2000), mine)
    expected = torch.empty(1000, 2000).exponential_(generator=torchs)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    assert torch.equal(got, expected)
    assert torch.equal(mine.get_state(), torchs.get_state())


def test_add_at_is_indexing_plus_equals_bit_for_bit():
    """The hooks' lean (`add_at`): a place named twice gains the bonus once, -inf stays -inf, and every other logit
    is the very float it was, as ``logits[rows, cols] += value`` gives."""
    logits = torch.randn(3, 40, generator=torch.Generator().manual_seed(0)) * 7
    logits[1, 5] = float("-inf")
    rows, cols = [0, 0, 1, 2, 2], [3, 3, 5, 39, 0]
    for value in (4.0, 0.3, -2.0):
        expected = logits.clone()
        expected[torch.tensor(rows), torch.tensor(cols)] += value
        got = add_at(logits, rows, cols, value)
        assert torch.equal(got, expected) and got is not logits
        assert got[0, 3] == logits[0, 3] + value  # once, though named twice
    assert torch.isneginf(add_at(logits, [1], [5], 4.0)[1, 5])


def test_kept_leans_add_what_add_at_adds_and_keep_each_row_once():
    """A hook's kept bonus rows (`KeptLeans`) give `add_at`'s floats call after call; a row is made once per id set
    and value, and made again for logits of another dtype."""
    leans, gen = KeptLeans(), torch.Generator().manual_seed(1)
    for rows, cols, value in [([0], [3], 2.0), ([0, 0], [3, 9], 2.0), ([0], [3], 2.0), ([0], [3], -1.5)] * 2:
        logits = torch.randn(1, 40, generator=gen)
        assert torch.equal(leans(logits, rows, cols, value), add_at(logits, rows, cols, value))
    assert len(leans.kept) == 3
    half = torch.randn(1, 40, generator=gen).bfloat16()
    got = leans(half, [0], [3], 2.0)
    assert got.dtype == torch.bfloat16 and torch.equal(got, add_at(half, [0], [3], 2.0))


def test_a_familys_value_is_drawn_past_the_nucleus_once_the_nucleus_draws_one_of_them():
    # ids 0-1 are "note" ids, 2-4 a family (velocities): 4 (p = 0.04) is outside the 0.9 nucleus, yet once the
    # nucleus draws a velocity, its value comes from all three with the same noise; no velocity row: the nucleus
    row = torch.log(torch.tensor([0.30, 0.06, 0.35, 0.25, 0.04]))
    logits = row.expand(2000, 5).clone()
    family = torch.tensor([False, False, True, True, True])
    plain = sample_next(logits, 1.0, None, 0.9, torch.Generator().manual_seed(0))
    past = sample_next(logits, 1.0, None, 0.9, torch.Generator().manual_seed(0), family=family)
    unfiltered = sample_next(logits, 1.0, None, None, torch.Generator().manual_seed(0))
    assert (plain == 4).sum() == 0 and 40 < (past == 4).sum() < 140  # the soft one comes back, about 4%
    notes = ~family[plain]
    assert torch.equal(past[notes], plain[notes])  # rows where the nucleus drew a note: unchanged
    assert torch.equal(family[past], family[plain])  # whether a velocity comes stays the nucleus's
    velocity_rows = family[plain]
    assert torch.equal(past[velocity_rows & family[unfiltered]], unfiltered[velocity_rows & family[unfiltered]])
    only_velocities = torch.where(family, row, torch.tensor(float("-inf"))).expand(200, 5).clone()
    assert torch.equal(sample_next(only_velocities, 1.0, None, 0.9, torch.Generator().manual_seed(1), family=family),
                       sample_next(only_velocities, 1.0, None, None, torch.Generator().manual_seed(1)))
