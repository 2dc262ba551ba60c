"""Models: shapes, causality, cached decoding == full forward, rebuilding from config, a tiny training run."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from musictx.models import MODELS, LSTMBaseline, MusicTransformer, VanillaTransformer, build_model

VOCAB = 23
TINY = {
    "music_transformer": dict(d_model=32, n_layers=2, n_heads=4, d_ff=64, dropout=0.0, max_seq_len=48,
                              max_rel_dist=10, attn_block_size=8),
    "transformer": dict(d_model=32, n_layers=2, n_heads=4, d_ff=64, dropout=0.0, max_seq_len=48),
    "lstm": dict(d_model=32, hidden_size=48, n_layers=2, dropout=0.0),
}


def _tiny(name, seed=0, **overrides):
    torch.manual_seed(seed)
    return build_model(name, VOCAB, **{**TINY[name], **overrides})


def _ids(B=2, T=30, seed=1):
    return torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))


def test_registry_names_match_classes():
    assert MODELS == {"music_transformer": MusicTransformer, "transformer": VanillaTransformer,
                      "lstm": LSTMBaseline}
    for name, cls in MODELS.items():
        assert cls.name == name
    with pytest.raises(ValueError):
        build_model("gru", VOCAB)


@pytest.mark.parametrize("name", sorted(TINY))
def test_logits_shape_and_max_seq_len(name):
    net = _tiny(name)
    assert net(_ids(3, 17)).shape == (3, 17, VOCAB)
    assert net.max_seq_len == (None if name == "lstm" else 48)
    assert net.num_params() == sum(p.numel() for p in net.parameters()) > 0


@pytest.mark.parametrize("name", sorted(TINY))
def test_rebuild_from_config(name):
    net = _tiny(name).eval()
    clone = build_model(net.name, **net.get_config()).eval()
    clone.load_state_dict(net.state_dict())
    ids = _ids()
    torch.testing.assert_close(clone(ids), net(ids))
    assert net.get_config()["vocab_size"] == VOCAB


@pytest.mark.parametrize("name", sorted(TINY))
def test_causality(name):
    net = _tiny(name).eval()
    ids = _ids()
    with torch.no_grad():
        logits = net(ids)
        for t in (0, 9, 25):
            ids2 = ids.clone()
            ids2[:, t + 1] = (ids2[:, t + 1] + 1) % VOCAB
            logits2 = net(ids2)
            torch.testing.assert_close(logits2[:, : t + 1], logits[:, : t + 1])
            assert not torch.allclose(logits2[:, t + 1], logits[:, t + 1])


@pytest.mark.parametrize("name", sorted(TINY))
def test_cached_decoding_matches_full_forward(name):
    net = _tiny(name).eval()
    ids = _ids(T=40)
    with torch.no_grad():
        full = net(ids)
        state = net.init_cache()
        logits, state = net(ids[:, :13], cache=state)  # prompt chunk
        steps = [logits]
        for t in range(13, 40):  # then one token per step
            logits, state = net(ids[:, t : t + 1], cache=state)
            steps.append(logits)
    assert state.length == 40
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_new_state_on_last_tokens_matches_full_forward_of_them():
    """What a sliding-window sampler does: a fresh state fed the last tokens of a piece."""
    net = _tiny("music_transformer").eval()
    ids = _ids(T=40)
    with torch.no_grad():
        logits, state = net(ids[:, 25:], cache=net.init_cache())
        torch.testing.assert_close(logits, net(ids[:, 25:]))
        assert state.length == 15


@pytest.mark.parametrize("name", ["music_transformer", "transformer"])
def test_feeding_past_max_seq_len_raises(name):
    net = _tiny(name).eval()
    with pytest.raises(ValueError):
        net(_ids(T=49))
    state = net.init_cache()
    with torch.no_grad():
        net(_ids(T=48), cache=state)
        with pytest.raises(ValueError):
            net(_ids(T=1), cache=state)


@pytest.mark.parametrize("impl", ["naive", "skew"])
def test_music_transformer_impls_agree(impl):
    net = _tiny("music_transformer").eval()
    ids = _ids()
    with torch.no_grad():
        ref = net(ids)
        net.set_attn_impl(impl)
        torch.testing.assert_close(net(ids), ref, atol=1e-5, rtol=1e-5)
    assert net.get_config()["attn_impl"] == impl


def test_gradient_checkpointing_gives_same_gradients():
    ids = _ids()
    grads = []
    for flag in (False, True):
        net = _tiny("music_transformer", gradient_checkpointing=flag).train()
        F.cross_entropy(net(ids).flatten(0, 1), ids.flatten()).backward()
        grads.append(torch.cat([p.grad.flatten() for p in net.parameters()]))
    torch.testing.assert_close(grads[1], grads[0])


def test_learned_positions_variant():
    net = _tiny("transformer", positions="learned").eval()
    ids = _ids()
    with torch.no_grad():
        logits, _ = net(ids, cache=net.init_cache())
        torch.testing.assert_close(logits, net(ids), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_training_learns_a_repeating_pattern(name):
    """A few dozen Adam steps on a repeating 7-token motif must bring the loss far down."""
    net = _tiny(name, dropout=0.1).train()
    motif = torch.tensor([3, 8, 1, 15, 8, 4, 20])
    seq = motif.repeat(7)[:40]
    batch = torch.stack([seq.roll(-s) for s in range(4)])  # (4, 40): four phases of the motif
    x, y = batch[:, :-1], batch[:, 1:]
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        loss = F.cross_entropy(net(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses[::8]


def test_lstm_under_cpu_bf16_autocast_runs_on_any_cpu():
    """oneDNN builds a bf16 LSTM only with AVX-512 bf16 (Zen 4, not Zen 3): elsewhere the recurrent layers run
    in fp32 and say so once; the head stays under autocast either way."""
    from musictx.models import lstm

    net = LSTMBaseline(390, d_model=16, hidden_size=16, n_layers=2, dropout=0.0)
    seen = []
    net.lstm.register_forward_hook(lambda _m, _i, out: seen.append(out[0].dtype))
    ids = torch.randint(0, 388, (2, 12))
    lstm.LSTMBaseline._told_fp32 = False
    with torch.autocast("cpu", dtype=torch.bfloat16), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logits = net(ids)
        net(ids)  # told once, not per call
    told = [w for w in caught if "no bf16 LSTM kernel" in str(w.message)]
    assert logits.dtype == torch.bfloat16 and logits.shape == (2, 12, 390)
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        assert seen == [torch.bfloat16] * 2 and not told
    else:
        assert seen == [torch.float32] * 2 and len(told) == 1
    assert torch.isfinite(logits.float()).all()
