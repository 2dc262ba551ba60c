"""The decoding engine (`musictx.decoding.FastDecoder`): the logits of the general forward with a cache up to
float rounding (its operands are laid out for one-row products), hence the same sampled ids for a seed
as the general forward, and as recomputing the whole sequence."""

from __future__ import annotations

import pytest
import torch

from musictx.decoding import FastDecoder, fast_decoder, reference_steps
from musictx.decoding.ops import StepKVCache, decode_attention, decode_table, matvec_operand
from musictx.models import LSTMBaseline, MusicTransformer, VanillaTransformer

VOCAB = 40


def _net(name: str, **kwargs):
    torch.manual_seed(0)
    if name == "music_transformer":  # a table shorter than the context: steps past it use the clipped rows
        return MusicTransformer(VOCAB, d_model=32, n_layers=2, n_heads=2, d_ff=64, dropout=0.1, max_seq_len=64,
                                max_rel_dist=12, attn_block_size=8, **kwargs).eval()
    return VanillaTransformer(VOCAB, d_model=32, n_layers=2, n_heads=2, d_ff=64, dropout=0.1,
                              max_seq_len=64).eval()


def _step(net, decoder: FastDecoder | None, ids: torch.Tensor, state) -> torch.Tensor:
    """Logits (B, 1, V) after one id per row, ids (B,): by the engine, or by the general forward (None)."""
    if decoder is None:
        return net(ids[:, None], cache=state)[0]
    return decoder.step(ids, state)[:, None]


def _step_logits(net, ids: torch.Tensor, prompt: int, fast: bool) -> torch.Tensor:
    with torch.inference_mode():
        decoder = FastDecoder(net) if fast else None
        state = decoder.init_cache() if fast else net.init_cache()
        out = [net(ids[:, :prompt], cache=state)[0]]
        out += [_step(net, decoder, ids[:, t], state) for t in range(prompt, ids.shape[1])]
    return torch.cat(out, dim=1)


@pytest.mark.parametrize("name", ["music_transformer", "transformer"])
@pytest.mark.parametrize("prompt", [1, 20])
@pytest.mark.parametrize("batch", [1, 3])  # batch 1 has its own layout (`StepKVCache.push_pair`)
def test_fast_decoding_steps_equal_the_general_forward(name, prompt, batch, monkeypatch):
    net = _net(name)
    ids = torch.randint(0, VOCAB, (batch, 50), generator=torch.Generator().manual_seed(1))
    pairs_pushed, push_pair = [], StepKVCache.push_pair  # counts the batch-1 writes; the real method still runs
    monkeypatch.setattr(StepKVCache, "push_pair", lambda cache, pair: pairs_pushed.append(1) or push_pair(cache, pair))
    fast, reference = (_step_logits(net, ids, prompt, f) for f in (True, False))
    torch.testing.assert_close(fast, reference, rtol=1e-5, atol=1e-6)
    relative_at_batch_1 = name == "music_transformer" and batch == 1  # the one path that writes pairs
    fast_steps = 50 - prompt
    assert len(pairs_pushed) == (2 * fast_steps if relative_at_batch_1 else 0)  # 2 layers a fast step
    with torch.no_grad():
        torch.testing.assert_close(fast, net(ids), rtol=1e-5, atol=1e-5)  # and the uncached forward


def test_fast_steps_past_a_growing_buffer_equal_the_general_forward():
    """A cache without a capacity doubles its buffers as it fills: the views the fast step reads
    (`StepKVCache.keys_t`, ``values``) and the decode table must follow."""
    net = _net("music_transformer")
    ids = torch.randint(0, VOCAB, (2, 60), generator=torch.Generator().manual_seed(4))
    logits, states = {}, {}
    for fast in (True, False):
        with torch.inference_mode():
            decoder = FastDecoder(net) if fast else None
            state = states[fast] = decoder.init_cache() if fast else net.init_cache()
            for layer in state.layers:
                layer.capacity = None  # grow from 16 by doubling: 16, 32, 64
            first = net(ids[:, :1], cache=state)[0]
            logits[fast] = torch.cat([first] + [_step(net, decoder, ids[:, t], state) for t in range(1, 60)], dim=1)
    assert states[True].layers[0]._k.shape[2] == 64
    torch.testing.assert_close(logits[True], logits[False], rtol=1e-5, atol=1e-6)


