"""musictx used from a script or a notebook, not through its commands: what the package shows, and a one-line
error naming the argument for what a script hands it by mistake, on the shipped models and real MIDI files."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import musictx
from musictx.checkpoints.model_store import ModelLoadError
from musictx.decoding import DecodingOptions, GenerateError, LogitsHook, SamplingOptions, generate
from musictx.evaluation.recall import token_nll
from musictx.evaluation.scoring import score_pieces
from musictx.models import LSTMBaseline, MusicTransformer, VanillaTransformer
from musictx.paths import BUNDLED_MOTIF
from musictx.tasks import metrical_seed, sample_continuations, seed_from_midi

from .helpers import PIANO_DIR, needs_shared

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def piano():
    return musictx.load_pretrained("piano")


@pytest.fixture(scope="module")
def pop():
    return musictx.load_pretrained("pop")


def test_dir_and_star_import_show_the_lazy_names_without_loading_torch():
    script = ("import sys, musictx, musictx.decoding, musictx.tasks, musictx.generation\n"
              "assert {'load_pretrained', 'load_model'} <= set(dir(musictx)), dir(musictx)\n"
              "for face in (musictx.decoding, musictx.tasks, musictx.generation):\n"
              "    assert set(face.__all__) <= set(dir(face)), face\n"
              "assert 'generate' in dir(musictx.decoding) and 'torch' not in sys.modules\n"
              "from musictx import *\n"
              "assert callable(load_pretrained) and callable(load_model)\n")
    subprocess.run([sys.executable, "-c", script], check=True)


def test_load_pretrained_points_a_path_to_load_model():
    with pytest.raises(ModelLoadError, match=r"no shipped model .*musictx.load_model"):
        musictx.load_pretrained(str(BUNDLED_MOTIF.parent))


# ----- decoding ids back to MIDI ----------------------------------------------------------------------------
def test_event_decode_refuses_a_batch_and_fractional_ids(piano):
    _, tok = piano
    ids = tok.encode(BUNDLED_MOTIF)
    notes = len(tok.decode(ids).instruments[0].notes)
    assert len(tok.decode(torch.as_tensor(ids)[None]).instruments[0].notes) == notes  # generate's (1, T) row
    assert len(tok.decode(ids.astype(float)).instruments[0].notes) == notes  # whole floats are ids
    with pytest.raises(ValueError, match=r"one sequence.*\(2, \d+\).*each row"):
        tok.decode(np.stack([ids, ids]))  # was one piece of both rows' notes laid end to end
    with pytest.raises(ValueError, match=r"whole numbers.*0.5 at position 0"):
        tok.decode(ids + 0.5)  # was cut to whole ids without a word


def test_metrical_decode_names_ids_outside_its_vocabulary_and_takes_no_ids(pop):
    _, tok = pop
    ids = tok.encode(BUNDLED_MOTIF)
    assert sum(len(i.notes) for i in tok.decode(ids).instruments) > 0
    with pytest.raises(ValueError, match=rf"id {tok.vocab_size + 5} at position {len(ids)} outside the vocabulary"):
        tok.decode(np.append(ids, tok.vocab_size + 5))  # was dropped silently
    with pytest.raises(ValueError, match=r"id -1 at position 3 outside"):
        tok.decode(np.insert(ids, 3, -1))  # was a KeyError inside MidiTok
    with pytest.raises(ValueError, match=r"one sequence"):
        tok.decode(np.stack([ids, ids]))
    for nothing in ([], [tok.pad_id, tok.eos_id]):  # was pretty_midi's "max() arg is an empty sequence"
        assert tok.decode(nothing).instruments == []


# ----- the sampler --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("prompt, kind, said", [
    (lambda ids: ids.numpy()[None], TypeError, r"prompt must be a torch.Tensor.*ndarray"),
    (lambda ids: ids[None].float(), TypeError, r"prompt must hold integer ids.*float32"),
    (lambda ids: torch.cat([ids[None], torch.tensor([[1000]])], 1), ValueError, r"prompt holds id 1000.*390"),
    (lambda ids: ids[None, :0].expand(0, -1), ValueError, r"prompt has no rows"),
])
def test_generate_names_a_wrong_prompt(piano, prompt, kind, said):
    net, tok = piano
    ids = torch.as_tensor(tok.encode(BUNDLED_MOTIF)[:40])
    with pytest.raises(kind, match=said):
        generate(net, tok, prompt(ids), DecodingOptions(), max_new_tokens=4)


def test_generate_names_wrong_options_hooks_and_lengths(piano):
    net, tok = piano
    prompt = torch.as_tensor(tok.encode(BUNDLED_MOTIF)[:40])[None]
    with pytest.raises(TypeError, match=r"opts must be a DecodingOptions.*dict"):
        generate(net, tok, prompt, {"seed": 1}, max_new_tokens=4)
    with pytest.raises(TypeError, match=r"max_new_tokens must be a whole number, got 4.0"):
        generate(net, tok, prompt, DecodingOptions(), max_new_tokens=4.0)
    with pytest.raises(TypeError, match=r"hooks\[0\] is a function, not a musictx.decoding.LogitsHook"):
        generate(net, tok, prompt, DecodingOptions(), [lambda logits: logits], max_new_tokens=4)

    class NoLowNotes(LogitsHook):  # the documented way still runs: below MIDI 60, no NOTE_ON is drawn
        def __call__(self, logits):
            logits[:, : 60 - tok.config.pitch_min] = float("-inf")
            return logits

    out = generate(net, tok, prompt, DecodingOptions(seed=1), [NoLowNotes()], max_new_tokens=30)[0, 40:]
    assert out.shape == (30,) and not (out < 60 - tok.config.pitch_min).any()


@pytest.mark.parametrize(("setting", "said"), [
    ({"temperature": float("nan")}, r"temperature must be a finite number, got nan"),  # drew silently before
    ({"top_k": 2.5}, r"top_k must be a whole number, got 2.5"),  # torch's topk() error before
    ({"seed": 2**70}, r"seed must be a whole number in \[0, "),  # torch's overflow before
    ({"full_velocity": "yes"}, r"full_velocity must be true or false"),  # read as true before
])
def test_generate_checks_its_decoding_options_and_leaves_the_callers_alone(piano, setting, said):
    net, tok = piano
    prompt = torch.as_tensor(tok.encode(BUNDLED_MOTIF)[:40])[None]
    with pytest.raises(GenerateError, match=said):
        generate(net, tok, prompt, DecodingOptions(**setting), max_new_tokens=4)
    opts = DecodingOptions(top_k=20.0, seed=3)  # a whole-valued float, as Hydra reads 2e1, runs as 20
    out = generate(net, tok, prompt, opts, max_new_tokens=8)
    assert torch.equal(out, generate(net, tok, prompt, DecodingOptions(top_k=20, seed=3), max_new_tokens=8))
    assert isinstance(opts.top_k, float)  # the caller's object is not rewritten


def test_sample_continuations_names_num_samples_and_the_seed_takes_its_own_tokenizer(piano, pop):
    net, tok = piano
    seed = seed_from_midi(tok, BUNDLED_MOTIF, seed_seconds=4)
    with pytest.raises(GenerateError, match=r"num_samples must be >= 1, got 0"):  # numpy's 'need at least one array'
        sample_continuations(net, tok, seed, SamplingOptions(), num_samples=0, length_seconds=2, max_tokens=None)
    with pytest.raises(GenerateError, match=r"seed_from_midi takes a Performance tokenizer.*metrical_seed"):
        seed_from_midi(pop[1], BUNDLED_MOTIF, seed_seconds=4)  # was AttributeError: no encode_notes
    with pytest.raises(GenerateError, match=r"metrical_seed takes a metrical tokenizer.*seed_from_midi"):
        metrical_seed(tok, BUNDLED_MOTIF, seed_seconds=4)  # was AttributeError: no fit_registers


# ----- the networks -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: MusicTransformer(390, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=64),
    lambda: VanillaTransformer(390, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=64),
    lambda: LSTMBaseline(390, d_model=32, hidden_size=32, n_layers=1),
])
def test_a_net_names_ids_of_the_wrong_shape_kind_or_range(make):
    net = make().eval()
    ids = torch.randint(0, 390, (2, 16))
    assert net(ids).shape == (2, 16, 390)
    with pytest.raises(ValueError, match=r"\(B, T\) token ids, got shape \(16,\)"):
        net(ids[0])  # the LSTM ran it as one unbatched sequence: logits (T, V)
    with pytest.raises(TypeError, match=r"integers.*float32"):
        net(ids.float())
    with pytest.raises(ValueError, match=r"ids hold 390, outside the model's vocabulary of size 390"):
        net(torch.cat([ids, torch.full((2, 1), 390)], 1))
    with pytest.raises(ValueError, match=r"no rows"):
        net(ids[:0])


# ----- scoring ------------------------------------------------------------------------------------------------
@needs_shared
def test_scoring_runs_in_eval_mode_and_leaves_a_training_net_training(piano):
    net, tok = piano
    ids = tok.encode(PIANO_DIR / "maestro_excerpts" / "Maestro_1.mid")[:300]
    net.eval()
    expected = token_nll(net, ids).mean()
    try:
        net.train()
        assert token_nll(net, ids).mean() == pytest.approx(expected, abs=1e-6)  # was dropout-noised
        assert net.training and all(m.training for m in net.modules())
        totals = score_pieces(net, lambda i: ids, 1, np.array([len(ids)]), context=len(ids), pad_id=tok.pad_id,
                              progress=False)
        assert totals.nll / totals.tokens == pytest.approx(expected, abs=1e-5)
        assert net.training  # score_pieces left it in eval mode
    finally:
        net.eval()


def test_sampling_and_scoring_put_back_each_modules_own_train_flag(piano):
    """A net training with one part frozen in eval mode (a fine-tune's embedding) comes back as it was: the sampler's
    ``net.train(was_training)`` put every module back in train mode."""
    _, tok = piano
    net = MusicTransformer(tok.vocab_size, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=64)
    net.train()
    net.tok_emb.eval()
    before = {name: m.training for name, m in net.named_modules()}
    generate(net, tok, torch.tensor([[tok.pad_id + 1] * 4]), SamplingOptions(), max_new_tokens=3)
    score_pieces(net, lambda i: np.arange(1, 40) % tok.vocab_size, 1, np.array([39]), context=32, progress=False)
    assert {name: m.training for name, m in net.named_modules()} == before


def test_lightning_module_takes_the_tokenizer_itself_and_saves_its_dict(piano):
    from musictx.training.lit_module import MusicLitModule

    _, tok = piano
    net = MusicTransformer(tok.vocab_size, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=64)
    module = MusicLitModule(net, tok)  # was AttributeError: 'EventTokenizer' object has no attribute 'get'
    assert module.hparams["tokenizer"] == tok.to_dict()
