"""Phrase return (REMI): a seed whose last 2P bars state a P-bar phrase twice has its first P new bars lean toward
that phrase; any other seed is continued exactly as without the hook. With the shipped `pop` on the bundled
motif (a 4-bar phrase played twice), the next 4 bars play it again far more than the model alone does. Among a
sample's `best_of` candidates the last ``replays`` lean toward the seed's last 4 bars whatever the seed states."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from musictx.checkpoints.model_store import load_pretrained
from musictx.decoding.cursor import RemiCursor
from musictx.decoding.hooks.phrase_return import PhraseReturn, replaying_rows, restated_period, shared_notes
from musictx.decoding.hooks.registry import build_hooks
from musictx.decoding.sampling_options import SamplingOptions
from musictx.paths import BUNDLED_MOTIF
from musictx.tasks import metrical_seed, sample_bars
from musictx.tasks.continue_metrical import bars_prompt
from musictx.tasks.prompt import sample

from .metrical_fixtures import band_song


@pytest.fixture(name="pop", scope="module")
def fixture_pop():
    torch.set_num_threads(1)
    net, tok = load_pretrained("pop")
    return net.eval(), tok


def bar(*notes) -> dict:
    """A bar as `Bar.by_position` gives it, from (position, pitch) notes of track 0."""
    out: dict = {}
    for pos, pitch in notes:
        out.setdefault(pos, []).append((0, pitch))
    return out


A, B = bar((0, 48), (0, 60), (2, 64), (4, 67)), bar((0, 41), (0, 65), (2, 69), (4, 72))
C, D = bar((0, 43), (0, 67), (2, 71)), bar((0, 48), (4, 60), (8, 55))


def test_the_phrase_a_seed_states_twice_is_found_by_its_bars():
    assert shared_notes(A, A) == 1.0 and shared_notes(A, B) == 0.0 and shared_notes(A, {}) == 0.0
    assert restated_period([A, B, A, B]) == 2
    assert restated_period([D, A, B, C, D, A, B, C, D]) == 4  # the longest phrase first
    varied = bar((0, 45), (0, 60), (2, 64), (4, 67))  # a new bass under the same figure: 3 of 5 notes shared
    assert restated_period([A, B, C, D, varied, B, C, D]) == 4
    assert restated_period([A, B, C, A]) is None and restated_period([A, B, A]) is None


def bars_of(tok, ids: np.ndarray) -> list[dict]:
    cursor = RemiCursor(tok)
    cursor.start(torch.as_tensor(np.append(ids, tok.bar_id))[None])
    return [b.by_position() for b in cursor.bars[0][:-1]]


def continued(net, tok, seed, strength: float, samples: int = 3) -> list[np.ndarray]:
    sampling = SamplingOptions(seed=1, best_of=1, hooks={"phrase_return": {"strength": strength}})
    return sample_bars(net, tok, seed, sampling, num_samples=samples, bars=4)


def test_the_bundled_motif_comes_back_in_the_next_four_bars(pop):
    net, tok = pop
    seed = metrical_seed(tok, BUNDLED_MOTIF, 20.0, 0.0)
    phrase = bars_of(tok, seed.ids)[-4:]
    assert seed.bars == 8 and restated_period(bars_of(tok, seed.ids)) == 4

    def shared(strength: float) -> float:
        rows = continued(net, tok, seed, strength)
        return float(np.mean([shared_notes(new, old) for ids in rows
                              for new, old in zip(bars_of(tok, np.append(seed.ids, ids))[8:], phrase, strict=True)]))

    alone, returned = shared(0.0), shared(4.0)
    assert returned > 0.5 > alone + 0.2, (alone, returned)


def test_a_seed_that_restates_nothing_is_continued_as_without_the_hook(pop, tmp_path):
    net, tok = pop
    seed = metrical_seed(tok, band_song(tmp_path / "song.mid", bars=8, beats_per_bar=4, seed=3), 20.0, 0.0)
    assert restated_period(bars_of(tok, seed.ids)) is None
    for a, b in zip(continued(net, tok, seed, 0.0, 2), continued(net, tok, seed, 4.0, 2), strict=True):
        assert np.array_equal(a, b)


def test_the_last_candidates_of_each_sample_replay_never_all_of_them():
    assert replaying_rows(8, 4, 2) == [False, False, True, True] * 2  # rows: sample 0's 4 candidates, then sample 1's
    assert replaying_rows(4, 4, 9) == [False, True, True, True]  # at most all but one: a fresh draw is always weighed
    assert replaying_rows(3, 1, 2) == [False] * 3  # one draw a sample (best_of=1) never replays
    assert replaying_rows(4, 4, 0) == [False] * 4


def test_replaying_candidates_play_the_seeds_last_bars_again(pop, tmp_path):
    """On a seed that restates nothing, the replaying rows' plan maps the first 4 new bars onto the seed's last 4,
    and what they sample shares far more of its notes with those bars than the fresh candidates beside them."""
    net, tok = pop
    seed = metrical_seed(tok, band_song(tmp_path / "song.mid", bars=8, beats_per_bar=4, seed=3), 20.0, 0.0)
    last = bars_of(tok, seed.ids)[-4:]
    assert restated_period(bars_of(tok, seed.ids)) is None
    sampling = SamplingOptions(seed=2, hooks={"phrase_return": {"replays": 2}})
    prompt = bars_prompt(net, tok, seed, sampling, num_samples=8, bars=4, candidates=4)  # 2 samples x 4 candidates
    (hook,) = [h for h in _built(prompt) if isinstance(h, PhraseReturn)]
    assert [bool(p) for p in hook.plans] == [False, False, True, True] * 2
    assert hook.plans[2] == {0: -4, 1: -3, 2: -2, 3: -1}  # new bar k leans toward seed bar k - 4
    rows = sample(net, prompt)[:, len(seed.ids):].cpu().numpy()
    shared = [np.mean([shared_notes(new, old) for new, old in zip(bars_of(tok, np.append(seed.ids, row))[8:12], last,
                                                                   strict=False)]) for row in rows]
    fresh, replayed = np.mean([shared[i] for i in (0, 1, 4, 5)]), np.mean([shared[i] for i in (2, 3, 6, 7)])
    assert replayed > 0.4 > fresh + 0.15, (fresh, replayed)


def top_line(bar: dict) -> dict:
    """The bar's highest note at each position, as a bar of its own."""
    return {pos: [max(notes, key=lambda note: note[1])] for pos, notes in bar.items()}


