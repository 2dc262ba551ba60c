"""The recall measurements on cases with known answers: a net trained here to copy gains a lot, an
untrained one nothing; n-gram repeats; the context curve; mode=recall end to end; the training-time probe."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch

from musictx.evaluation.recall import (
    context_ceiling,
    copy_gain,
    draw_probes,
    evaluate_recall,
    format_recall_table,
    nll_vs_context,
    plot_recall,
    repeated_positions,
)
from musictx.evaluation.run import evaluation_options
from musictx.io.token_store import TokenArrays
from musictx.io.tokenizer import EventTokenizer
from musictx.models import MusicTransformer, VanillaTransformer

from .conftest import PIECE_SECONDS, make_prepared_dataset
from .test_train import compose_train, fit

TOK = EventTokenizer()
PASSAGE, GAP = 24, 8


def _copier(period: int, steps: int = 150, context: int | None = None) -> MusicTransformer:
    """A one-layer relative transformer trained on random ids that repeat every ``period`` tokens: it learns
    to copy the token ``period`` back (one relative distance), and nothing else. ``context``: its
    ``max_seq_len`` (default two periods)."""
    torch.manual_seed(0)
    context = context or 2 * period
    net = MusicTransformer(TOK.vocab_size, n_layers=1, d_model=64, n_heads=2, d_ff=64, dropout=0.0,
                           max_seq_len=context, max_rel_dist=context)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(steps):
        ids = torch.randint(0, TOK.vocab_size - 2, (16, period)).repeat(1, 2)  # (16, 2 * period)
        logits = net(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits[:, period - 1:].transpose(1, 2), ids[:, period:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()


@pytest.fixture(scope="module")
def copier() -> MusicTransformer:
    return _copier(PASSAGE + GAP)


@pytest.fixture(scope="module")
def probes(prepared_dir):
    return draw_probes(TokenArrays(prepared_dir, "train"), 6, PASSAGE, 40, seed=1)


def test_a_net_trained_to_copy_gains_a_lot_and_an_untrained_one_nothing(copier, probes):
    trained = copy_gain(copier, TOK, probes, GAP)
    assert trained["gain"] > 1.5, trained  # it predicts the repeat from its earlier copy
    assert trained["nll_control"] - 0.5 > trained["nll_repeat"]
    other_gap = copy_gain(copier, TOK, probes, GAP + 5)  # its one distance no longer lands on the copy
    assert other_gap["gain"] < trained["gain"] / 3, other_gap
    torch.manual_seed(1)
    untrained = MusicTransformer(TOK.vocab_size, n_layers=1, d_model=32, n_heads=2, d_ff=32, max_seq_len=128).eval()
    assert abs(copy_gain(untrained, TOK, probes, GAP)["gain"]) < 0.05


def test_the_copy_gain_splits_by_event_family(copier, probes):
    """The families partition the scored targets, and the copier (which copies any id) gains in each."""
    res = copy_gain(copier, TOK, probes, GAP)
    fam = res["by_event"]
    assert set(fam) == {"note_on", "note_off", "time_shift", "velocity"}
    total = sum(f["tokens"] for f in fam.values())
    assert total == len(probes) * (PASSAGE - 16)
    for key in ("nll_repeat", "nll_control"):
        assert sum(f[key] * f["tokens"] for f in fam.values()) / total == pytest.approx(res[key], rel=1e-5)
    assert all(f["gain"] > 1.0 for f in fam.values()), fam


def test_a_remi_models_copy_gain_is_split_by_remis_own_event_names(tmp_path):
    """REMI's targets had been filed under Performance names (Pitch as note_on, Duration as note_off) and its
    Program, TimeSig and Tempo tokens under none: now every target is under its own token type, by name."""
    from musictx.checkpoints.model_store import load_model
    from musictx.evaluation.recall import Probe

    from .metrical_fixtures import band_song

    net, tok, _ = load_model("pop")
    songs = [tok.encode(band_song(tmp_path / f"s{i}.mid", bars=8, seed=i))[:-1] for i in range(3)]
    probes = [Probe(songs[0][:48], songs[1][:32], songs[2][:48])]
    res = copy_gain(net, tok, probes, gap=16, skip=8)
    fam = res["by_event"]
    types = set(tok.type_of[probes[0].passage[8:]])
    assert set(fam) == types and {"Pitch", "Duration", "Program"} <= types, fam
    assert not set(fam) & {"note_on", "note_off", "time_shift", "velocity"}
    assert sum(f["tokens"] for f in fam.values()) == 48 - 8  # every scored target in one family
    table = format_recall_table({"copy": {"exact": [res]}, "repeats": {"nll_repeat": None, "windows": 0, "ngram": 8},
                                 "context": [], "settings": {"passage": 48}, "trained_context": 1024})
    assert "copy gain, Pitch" in table and "note_on" not in table


def test_probes_come_from_three_pieces_and_a_split_too_small_is_refused(prepared_dir, probes):
    arrays = TokenArrays(prepared_dir, "train")
    p = probes[0]
    assert len(p.passage) == len(p.unrelated) == PASSAGE and len(p.filler) == 40
    assert not np.array_equal(p.passage, p.unrelated)
    with pytest.raises(ValueError, match="needs 3 pieces"):
        draw_probes(TokenArrays(prepared_dir, "validation"), 2, PASSAGE, 10)
    assert len(draw_probes(arrays, 3, PASSAGE, 10)) == 3


def test_a_passage_too_long_for_the_context_is_refused_with_the_way_out(prepared_dir):
    """The default passage (128) twice does not fit a context of 128 at any gap: said, with the passage that fits."""
    from musictx.evaluation.recall import KEYS

    cfg = dict.fromkeys(KEYS, 0) | {"gaps": [0, 64], "passage": 128, "skip": 16, "num_probes": 2}
    with pytest.raises(ValueError, match=r"no gap of recall.gaps=\[0, 64\] fits .* context of 128: lower "
                                         r"recall.passage \(at most 64\)"):
        evaluate_recall(None, EventTokenizer(), TokenArrays(prepared_dir, "train"), cfg, context=128)


def test_repeated_positions_mark_targets_that_close_a_heard_ngram():
    ids = np.array([5, 6, 7, 8, 9, 5, 6, 7, 1, 5, 6])
    assert repeated_positions(ids, 3).tolist() == [False] * 7 + [True] + [False] * 3
    assert repeated_positions(ids, 2).nonzero()[0].tolist() == [6, 7, 10]
    assert not repeated_positions(np.arange(20), 2).any()


def test_nll_vs_context_lifts_the_relative_models_limit_and_keeps_the_vanilla_ones(prepared_dir):
    arrays = TokenArrays(prepared_dir, "train")
    torch.manual_seed(0)
    rel = MusicTransformer(TOK.vocab_size, n_layers=1, d_model=16, n_heads=2, d_ff=16, max_seq_len=32).eval()
    rows = nll_vs_context(rel, arrays, [8, 32, 64], targets=16, n_stretches=2)
    assert [r["context"] for r in rows] == [8, 32, 64] and all(r["targets"] == 32 and r["nll"] > 0 for r in rows)
    assert rel.max_seq_len == 32 and context_ceiling(rel) is None
    van = VanillaTransformer(TOK.vocab_size, n_layers=1, d_model=16, n_heads=2, d_ff=16, max_seq_len=32).eval()
    assert context_ceiling(van) == 32
    assert [r["context"] for r in nll_vs_context(van, arrays, [8, 16, 64], targets=16, n_stretches=2)] == [8, 16]


def test_evaluate_recall_reports_and_draws(copier, prepared_dir, tmp_path):
    cfg = evaluation_options(recall={"gaps": [0, GAP, 500], "num_probes": 3, "passage": PASSAGE,
                                     "contexts": [16, 32], "targets": 8, "num_stretches": 2, "repeat_windows": 3,
                                     "ngram": 4}).recall
    with pytest.raises(ValueError, match="recall: no seed; evaluate.yaml's recall block has every key"):
        evaluate_recall(copier, TOK, TokenArrays(prepared_dir, "train"), {k: v for k, v in cfg.items() if k != "seed"},
                        context=64)
    res = evaluate_recall(copier, TOK, TokenArrays(prepared_dir, "train"), cfg, context=64, progress=lambda _: None)
    assert [r["gap"] for r in res["copy"]["exact"]] == [0, GAP]  # 500 does not fit the trained 64 tokens
    assert set(res["copy"]) == {"exact", "transposed"} and res["copy"]["exact"][1]["gain"] > 1.0
    assert res["repeats"]["windows"] == 3
    table = format_recall_table(res)
    assert f"| {GAP} |" in table and "| 32 |" in table and "copy gain, time_shift" in table
    plot_recall([res], ["copier"], tmp_path / "recall.png")
    assert (tmp_path / "recall.png").stat().st_size > 10_000


def test_a_repeat_right_after_its_passage_alone_is_measured(prepared_dir):
    """recall.gaps=[0]: no filler at all between the passage and its repeat (it ended in "need at least one array
    to concatenate"); a net that learnt to copy the token a passage back gains there."""
    copier = _copier(PASSAGE)  # 150 steps: about a second
    cfg = evaluation_options(recall={"gaps": [0], "num_probes": 2, "passage": PASSAGE, "contexts": [16],
                                     "targets": 8, "num_stretches": 1, "repeat_windows": 1, "ngram": 4}).recall
    res = evaluate_recall(copier, TOK, TokenArrays(prepared_dir, "train"), cfg, context=2 * PASSAGE,
                          progress=lambda _: None)
    assert [r["gap"] for r in res["copy"]["exact"]] == [0] and res["copy"]["exact"][0]["gain"] > 1.0


PROBE = ["model=music_transformer", "model.net.n_heads=2", "model.net.d_ff=64", "data.seq_len=64",
         "callbacks.recall_probe.passage=16", "callbacks.recall_probe.gaps=[0,16,99]",
         "callbacks.recall_probe.num_probes=2"]


def test_training_logs_the_copy_gain_at_every_validation(tmp_path):
    data = make_prepared_dataset(tmp_path / "data", seconds={**PIECE_SECONDS, "validation": [6.0, 5.0, 4.0]})
    fit(compose_train(data, tmp_path / "run", *PROBE))
    rows = list(csv.DictReader(open(tmp_path / "run" / "csv" / "metrics.csv")))
    logged = [r for r in rows if r.get("recall/gain_16")]
    assert len(logged) == 2 and all(r["recall/gain_0"] for r in logged)  # max_steps 6, a validation every 3
    assert "recall/gain_99" not in rows[0]  # 16 + 99 + 16 tokens do not fit a 64-token context


def test_a_validation_split_too_small_for_probes_is_said_once(prepared_dir, tmp_path, capsys):
    fit(compose_train(prepared_dir, tmp_path, *PROBE))
    assert capsys.readouterr().out.count("recall probe off: ") == 1


def test_a_context_too_short_for_every_gap_says_so_in_words(tmp_path, capsys):
    """passage 48 twice does not fit a 64-token context at any gap: said as that, once (it printed numpy's "need at
    least one array to concatenate")."""
    data = make_prepared_dataset(tmp_path / "data", seconds={**PIECE_SECONDS, "validation": [6.0, 5.0, 4.0]})
    fit(compose_train(data, tmp_path / "run", *PROBE, "callbacks.recall_probe.passage=48"))
    said = [line for line in capsys.readouterr().out.splitlines() if "recall probe off" in line]
    assert said == ["recall probe off: no gap fits a context of 64 with passages of 48 tokens"]