def test_a_decoder_reads_the_parameters_it_was_made_with_and_a_new_one_the_changed_ones():
    """Every cache of one decoder shares its gathered tensors (samplers start caches often: a slid window,
    recall guidance); after an optimizer step or a load_state_dict, a new decoder gives the new net's logits."""
    net = _net("music_transformer")
    ids = torch.randint(0, VOCAB, (1, 12), generator=torch.Generator().manual_seed(5))

    def fast_and_reference(decoder):
        with torch.inference_mode():
            state = decoder.init_cache()
            net(ids[:, :11], cache=state)
            return decoder.step(ids[:, 11], state)[:, None], net(ids)[:, -1:]

    decoder = FastDecoder(net)
    fast, reference = fast_and_reference(decoder)
    torch.testing.assert_close(fast, reference, rtol=1e-5, atol=1e-5)
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    net.train()
    torch.nn.functional.cross_entropy(net(ids).flatten(0, 1), ids.flatten()).backward()
    opt.step()
    net.eval()
    stale, reference = fast_and_reference(decoder)
    assert not torch.allclose(stale, reference, rtol=1e-5, atol=1e-5)  # the old copies: the old net
    fast, reference = fast_and_reference(FastDecoder(net))
    torch.testing.assert_close(fast, reference, rtol=1e-5, atol=1e-5)
    net.load_state_dict(_net("music_transformer").state_dict())
    fast, reference = fast_and_reference(FastDecoder(net))
    torch.testing.assert_close(fast, reference, rtol=1e-5, atol=1e-5)


def test_one_row_operands_copy_widening_layers_and_read_narrowing_ones_in_place():
    """The faster layout per shape: a row-major (in, out) copy for a layer that widens, the parameter's
    own rows (a transposed view, no copy) for one that narrows; both are the same x @ W."""
    net = _net("music_transformer")  # d_model 32, d_ff 64
    block = net.blocks[0]
    weights = FastDecoder(net).weights.blocks[0]
    fc1_op, fc2_op = weights.fc1_wt, weights.fc2_wt
    assert fc1_op.shape == (32, 64) and fc1_op.is_contiguous()
    assert fc1_op.untyped_storage().data_ptr() != block.ff[0].weight.untyped_storage().data_ptr()
    assert fc2_op.shape == (64, 32) and not fc2_op.is_contiguous()
    assert fc2_op.untyped_storage().data_ptr() == block.ff[2].weight.untyped_storage().data_ptr()
    x = torch.randn(1, 64)
    torch.testing.assert_close(x @ fc2_op, torch.nn.functional.linear(x, block.ff[2].weight))
    square = torch.randn(8, 8)
    assert matvec_operand(square).is_contiguous()  # in == out: the copy, the faster of the two at 192 x 192


def test_a_net_made_in_inference_mode_decodes_too():
    with torch.inference_mode():
        net = _net("music_transformer")
        ids = torch.randint(0, VOCAB, (1, 8), generator=torch.Generator().manual_seed(6))
        decoder = FastDecoder(net)
        state = decoder.init_cache()
        net(ids[:, :7], cache=state)
        torch.testing.assert_close(decoder.step(ids[:, 7], state), net(ids)[:, -1], rtol=1e-5, atol=1e-5)


def test_fast_step_runs_without_onednn_and_puts_the_flag_back(monkeypatch):
    """The step's GELU takes ATen's kernel (oneDNN's costs ~15 us a call on one row): the flag is off
    inside every block's step, back to what it was after it, also when the step fails."""
    import musictx.decoding.engine as engine

    net, seen = _net("music_transformer"), []
    real_step = engine.block_step

    def spy(x, cache, weights):
        seen.append(torch.backends.mkldnn.enabled)
        return real_step(x, cache, weights)

    monkeypatch.setattr(engine, "block_step", spy)
    with torch.inference_mode():
        decoder = FastDecoder(net)
        state = decoder.init_cache()
        net(torch.zeros(1, 5, dtype=torch.long), cache=state)
        assert torch.backends.mkldnn.enabled
        decoder.step(torch.ones(1, dtype=torch.long), state)
        assert seen == [False, False] and torch.backends.mkldnn.enabled
        with pytest.raises(IndexError):
            decoder.step(torch.full((1,), VOCAB + 5), state)  # an id past the table fails inside the step
        assert torch.backends.mkldnn.enabled
        monkeypatch.setattr(torch.backends.mkldnn, "enabled", False)
        decoder.step(torch.ones(1, dtype=torch.long), state)
        assert not torch.backends.mkldnn.enabled  # a caller's own choice is left as it was
        monkeypatch.setattr(torch.backends.mkldnn, "enabled", True)
        seen.clear()
        # bf16 keeps oneDNN: ATen's own bf16 matmuls are slow
        half = FastDecoder(_net("music_transformer").to(torch.bfloat16))
        state = half.init_cache()
        half.net(torch.zeros(1, 5, dtype=torch.long), cache=state)
        half.step(torch.ones(1, dtype=torch.long), state)
        assert seen == [True, True]


