"""The sustain pedal as ids (TokenizerConfig.pedal_events): encoding order, what sounds, seeds cut while the
pedal is down, the shipped piano's weights grown by the two ids, and real performances."""

import numpy as np
import pytest
import torch

from musictx.io.tokenizer import EventTokenizer, TokenizerConfig
from musictx.tasks.seeds import _encode_from

from . import midi_fixtures as mf
from .helpers import PIANO_DIR, needs_shared

PEDAL = TokenizerConfig(sustain=False, pedal_events=True)


def pedalled_piece(path):
    """C held by the pedal (key up at 0.2 s, pedal 0.1-1.0 s); E struck at 0.5 s, let go as the pedal comes
    up; G struck at that instant. 120 bpm: 96 ticks are 0.1 s."""
    events = [mf.on(0, 60), mf.pedal(96, 127), mf.off(192, 60), mf.on(480, 64), mf.off(960, 64),
              mf.pedal(960, 0), mf.on(960, 67), mf.off(1152, 67)]
    return mf.write_midi(path, [events])


def test_pedal_ids_come_between_a_release_and_a_strike(tmp_path):
    tok = EventTokenizer(PEDAL)
    assert tok.vocab_size == EventTokenizer().vocab_size + 2
    tokens = [tok.id_to_token(int(i)) for i in tok.encode(pedalled_piece(tmp_path / "p.mid"))]
    assert tokens == ["VELOCITY_20", "NOTE_ON_60", "TIME_SHIFT_10", "PEDAL_DOWN", "TIME_SHIFT_10", "NOTE_OFF_60",
                      "TIME_SHIFT_30", "NOTE_ON_64", "TIME_SHIFT_50", "NOTE_OFF_64", "PEDAL_UP", "NOTE_ON_67",
                      "TIME_SHIFT_20", "NOTE_OFF_67"]


def test_decoded_notes_sound_as_the_pedal_holds_them(tmp_path):
    piece = pedalled_piece(tmp_path / "p.mid")
    tok, folded = EventTokenizer(PEDAL), EventTokenizer()
    notes = tok.decode_notes(tok.encode(piece))
    got = list(zip(notes.start.round(3), notes.end.round(3), notes.pitch, strict=True))
    assert got == [(0.0, 1.0, 60), (0.5, 1.0, 64), (1.0, 1.2, 67)]
    same = folded.decode_notes(folded.encode(piece))
    assert np.array_equal(same.end, notes.end) and np.array_equal(same.start, notes.start)
    assert np.array_equal(tok.quantize_notes(tok.read(piece)).end, notes.end)


def test_a_seed_cut_while_the_pedal_is_down_keeps_it_down(tmp_path):
    tok = EventTokenizer(PEDAL)
    ids = _encode_from(tok, pedalled_piece(tmp_path / "p.mid"), seed_from=0.5)
    tokens = [tok.id_to_token(int(i)) for i in ids]
    assert tokens.index("PEDAL_DOWN") < tokens.index("NOTE_ON_64")  # pressed at the cut, before E
    notes = tok.decode_notes(ids)
    assert list(notes.pitch) == [64, 67] and notes.end[0] == pytest.approx(1.0)  # E rings to the lift


def test_pedal_ids_need_the_note_lengths_unfolded():
    with pytest.raises(ValueError, match="sustain: false"):
        TokenizerConfig(pedal_events=True)


def test_the_shipped_piano_grows_two_rows_for_the_pedal():
    from musictx.checkpoints.model_store import load_model
    from musictx.training.finetune import init_net_from

    old, old_tok, _ = load_model("piano")
    net, _ = init_net_from("piano", {"name": "music_transformer"}, EventTokenizer(PEDAL), {})
    emb, old_emb = net.tok_emb.weight.detach(), old.tok_emb.weight.detach()
    assert emb.shape[0] == old_tok.vocab_size + 2
    assert torch.equal(emb[: old_tok.vocab_size], old_emb)
    assert torch.allclose(emb[-1], old_emb.float().mean(0).to(emb.dtype))


@needs_shared
def test_real_performances_sound_the_same_with_the_pedal_as_ids():
    """On real pedalled performances the pedal's ids sound what folding the pedal into the lengths sounds:
    the same notes, and all but a few ends (a key let go within a grid step of a press) the same."""
    tok, folded = EventTokenizer(PEDAL), EventTokenizer()
    pedalled = 0
    for f in sorted(PIANO_DIR.rglob("*.mid"))[:6]:
        ids = tok.encode(f)
        pedalled += ((ids == tok.layout.pedal) | (ids == tok.layout.pedal + 1)).sum() > 10
        a, b = tok.decode_notes(ids), folded.decode_notes(folded.encode(f))
        assert len(a) == len(b) and np.array_equal(a.start, b.start), f.name
        assert np.mean(a.end == b.end) > 0.98, f.name
    assert pedalled >= 3  # most real performances are pedalled (539 of the 594)


def test_the_sampler_continues_a_pedalled_seed_with_the_grown_piano(tmp_path):
    """The run's hooks on pedal ids: the guard without its pedal-release and overtaken rules (a chord's keys
    let go together there, and the overtaken limit was measured with the pedal folded in), and a real
    continuation of the grown shipped net that decodes to sounding notes."""
    from musictx.decoding.hook import HookInputs
    from musictx.decoding.hooks.guard import NoteGrammarGuard
    from musictx.decoding.hooks.registry import build_hooks
    from musictx.decoding.sampling import generate
    from musictx.decoding.sampling_options import SamplingOptions
    from musictx.tasks.seeds import seed_from_midi
    from musictx.training.finetune import init_net_from

    def guard_of(tok, seed):
        hooks = build_hooks(HookInputs("continue", tok, SamplingOptions(), seed=seed, length_seconds=2.0))
        return next(h for h in hooks if isinstance(h, NoteGrammarGuard))

    piece = pedalled_piece(tmp_path / "p.mid")
    tok, folded = EventTokenizer(PEDAL), EventTokenizer()
    seed = seed_from_midi(tok, piece)
    shipped = SamplingOptions().hooks.guard
    assert guard_of(tok, seed).pedal_release is None and guard_of(tok, seed).overtaken_limit is None
    on_folded = guard_of(folded, seed_from_midi(folded, piece))
    assert on_folded.pedal_release == shipped.pedal_release and on_folded.overtaken_limit == shipped.overtaken
    net, _ = init_net_from("piano", {"name": "music_transformer"}, tok, {})
    prompt = torch.as_tensor(seed.ids)[None]
    hooks = build_hooks(HookInputs("continue", tok, SamplingOptions(), seed=seed, length_seconds=4.0))
    out = generate(net.eval(), tok, prompt, SamplingOptions(seed=3), hooks, max_new_tokens=200)
    new = out[0, prompt.shape[1]:].numpy()
    assert len(new) > 20 and (new < tok.vocab_size).all()
    assert len(tok.decode_notes(out[0].numpy())) > len(tok.decode_notes(seed.ids))  # it played on
