"""Best of K (`musictx.tasks.critic_choice`): a metrical continuation is drawn K times and the candidate the
model's critic scores highest is kept. With the shipped `pop` and its critic on the bundled motif: the kept
continuation is exactly the best-scored of the K candidates a plain batch of K draws; best_of=1 is the plain
draw; a model without a critic, a Performance model and the other tasks refuse a choice in one line. On real
songs (../shared), the critic scores a song's own next bars above the model's continuation."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from musictx.checkpoints.model_store import load_pretrained
from musictx.decoding.errors import GenerateError
from musictx.decoding.sampling_options import SamplingOptions
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.listening.critic import Critic
from musictx.paths import BUNDLED_MOTIF, PRETRAINED_DIR
from musictx.tasks import bars_for, metrical_seed, sample_bars
from musictx.tasks.critic_choice import candidate_features, candidates_per_sample

from .helpers import SHARED_DATA

BARS = 3


@pytest.fixture(name="pop", scope="module")
def fixture_pop():
    torch.set_num_threads(1)
    net, tok = load_pretrained("pop")
    return net.eval(), tok


def test_the_shipped_pop_carries_its_critic_and_its_number():
    net, _ = load_pretrained("pop")
    critic = net.critic
    assert critic.best_of == 4 and candidates_per_sample(None, critic) == 4
    assert candidates_per_sample(1, critic) == 1 and candidates_per_sample(2, critic) == 2
    assert not any(n.startswith(("har_chord", "har_bass")) for n in critic.names)  # no chord file to read
    assert critic.about["split"] == "train"


def test_the_kept_continuation_is_the_best_scored_candidate_of_a_plain_batch(pop):
    net, tok = pop
    seed = metrical_seed(tok, BUNDLED_MOTIF)
    plain = sample_bars(net, tok, seed, SamplingOptions(seed=5, best_of=1), num_samples=4, bars=BARS)
    kept = sample_bars(net, tok, seed, SamplingOptions(seed=5), num_samples=1, bars=BARS)  # best_of: the critic's 4
    scores = net.critic.logit([candidate_features(tok, seed, ids, BARS) for ids in plain])
    assert len({tuple(p) for p in plain}) == 4  # four different candidates to choose among
    assert np.array_equal(kept[0], plain[int(np.argmax(scores))])
    assert scores.max() > scores.min()


def test_a_choice_is_refused_where_there_is_nothing_to_choose_by(pop):
    net, tok = pop
    bare = load_pretrained("pop")[0]
    del bare.critic
    seed = metrical_seed(tok, BUNDLED_MOTIF)
    one = sample_bars(bare, tok, seed, SamplingOptions(seed=2), num_samples=1, bars=1)  # null: no critic, no choice
    assert len(one) == 1
    with pytest.raises(GenerateError, match="best_of=2: this model has no critic"):
        sample_bars(bare, tok, seed, SamplingOptions(seed=2, best_of=2), num_samples=1, bars=1)
    with pytest.raises(GenerateError, match="best_of must be 1..16"):
        SamplingOptions(best_of=0).check_sampling()


@pytest.mark.parametrize("settings, message", [
    ({"checkpoint": "piano", "best_of": 2}, "best_of=2: this model has no critic"),
    ({"checkpoint": "pop", "best_of": 3, "task": "accompany"}, "best_of= is not for task=accompany"),
])
def test_generate_refuses_a_choice_it_cannot_make_before_writing(tmp_path, settings, message):
    out = tmp_path / "out"
    opts = GenerateOptions(seed_midi=str(BUNDLED_MOTIF), output_dir=str(out), length_seconds=2, num_samples=1,
                           audio=False, **settings)
    with pytest.raises(GenerateError, match=message):
        run(opts)
    assert not out.exists() or not any(out.iterdir())


def test_generate_records_each_samples_choice(tmp_path, capsys):
    opts = GenerateOptions(checkpoint="pop", seed_midi=str(BUNDLED_MOTIF), output_dir=str(tmp_path), length_bars=2,
                           num_samples=2, best_of=3, audio=False, seed=4)
    record = run(opts)
    assert "the best of 3 continuations by the model's critic" in capsys.readouterr().out
    saved = json.loads((tmp_path / "generation.json").read_text())
    assert saved["best_of"] == 3 == record["best_of"]
    assert saved["replay_candidates"] == [2]  # the last of the 3 replays the seed's last bars (phrase_return.replays=1)
    for sample in saved["samples"]:
        assert len(sample["critic_scores"]) == 3 and sample["critic_scores"][sample["kept"]] == max(
            sample["critic_scores"])


def test_a_critic_file_that_is_not_one_is_named(tmp_path):
    bad = tmp_path / "critic.json"
    bad.write_text('{"format": 1, "features": {"x": {"mean": 0}}}')
    with pytest.raises(ValueError, match=f"{bad}: not a musictx critic"):
        Critic.load(bad)
    good = Critic.load(PRETRAINED_DIR / "pop" / "critic.json")
    good.save(tmp_path / "again.json")
    again = Critic.load(tmp_path / "again.json")
    row = dict.fromkeys(good.names, 0.5)
    assert again.logit([row])[0] == pytest.approx(good.logit([row])[0])
    assert replace(good, best_of=2).best_of == 2


POP909 = SHARED_DATA / "pop" / "POP909"


@pytest.mark.skipif(not POP909.is_dir(), reason="needs ../shared/data/pop (POP909 songs: CI has it)")
def test_the_critic_hears_a_songs_own_bars_above_the_models_on_validation_songs(pop):
    """Six songs of the validation split (never fit on): the song's next bars outscore the model's plain
    continuation on average, as the critic was fit to tell (train accuracy 0.885)."""
    net, tok = pop
    real, made = [], []
    for song in ("006", "008", "018", "020", "035", "037"):
        seed = metrical_seed(tok, POP909 / song / f"{song}.mid", 10.0, 25.0)
        bars = bars_for(seed, 12.0, None)
        new = sample_bars(net, tok, seed, SamplingOptions(seed=1, best_of=1), num_samples=1, bars=bars)[0]
        real.append(candidate_features(tok, seed, seed.bars_after(tok.bar_id, bars), bars))
        made.append(candidate_features(tok, seed, new, bars))
    gap = net.critic.logit(real) - net.critic.logit(made)  # (6,)
    assert gap.mean() > 0.5 and (gap > 0).sum() >= 4
