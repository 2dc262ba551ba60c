"""Weights stored in int8 and decoding steps run on the CPU's int8 kernels: the file holds int8 rows and their
scales, loading gives the weights back within half a step of their row's scale and marks the net, the steps then
run `Int8Product` and give the fp32 steps' distribution within a small error; an LSTM is refused in one line."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from musictx.checkpoints.int8_weights import SCALE_SUFFIX, int8_keys
from musictx.checkpoints.model_store import ModelLoadError, load_model, save_model_folder
from musictx.commands.export import main as export_main
from musictx.decoding.engine import FastDecoder, fast_decoder
from musictx.decoding.weights import Int8Product
from musictx.io.tokenizer import EventTokenizer
from musictx.models.lstm import LSTMBaseline
from musictx.models.transformer import MusicTransformer

VOCAB = EventTokenizer().vocab_size


def _net(seed: int = 0) -> MusicTransformer:
    torch.manual_seed(seed)
    return MusicTransformer(VOCAB, d_model=64, n_layers=2, n_heads=4, d_ff=128, dropout=0.0, max_seq_len=256).eval()


@pytest.fixture(name="stored", scope="module")
def fixture_stored(tmp_path_factory):
    """(the fp32 net, its folder stored in int8)."""
    net = _net()
    return net, save_model_folder(net, EventTokenizer(), tmp_path_factory.mktemp("int8") / "m", dtype="int8")


def test_the_file_holds_int8_rows_and_loading_gives_them_back(stored):
    net, folder = stored
    saved = load_file(folder / "model.safetensors")
    products = int8_keys(net)
    assert len(products) == 2 * 4  # qkv, proj and the two feed-forward products of each block
    for key, value in net.state_dict().items():
        if key in products:
            assert saved[key].dtype == torch.int8 and saved[key + SCALE_SUFFIX].shape == value.shape[:1]
        else:
            assert saved[key].dtype == torch.float16
    loaded, _, _ = load_model(folder)
    assert loaded.int8_steps and not net.int8_steps
    for key, value in net.state_dict().items():
        step = saved[key + SCALE_SUFFIX][:, None] if key in products else value.abs().max() / 1000
        assert ((loaded.state_dict()[key] - value).abs() <= step / 2 + 1e-6).all(), key


def test_steps_run_int8_products_and_keep_the_distribution(stored):
    net, folder = stored
    loaded, _, _ = load_model(folder)
    fast = fast_decoder(loaded)
    assert isinstance(fast.weights.blocks[0].fc1_int8, Int8Product)  # the int8 kernels are the ones stepping
    assert fast_decoder(net).weights.blocks[0].fc1_int8 is None  # an fp32 net steps as before
    exact = FastDecoder(loaded)  # the same weights, fp32 products
    ids = torch.randint(0, VOCAB, (1, 43))
    with torch.inference_mode():
        caches = [exact.init_cache(), fast.init_cache()]
        for cache in caches:
            loaded(ids[:, :8], cache=cache)
        gaps = [_total_variation(exact.step(ids[:, t], caches[0]), fast.step(ids[:, t], caches[1]))
                for t in range(8, 40)]
        # three ids in one pass (ids the grammar leaves alone, fed with the next)
        gaps.append(_total_variation(exact.step_many(ids[:, 40:], caches[0]), fast.step_many(ids[:, 40:], caches[1])))
        worst = max(gaps)
    assert 0 < worst < 0.05, worst  # not the fp32 path, and close to it


def _total_variation(a: torch.Tensor, b: torch.Tensor) -> float:
    """Twice the total variation between the distributions of two rows of logits (1, V)."""
    return float((a.softmax(-1) - b.softmax(-1)).abs().sum())


def test_export_stores_a_model_folder_in_int8_and_refuses_an_lstm(stored, tmp_path, capsys):
    _, folder = stored
    export_main([str(folder), str(tmp_path / "again"), "--dtype", "int8"])  # a model folder in, int8 out
    assert load_model(tmp_path / "again")[0].int8_steps
    torch.manual_seed(0)
    small_lstm = LSTMBaseline(VOCAB, d_model=16, hidden_size=32, n_layers=1)
    lstm = save_model_folder(small_lstm, EventTokenizer(), tmp_path / "lstm")
    with pytest.raises(SystemExit):
        export_main([str(lstm), str(tmp_path / "lstm8"), "--dtype", "int8"])
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"musictx-export: error: {lstm}: int8 weights are for the Transformers' blocks; LSTMBaseline "
                   "has none"]
    assert not (tmp_path / "lstm8" / "model.safetensors").exists()


def test_an_int8_weight_without_its_scales_is_refused_naming_the_file(stored, tmp_path):
    from safetensors.torch import save_file

    _, folder = stored
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((folder / "config.json").read_text())
    state = load_file(folder / "model.safetensors")
    del state[next(k for k in state if k.endswith(SCALE_SUFFIX))]
    save_file(state, broken / "model.safetensors")
    with pytest.raises(ModelLoadError, match=r"model\.safetensors: int8 weight blocks\..* has no row scales"):
        load_model(broken)


def test_a_cpu_without_the_int8_kernels_steps_in_fp32_and_says_so(stored, monkeypatch):
    """A quantized engine that cannot pack the rows (an ARM build's, say): the fp32 steps, with a warning."""
    loaded, _, _ = load_model(stored[1])

    def refuse(*_args):
        raise RuntimeError("no int8 product on this engine\nmore detail")

    monkeypatch.setattr(torch.ops.quantized, "linear_prepack", refuse)
    with pytest.warns(UserWarning, match=r"int8 decoding steps unavailable here \(no int8 product on this engine\)"):
        fast = fast_decoder(loaded)
    assert fast.weights.blocks[0].fc1_int8 is None


def test_an_export_in_another_dtype_keeps_the_sources_figures_labelled_as_the_sources(tmp_path, capsys):
    """The int8 folder of a float16 model had kept its val_nll and test_nll in config.json as if its own: they are
    now under info.source_figures, named as the float16 weights', and the export says so in one line."""
    import json

    from musictx.checkpoints.export import SOURCE_FIGURES

    info = {"global_step": 7, "data": "carry/piano", "val_nll": 2.37, "test_nll": 2.41,
            "spot_check": {"nll": 2.47, "tokens": 8184}}
    source = save_model_folder(_net(), EventTokenizer(), tmp_path / "fp16", dtype="float16", info=info)
    export_main([str(source), str(tmp_path / "int8"), "--dtype", "int8"])
    out = capsys.readouterr().out.strip().splitlines()
    got = json.loads((tmp_path / "int8" / "config.json").read_text())["info"]
    assert not {"val_nll", "test_nll", "spot_check"} & set(got), got  # no figure at the top, as the int8 weights'
    assert got["global_step"] == 7 and got["data"] == "carry/piano" and got["source_folder"] == str(source)
    figures = got[SOURCE_FIGURES]
    assert figures["weights_dtype"] == "float16" and figures["folder"] == str(source)
    assert all(figures[k] == info[k] for k in ("val_nll", "test_nll", "spot_check"))
    assert figures["note"].startswith(f"measured on the float16 weights of {source}, not on these int8 weights")
    assert len(out) == 2 and out[1].startswith("musictx-export: its figures (val_nll, test_nll, spot_check) are kept "
                                               "in config.json as info.source_figures: the float16 source weights', "
                                               "not these int8 ones"), out
    # the same dtype again: the same weights, whose figures are theirs, kept as they are and nothing said
    export_main([str(source), str(tmp_path / "again"), "--dtype", "float16"])
    assert capsys.readouterr().out.strip().splitlines()[1:] == []
    again = json.loads((tmp_path / "again" / "config.json").read_text())["info"]
    assert again == {**info, "source_folder": str(source)}