def _sample(net, prompt: torch.Tensor, n: int, mode: str) -> torch.Tensor:
    """n ids per row, drawn from softmax(logits) with a fixed generator: by cached steps (fast or
    reference path) or by recomputing the whole sequence every step."""
    gen = torch.Generator().manual_seed(3)
    ids = prompt
    with torch.inference_mode():
        decoder = FastDecoder(net) if mode == "fast" else None
        state = decoder.init_cache() if decoder else net.init_cache()
        logits = net(prompt, cache=state)[0] if mode != "recompute" else net(prompt)
        for _ in range(n):
            nxt = torch.multinomial(logits[:, -1].softmax(-1), 1, generator=gen)  # (B, 1)
            ids = torch.cat([ids, nxt], dim=1)
            logits = net(ids) if mode == "recompute" else _step(net, decoder, nxt[:, 0], state)
    return ids


def test_sampled_ids_are_those_of_the_reference_path_and_of_recomputation():
    net = _net("music_transformer")
    prompt = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(2))
    runs = {mode: _sample(net, prompt, 40, mode) for mode in ("fast", "reference", "recompute")}
    assert torch.equal(runs["fast"], runs["reference"])
    assert torch.equal(runs["fast"], runs["recompute"])
    assert not torch.equal(runs["fast"][0], runs["fast"][1])  # the samples are not trivially alike


@pytest.mark.parametrize("name", ["music_transformer", "transformer"])
@pytest.mark.parametrize("batch", [1, 2])
def test_several_caches_decoded_together_equal_each_stepped_alone(name, batch):
    """Recall guidance feeds the same id to two caches: in one pass (the products on all their rows at
    once; the vanilla net adds each cache's own position) the logits are each cache's, and the caches
    go on as if stepped alone."""
    net = _net(name)
    gen = torch.Generator().manual_seed(3)
    ids, new = torch.randint(0, VOCAB, (batch, 30), generator=gen), torch.randint(0, VOCAB, (batch, 3), generator=gen)
    with torch.inference_mode():
        decoder = FastDecoder(net)

        def two_caches():
            return [net(ids, cache=decoder.init_cache())[1], net(ids[:, -7:], cache=decoder.init_cache())[1]]

        alone, together = two_caches(), two_caches()
        for t in range(3):
            expected = [net(new[:, t : t + 1], cache=cache)[0][:, -1] for cache in alone]
            for got, want in zip(decoder.step_together(new[:, t], together), expected, strict=True):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        assert [c.length for c in together] == [33, 10]
        torch.testing.assert_close(together[1].layers[0].k, alone[1].layers[0].k)
        full = net(torch.randint(0, VOCAB, (batch, net.max_seq_len)), cache=decoder.init_cache())[1]
        with pytest.raises(ValueError, match="exceed max_seq_len"):
            decoder.step_together(new[:, 0], [together[0], full])


