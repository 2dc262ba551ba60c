"""Attention arcs: note <-> token bookkeeping, the net's per-layer probabilities, the picture and the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pretty_midi
import pytest
import torch

from musictx.checkpoints.model_store import save_model_folder
from musictx.evaluation.arcs import ArcChoice, attention_arcs, notes_with_tokens, plot_arcs, share_on_span
from musictx.evaluation.attention_view import AttentionOptions, draw_attention, summary_lines
from musictx.io.midi_io import MidiReadError
from musictx.io.tokenizer import EventTokenizer
from musictx.models.attention import causal_allowed, clipped_table, naive_logits
from musictx.paths import BUNDLED_MOTIF

from .gen_fixtures import tiny_net
from .helpers import write_random_midi


def test_each_note_knows_its_note_on_token(tmp_path):
    tok = EventTokenizer()
    ids = tok.encode(write_random_midi(tmp_path / "a.mid", seed=1, n_notes=60, seconds=8.0))
    notes, on_index = notes_with_tokens(tok, ids)
    assert len(notes) == len(on_index) > 40
    steps, kept, _ = tok.split_time_shifts(ids)
    step_of = dict(zip(np.flatnonzero((ids < tok.layout.time_shift) | (ids >= tok.layout.velocity)).tolist(),
                       steps.tolist(), strict=True))
    for k, t in enumerate(on_index.tolist()):
        assert ids[t] == tok.layout.note_on + int(notes.pitch[k])  # a NOTE_ON of the note's pitch
        assert step_of[t] * tok.config.time_step == pytest.approx(notes.start[k])  # at the note's onset
    assert len(set(on_index.tolist())) == len(on_index)


def test_net_attention_probs_are_each_layers_real_attention():
    """Layer by layer, the net's maps equal the naive reference applied to that layer's actual input."""
    net = tiny_net("music_transformer", max_seq_len=40).double()
    ids = torch.randint(0, 388, (1, 40))
    rows = torch.tensor([39, 10, 25])
    maps = net.attention_probs(ids, rows)  # (L, B, H, R, T)
    assert maps.shape == (2, 1, 2, 3, 40)
    x = net.tok_emb(ids) * net.tok_emb.embedding_dim**0.5
    for layer, block in enumerate(net.blocks):
        h = block.ln1(x)
        q, k, _ = block.attn.qkv(h).view(1, 40, 3, 2, 16).permute(2, 0, 3, 1, 4).unbind(0)
        table = clipped_table(block.attn.rel_emb, 40)  # max_rel_dist 20: farther keys use its last row
        logits = naive_logits(q, k, table).masked_fill(~causal_allowed(40, 40), float("-inf"))
        torch.testing.assert_close(maps[layer], logits.softmax(-1)[:, :, rows].detach())
        x = block(x)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 1, 2, 3, dtype=torch.float64))


def test_arcs_of_a_piece_and_the_picture(tmp_path):
    net = tiny_net("music_transformer", max_seq_len=256)
    tok = EventTokenizer()
    ids = tok.encode(BUNDLED_MOTIF)
    arc_map = attention_arcs(net, tok, ids, ArcChoice(layer=1, head=0, last_notes=5, top=2))
    assert arc_map.label == "layer 1, head 0" and len(arc_map.queries) == 5
    assert arc_map.span.describe().startswith("drawing the whole piece, 0.0-")
    np.testing.assert_array_equal(arc_map.queries, np.arange(len(arc_map.notes))[-5:])
    for q, row in zip(arc_map.queries, arc_map.weights, strict=True):
        later = arc_map.on_index >= arc_map.on_index[q]  # its own and later notes are not visible yet
        assert float(np.abs(row[later]).max()) == 0.0 and 0 < row.sum() <= 1 + 1e-6
    arcs = arc_map.top_arcs(2)
    assert len(arcs) == 10 and all(k < q for q, k, _ in arcs)
    mean = attention_arcs(net, tok, ids, ArcChoice(last_notes=5))
    assert mean.label == "mean of 2 layers, mean of heads" and not np.allclose(mean.weights, arc_map.weights)
    assert 0 < share_on_span(mean, 0.0, 4.0) < 1
    png = plot_arcs(arc_map, tmp_path / "arcs.png", top=2, takeover=4.0)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def _long_piece(tmp_path, context: int) -> tuple[Path, np.ndarray, EventTokenizer]:
    """A random piece of at least three times `context` tokens, read as a seed is (from its first note)."""
    from musictx.tasks.seeds import seed_from_midi

    tok = EventTokenizer()
    midi = write_random_midi(tmp_path / "long.mid", seed=2, n_notes=90, seconds=12.0)
    ids = seed_from_midi(tok, midi).ids
    assert len(ids) >= 3 * context
    return midi, ids, tok


def test_a_piece_past_the_context_keeps_its_own_seconds(tmp_path):
    """The window is the model's last context of tokens, but its notes, the seed and from_seconds keep the
    piece's times, and the span drawn is said."""
    net = tiny_net("music_transformer", max_seq_len=64)
    _, ids, tok = _long_piece(tmp_path, 64)
    whole, whole_on = notes_with_tokens(tok, ids)
    piece_s = tok.split_time_shifts(ids)[2] * tok.config.time_step
    arc_map = attention_arcs(net, tok, ids, ArcChoice(last_notes=4))
    span = arc_map.span
    assert (span.first, span.stop) == (len(ids) - 64, len(ids)) and span.start_s > piece_s / 2
    assert span.describe() == (f"drawing {span.start_s:.1f}-{piece_s:.1f} s of {piece_s:.1f} s: "
                               "the model's context is 64 tokens")
    note_at = {t: k for k, t in enumerate(whole_on.tolist())}
    for k, t in enumerate(arc_map.on_index.tolist()):  # each note where the whole piece has it
        j = note_at[t + span.first]
        assert (arc_map.notes.start[k], arc_map.notes.pitch[k]) == (pytest.approx(whole.start[j]), whole.pitch[j])
    assert arc_map.notes.start.min() >= span.start_s
    assert share_on_span(arc_map, 0.0, span.start_s) == 0.0  # a seed that ends before the window is not seen
    assert share_on_span(arc_map, 0.0, piece_s) > 0
    later = attention_arcs(net, tok, ids, ArcChoice(from_seconds=span.start_s + 1.0))
    assert len(later.queries) > 0 and later.notes.start[later.queries].min() >= span.start_s + 1.0
    early = attention_arcs(net, tok, ids, ArcChoice(last_notes=4, until_seconds=piece_s / 3))
    assert early.span.stop < len(ids) and early.notes.start[early.queries].max() <= piece_s / 3
    assert "until_seconds" in early.span.describe() and early.span.end_s <= piece_s / 3
    png = plot_arcs(arc_map, tmp_path / "arcs.png", top=2, takeover=span.start_s + 1.0)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("choice, message", [(ArcChoice(layer=2), "layer=2 out of range"),
                                             (ArcChoice(head=-1), "head=-1 out of range"),
                                             (ArcChoice(from_seconds=999.0), "no query notes")])
