"""Scoring a split: windows cover every target once; a uniform model scores exactly log(V)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from musictx.evaluation.metrics import compare, interval_ngrams, motif_reuse, note_density, tv_distance
from musictx.evaluation.scoring import plan_windows, score_pieces
from musictx.io.midi_io import Notes


class UniformNet(torch.nn.Module):
    """Equal logits for every id, whatever the input: NLL must be log(V) per token."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.seen = []

    def forward(self, ids):
        self.seen.append(ids.clone())
        return torch.zeros(*ids.shape, self.vocab_size)


class CopyNet(torch.nn.Module):
    """Predicts that the next id equals the current one: right on runs, wrong elsewhere."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size

    def forward(self, ids):
        return torch.nn.functional.one_hot(ids, self.vocab_size).float() * 50.0


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 200), st.integers(1, 40), st.data())
def test_windows_score_every_target_exactly_once(n, context, data):
    stride = data.draw(st.integers(1, context))
    covered = []
    for w in plan_windows(n, context, stride):
        assert 0 <= w.start and w.start + w.length <= n - 1 and w.length <= context
        covered += range(w.start + 1 + w.score_from, w.start + 1 + w.length)
        # Every scored target after the first window has at least context - stride tokens of history.
        if w.start > 0:
            assert w.score_from >= context - stride
    assert sorted(covered) == list(range(1, n))


def test_uniform_model_scores_log_vocab_and_counts_every_token():
    rng = np.random.default_rng(0)
    pieces = [rng.integers(0, 390, size=n) for n in (1, 2, 7, 50, 333)]
    net = UniformNet(390)
    totals = score_pieces(net, lambda i: pieces[i], len(pieces), np.array([len(p) for p in pieces]), context=16,
                          stride=5, batch_size=4, pad_id=388, progress=False).as_dict()
    assert totals["tokens"] == sum(len(p) - 1 for p in pieces)
    assert totals["nll"] == pytest.approx(math.log(390), rel=1e-6)
    assert totals["ppl"] == pytest.approx(390, rel=1e-5)
    assert totals["bits_per_token"] == pytest.approx(math.log2(390), rel=1e-6)
    assert all(x.shape[1] == 16 for x in net.seen)


def test_accuracy_and_nll_of_a_copy_model():
    piece = np.array([5, 5, 5, 7, 7, 9])  # copy predicts 5,5,5,7,7 for targets 5,5,7,7,9: 3 of 5 right
    totals = score_pieces(CopyNet(10), lambda i: piece, 1, np.array([6]), context=3, stride=1,
                          progress=False).as_dict()
    assert totals["tokens"] == 5
    assert totals["accuracy"] == pytest.approx(3 / 5)


def notes(rows):
    a = np.array(rows, dtype=float).reshape(-1, 4)
    return Notes(a[:, 0], a[:, 1], a[:, 2].astype(int), a[:, 3].astype(int))


def test_continuation_metrics_on_hand_made_notes():
    scale = notes([(i * 0.5, i * 0.5 + 0.4, 60 + s, 80) for i, s in enumerate([0, 2, 4, 5, 7, 9, 11, 12])])
    same_up_a_fifth = notes([(i * 0.5, i * 0.5 + 0.4, 67 + s, 80) for i, s in enumerate([0, 2, 4, 5, 7, 9, 11, 12])])
    assert tv_distance(np.array([1.0, 0]), np.array([0, 1.0])) == 1.0
    assert motif_reuse(scale, same_up_a_fifth) == 1.0  # interval motifs ignore transposition
    assert motif_reuse(scale, notes([(0, 1, 60, 80)])) == 0.0
    assert len(interval_ngrams(scale)) == 4
    assert note_density(scale) == pytest.approx(8 / 3.9)
    m = compare(scale, scale, real=scale)
    assert m["pitch_class_tv_vs_seed"] == 0 and m["ioi_tv_vs_seed"] == 0 and m["motif_reuse"] == 1.0
    assert compare(same_up_a_fifth, scale)["pitch_class_tv_vs_seed"] > 0