@pytest.mark.parametrize(("batch", "cached", "skipped"), [(1, 30, 1), (1, 30, 5), (2, 9, 4), (1, 50, 3)])
def test_a_branch_catching_up_in_the_same_pass_equals_the_general_forward(batch, cached, skipped):
    """Pitch-only recall guidance: one cache steps one id while another takes the ``skipped`` ids it fell
    behind by, all in one pass; each cache's logits and keys are the general forward's, within the relative
    table's distances and past them (30 or 50 keys > max_rel_dist 12: the far ones clip)."""
    net = _net("music_transformer")
    gen = torch.Generator().manual_seed(5)
    ids = torch.randint(0, VOCAB, (batch, cached + skipped + 1), generator=gen)
    with torch.inference_mode():
        decoder = FastDecoder(net)
        assert decoder.catches_up and not FastDecoder(_net("transformer")).catches_up
        ahead = net(ids[:, :cached], cache=decoder.init_cache())[1]  # steps one id
        behind = net(ids[:, : cached - skipped + 1], cache=decoder.init_cache())[1]  # catches up on the rest
        skipped_ids = ids[:, cached - skipped + 1 : cached + 1]  # (B, skipped): the last is the new id
        mine, theirs = decoder.step_catching_up(ids[:, cached], ahead, skipped_ids, behind)
        full = net(ids[:, : cached + 1])  # (B, T, V)
        torch.testing.assert_close(mine, full[:, -1], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(theirs, full[:, -1], rtol=1e-5, atol=1e-5)
        assert ahead.length == behind.length == cached + 1
        reference = net(ids[:, : cached + 1], cache=decoder.init_cache())[1]
        for layer in (0, -1):
            torch.testing.assert_close(behind.layers[layer].k, reference.layers[layer].k, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(behind.layers[layer].v, reference.layers[layer].v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("batch", "cached", "known"), [(1, 30, 2), (2, 9, 3), (1, 50, 2)])
def test_ids_known_ahead_fed_in_one_pass_equal_the_general_forward(batch, cached, known):
    """An id the grammar leaves alone is fed with the next one (`step_many`), alone or beside a catching-up
    branch (`step_catching_up` with several ids of its own): the logits after them and the keys are the general
    forward's, within the relative table's distances and past them."""
    net = _net("music_transformer")
    ids = torch.randint(0, VOCAB, (batch, cached + known), generator=torch.Generator().manual_seed(8))
    full = net(ids)  # (B, T, V)
    with torch.inference_mode():
        decoder = FastDecoder(net)
        alone = net(ids[:, :cached], cache=decoder.init_cache())[1]
        torch.testing.assert_close(decoder.step_many(ids[:, cached:], alone), full[:, -1], rtol=1e-5, atol=1e-5)
        ahead, behind = (net(ids[:, :n], cache=decoder.init_cache())[1] for n in (cached, cached - 4))
        mine, theirs = decoder.step_catching_up(ids[:, cached:], ahead, ids[:, cached - 4 :], behind)
        torch.testing.assert_close(mine, full[:, -1], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(theirs, full[:, -1], rtol=1e-5, atol=1e-5)
        reference = net(ids, cache=decoder.init_cache())[1]
        for cache in (alone, ahead, behind):
            assert cache.length == cached + known
            torch.testing.assert_close(cache.layers[-1].v, reference.layers[-1].v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [1, 2])
def test_a_branch_restarting_in_the_same_pass_equals_the_general_forward(batch):
    """A fresh cache takes a whole window of ids in the pass of another cache's step (recall guidance's
    branch starting again): its logits are those of the net run on the window alone."""
    net = _net("music_transformer")
    ids = torch.randint(0, VOCAB, (batch, 40), generator=torch.Generator().manual_seed(6))
    with torch.inference_mode():
        decoder = FastDecoder(net)
        ahead, fresh = net(ids[:, :-1], cache=decoder.init_cache())[1], decoder.init_cache()
        mine, theirs = decoder.step_catching_up(ids[:, -1], ahead, ids[:, -20:], fresh)
        torch.testing.assert_close(mine, net(ids)[:, -1], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(theirs, net(ids[:, -20:])[:, -1], rtol=1e-5, atol=1e-5)
        assert fresh.length == 20
        # starting again in the same cache, emptied (the branch every 64 ids): the floats of a new one, bit for bit
        again = decoder.step_catching_up(ids[:, -1], net(ids[:, :-1], cache=decoder.init_cache())[1],
                                         ids[:, -12:], decoder.emptied(fresh))
        new = decoder.step_catching_up(ids[:, -1], net(ids[:, :-1], cache=decoder.init_cache())[1],
                                       ids[:, -12:], decoder.init_cache())
        assert fresh.length == 12 and all(torch.equal(a, b) for a, b in zip(again, new, strict=True))


def test_the_engine_serves_the_transformers_outside_reference_steps():
    """The LSTM has no engine (its forward is its step); `reference_steps` sends samplers to the general
    forward, for the bench's A/B, and the engine is back after the block."""
    assert isinstance(fast_decoder(_net("music_transformer")), FastDecoder)
    assert isinstance(fast_decoder(_net("transformer")), FastDecoder)
    assert fast_decoder(LSTMBaseline(VOCAB, d_model=8, hidden_size=8, n_layers=1)) is None
    with reference_steps():
        assert fast_decoder(_net("music_transformer")) is None
    assert fast_decoder(_net("music_transformer")) is not None


def test_onednn_comes_back_only_when_the_last_overlapping_step_ends(monkeypatch):
    """Two threads decoding at once: the first to finish must not switch oneDNN back on under the
    other, nor the last leave it off."""
    from musictx.decoding.ops import without_onednn

    monkeypatch.setattr(torch.backends.mkldnn, "enabled", True)
    first, second = without_onednn(True), without_onednn(True)
    first.__enter__()
    second.__enter__()  # a second thread's step starts while the first runs
    first.__exit__(None, None, None)
    assert not torch.backends.mkldnn.enabled
    second.__exit__(None, None, None)
    assert torch.backends.mkldnn.enabled
    with without_onednn(False):
        assert torch.backends.mkldnn.enabled


def test_two_threads_decoding_at_once_leave_onednn_as_it_was():
    import threading

    net = _net("music_transformer")
    ids = torch.randint(0, VOCAB, (2, 40), generator=torch.Generator().manual_seed(7))
    alone = [_step_logits(net, ids[i : i + 1], 5, True) for i in range(2)]
    together: dict[int, torch.Tensor] = {}
    threads = [threading.Thread(target=lambda i=i: together.__setitem__(i, _step_logits(net, ids[i : i + 1], 5, True)))
               for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert torch.backends.mkldnn.enabled
    for i in range(2):  # close, not equal: while one thread steps, the other's prompt may take ATen's GELU
        torch.testing.assert_close(together[i], alone[i], rtol=1e-5, atol=1e-6)


def test_decode_table_columns_are_the_distances_in_key_order():
    rel = torch.randn(2, 5, 3)  # (H, M, D)
    table = decode_table(rel)  # (H, D, M): column c is distance 4 - c
    assert table.shape == (2, 3, 5) and table.is_contiguous()
    for c in range(5):
        assert torch.equal(table[:, :, c], rel[:, 4 - c])


def test_push_one_equals_append_and_the_views_follow_the_buffer():
    one, many = StepKVCache(capacity=None), StepKVCache(capacity=None)
    k, v = torch.randn(2, 3, 20, 4), torch.randn(2, 3, 20, 4)
    for t in range(20):
        one.push_one(k[:, :, t], v[:, :, t])
    many.append(k, v)
    assert one.n == many.n == 20 and one._k.shape[2] == 32  # grown 16 -> 32 on the 17th
    assert torch.equal(one.k, k) and torch.equal(one.v, v) and torch.equal(many.k, k)
    assert torch.equal(one.keys_t[:, :, :20], k.reshape(6, 20, 4).transpose(1, 2))
    assert torch.equal(one.values[:, :20], v.reshape(6, 20, 4))


def test_push_pair_equals_push_one_at_batch_one_one_entry_or_several():
    one, pairs = StepKVCache(capacity=None), StepKVCache(capacity=None)
    k, v = torch.randn(1, 3, 20, 4), torch.randn(1, 3, 20, 4)
    for t in range(20):
        one.push_one(k[:, :, t], v[:, :, t])
        pairs.push_pair(torch.stack([k[0, :, t : t + 1], v[0, :, t : t + 1]]))  # (2, H, 1, D)
    assert pairs.n == 20 and pairs._k.shape[2] == 32
    assert torch.equal(pairs.k, one.k) and torch.equal(pairs.v, one.v)
    assert torch.equal(pairs.keys_t[:, :, :20], one.keys_t[:, :, :20])
    assert torch.equal(pairs.values[:, :20], one.values[:, :20])
    several = StepKVCache(capacity=None)  # a catch-up's entries in one copy: 3, then 14 (grown 16 -> 32), then 3
    for a, z in ((0, 3), (3, 17), (17, 20)):
        several.push_pair(torch.stack([k[0, :, a:z], v[0, :, a:z]]))  # (2, H, z - a, D)
    assert several.n == 20 and torch.equal(several.k, one.k) and torch.equal(several.v, one.v)
    assert torch.equal(several.keys_t[:, :, :20], one.keys_t[:, :, :20])


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("n_keys", [4, 6, 10])  # fewer keys than the table's 6 distances, as many, more
def test_decode_attention_reads_the_cache_buffers_in_place(batch, n_keys):
    cache = StepKVCache(capacity=32)
    k, v = torch.randn(batch, 3, n_keys, 4), torch.randn(batch, 3, n_keys, 4)
    cache.append(k, v)
    q = torch.randn(batch, 3, 4)
    rel = torch.randn(3, 6, 4)
    got = decode_attention(q.transpose(0, 1), cache, decode_table(rel)).view(batch, 3, 4)
    dist = torch.arange(n_keys - 1, -1, -1).clamp(max=5)  # key j is at distance n - 1 - j, clipped to the table
    logits = torch.einsum("bhd,bhjd->bhj", q, k) + torch.einsum("bhd,hjd->bhj", q, rel[:, dist])
    expected = torch.einsum("bhj,bhjd->bhd", (logits / 2.0).softmax(-1), v)
    torch.testing.assert_close(got, expected)