def test_bad_choices_are_named(choice, message):
    net, tok = tiny_net("music_transformer", max_seq_len=256), EventTokenizer()
    with pytest.raises(ValueError, match=message):
        attention_arcs(net, tok, tok.encode(BUNDLED_MOTIF), choice)


def test_lstm_has_no_arcs():
    tok = EventTokenizer()
    with pytest.raises(ValueError, match="LSTMBaseline has no attention"):
        attention_arcs(tiny_net("lstm"), tok, tok.encode(BUNDLED_MOTIF), ArcChoice())


def _console(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "musictx-attention"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "musictx.commands.show_attention"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.slow  # 35-80 s of subprocesses on a Zen 3; make test-all runs it
def test_console_script_on_a_model_folder(tmp_path):
    folder = save_model_folder(tiny_net("music_transformer", max_seq_len=256), EventTokenizer(), tmp_path / "m")
    out = tmp_path / "arcs.png"
    done = _console(f"checkpoint={folder}", f"output={out}", "takeover=4", "top=2", "last_notes=6")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "12 arcs from 6 notes" in done.stdout and "on the seed" in done.stdout
    record = json.loads(out.with_suffix(".json").read_text())
    assert len(record["arcs"]) == 12 and 0 <= record["share_on_seed"] <= 1
    assert all(a["to_s"] < a["from_s"] or a["to_note"] < a["from_note"] for a in record["arcs"])
    before = out.read_bytes()
    again = _console(f"checkpoint={folder}", f"output={out}")  # never over a file this run did not write
    assert again.returncode == 1 and "overwrite=true" in again.stderr and out.read_bytes() == before
    bad = _console(f"checkpoint={folder}", f"output={tmp_path / 'bad.png'}", "layer=7")
    assert bad.returncode == 1 and "layer=7 out of range" in bad.stderr and "Traceback" not in bad.stderr
    not_midi = tmp_path / "x.mid"
    not_midi.write_bytes(b"not a midi file")
    bad = _console(f"checkpoint={folder}", f"midi={not_midi}", f"output={tmp_path / 'bad.png'}")
    assert bad.returncode == 1 and str(not_midi) in bad.stderr and "Traceback" not in bad.stderr


def test_console_says_which_span_of_a_long_piece_it_draws(tmp_path):
    folder = save_model_folder(tiny_net("music_transformer", max_seq_len=64), EventTokenizer(), tmp_path / "m")
    midi, _, _ = _long_piece(tmp_path, 64)
    out = tmp_path / "arcs.png"
    done = _console(f"checkpoint={folder}", f"midi={midi}", f"output={out}", "takeover=1", "last_notes=4")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.with_suffix(".json").read_text())
    span = record["span"]
    assert span["start_s"] > 1 and f"drawing {span['start_s']:.1f}-" in done.stdout
    assert "the model's context is 64 tokens" in done.stdout and "0% on the seed" in done.stdout
    assert record["share_on_seed"] == 0 and min(a["to_s"] for a in record["arcs"]) >= span["start_s"]


def _options(tmp_path, **given) -> AttentionOptions:
    base = dict(checkpoint="piano", midi=None, layer=None, head=None, last_notes=4, from_seconds=None, top=2,
                takeover=None, until_seconds=None, output=str(tmp_path / "arcs.png"), threads=1)
    return AttentionOptions(**{**base, **given})


@pytest.mark.parametrize("given, message", [({"last_notes": 0}, "last_notes=0: ask for at least 1 query note"),
                                            ({"takeover": -5.0}, r"takeover=-5.0: give seconds >= 0"),
                                            ({"until_seconds": -1.0}, r"until_seconds=-1.0: give seconds >= 0")])
def test_the_commands_options_are_checked_before_a_model_loads(tmp_path, given, message):
    with pytest.raises(ValueError, match=message):
        draw_attention(_options(tmp_path, checkpoint="no-such-model", **given))


def test_a_file_without_notes_is_said_as_the_files_problem_and_a_remi_model_counts_pitch_tokens(tmp_path):
    empty = tmp_path / "empty.mid"
    pretty_midi.PrettyMIDI().write(str(empty))
    with pytest.raises(MidiReadError, match="empty.mid: no notes$"):
        draw_attention(_options(tmp_path, midi=str(empty)))
    summary = draw_attention(_options(tmp_path, checkpoint="pop"))
    assert summary["note_token"] == "Pitch" and "of their attention on Pitch tokens" in summary_lines(summary)