def under_top(bar: dict) -> dict:
    """The bar's notes below its top line."""
    return {pos: sorted(notes, key=lambda note: note[1])[:-1] for pos, notes in bar.items()}


def test_a_replay_of_the_top_line_leaves_the_accompaniment_free(pop, tmp_path):
    """voices=top: the replaying rows play the seed's top line again about as much as a full replay does, while
    the notes under it share far less with the seed's bars (the accompaniment is the model's own)."""
    net, tok = pop
    seed = metrical_seed(tok, band_song(tmp_path / "song.mid", bars=8, beats_per_bar=4, seed=3), 20.0, 0.0)
    last = bars_of(tok, seed.ids)[-4:]
    shared = {}
    for voices in ("all", "top"):
        sampling = SamplingOptions(seed=2, hooks={"phrase_return": {"replays": 3, "voices": voices}})
        prompt = bars_prompt(net, tok, seed, sampling, num_samples=8, bars=4, candidates=4)
        (hook,) = [h for h in _built(prompt) if isinstance(h, PhraseReturn)]
        assert hook.top_only == [False, voices == "top", voices == "top", voices == "top"] * 2
        rows = sample(net, prompt)[:, len(seed.ids):].cpu().numpy()
        pairs = [(new, old) for i, row in enumerate(rows) if i % 4
                 for new, old in zip(bars_of(tok, np.append(seed.ids, row))[8:12], last, strict=False)]
        shared[voices] = (np.mean([shared_notes(top_line(new), top_line(old)) for new, old in pairs]),
                          np.mean([shared_notes(under_top(new), under_top(old)) for new, old in pairs]))
    (top_all, under_all), (top_top, under_top_) = shared["all"], shared["top"]
    assert top_top > 0.5 and top_top > top_all - 0.2, shared
    assert under_top_ < under_all - 0.2, shared


def test_a_top_line_replay_leans_toward_each_top_note_once(pop, tmp_path):
    """After the top line's track's Program a replaying row leans toward the top pitch, but not where that track
    has struck it at this onset already: a second note of its chord is the model's own (no doubled note)."""
    net, tok = pop
    seed = metrical_seed(tok, band_song(tmp_path / "song.mid", bars=8, beats_per_bar=4, seed=3), 20.0, 0.0)
    sampling = SamplingOptions(seed=2, hooks={"phrase_return": {"replays": 3, "voices": "top"}})
    prompt = bars_prompt(net, tok, seed, sampling, num_samples=4, bars=4, candidates=4)
    (hook,) = [h for h in _built(prompt) if isinstance(h, PhraseReturn)]
    b, piano = 3, 0  # a replaying row, and the top line's track
    hook.cursor.program[b] = piano  # the row has just drawn that track's Program
    here = [(piano, 72), (piano, 64), (33, 40)]  # the reference bar's notes at this onset: the top note is 72
    assert hook._top_line_wanted(b, here, [], "program") == [hook.pitch_id[72]]
    assert hook._top_line_wanted(b, here, [(piano, 64)], "program") == [hook.pitch_id[72]]
    assert hook._top_line_wanted(b, here, [(piano, 72)], "program") == []
    assert hook._top_line_wanted(b, here, [], "position") == [hook.program_id[piano]]  # its track first
    assert hook._top_line_wanted(b, here, [(piano, 72)], "other") is None  # then the other tracks: the echo's rule


def _built(prompt) -> list:
    """The run's hooks, made from a copy of its inputs (a cursor of their own) and started on its prompt."""
    hooks = build_hooks(replace(prompt.hooks, cursor=None))
    for hook in hooks:
        hook.start(prompt.ids)
    return hooks


def test_a_continuation_that_follows_a_lead_sheet_never_replays(pop, tmp_path):
    """With chords= the sheet says where the harmony goes: no candidate goes back to the seed's bars."""
    from musictx.io.chord_labels import Chords

    net, tok = pop
    seed = metrical_seed(tok, band_song(tmp_path / "song.mid", bars=8, beats_per_bar=4, seed=3), 20.0, 0.0)
    lab = tmp_path / "sheet.lab"
    lab.write_text("0 3600 F#:maj\n")
    sampling = SamplingOptions(seed=2, hooks={"phrase_return": {"replays": 2}})
    prompt = bars_prompt(net, tok, seed, sampling, num_samples=4, bars=4, candidates=4, chords=Chords.read(lab))
    (hook,) = [h for h in _built(prompt) if isinstance(h, PhraseReturn)]
    assert hook.plans == [{}] * 4


def test_an_onsets_notes_short_of_the_reference_are_counted_as_counters_would():
    """The repeat echo's count of what an onset still lacks (`_more_often`) keeps exactly the keys, in their order,
    of ``Counter(wanted) - Counter(drawn)``, on random onsets of (track, pitch) notes and of tracks alone."""
    from collections import Counter

    from musictx.decoding.hooks.repeat_echo import _more_often

    rng = np.random.default_rng(0)
    for _ in range(300):
        wanted = [(int(t), int(p)) for t, p in rng.integers(0, 3, size=(rng.integers(0, 7), 2))]
        drawn = [(int(t), int(p)) for t, p in rng.integers(0, 3, size=(rng.integers(0, 5), 2))]
        assert _more_often(wanted, drawn) == list(Counter(wanted) - Counter(drawn))
        tracks, played = [t for t, _ in wanted], [t for t, _ in drawn]
        assert _more_often(tracks, played) == list(Counter(tracks) - Counter(played))


def test_once_every_rows_phrase_is_played_the_hook_hands_the_logits_back_untouched(pop):
    """The motif's plan covers the first 4 new bars: there the hook leans (a new tensor); from the fifth on it returns
    the very logits it was given, without looking anything up again (`done`)."""
    net, tok = pop
    seed = metrical_seed(tok, BUNDLED_MOTIF, 20.0, 0.0)
    prompt = bars_prompt(net, tok, seed, SamplingOptions(seed=0, best_of=1), num_samples=1, bars=8)
    hooks = _built(prompt)
    (hook,) = [h for h in hooks if isinstance(h, PhraseReturn)]
    (cursor,) = [h for h in hooks if isinstance(h, RemiCursor)]
    assert hook.plans == [{0: -4, 1: -3, 2: -2, 3: -1}]
    logits = torch.zeros(1, tok.vocab_size)
    assert hook(logits) is not logits and not hook.done  # new bar 0, after its Bar id: the phrase's first onset
    for _ in range(4):  # new bars 1 to 4
        cursor.update(torch.tensor([tok.bar_id]))
    assert hook(logits) is logits and hook.done
    assert hook(logits) is logits
