"""The sampler's grammar guard: stray NOTE_OFFs are never drawn, overdue notes must end, the seed's
sounding notes count, no new note starts while the texture is at its cap (a multiple of the seed's most
notes at once), and the guarded cached and uncached paths still agree."""

from __future__ import annotations

import numpy as np
import torch

from musictx.decoding.hooks.guard import MIN_POLYPHONY, NoteGrammarGuard
from musictx.decoding.sampling import generate
from musictx.decoding.sampling_options import SamplingOptions
from musictx.evaluation.continuation import grammar_breaks
from musictx.io.tokenizer import EventTokenizer

from .gen_fixtures import tiny_net

TOK = EventTokenizer()
LAY = TOK.layout


def guarded(net, prompt, n: int, guard, use_cache: bool = True):
    """``n`` ids drawn (seed 5, no nucleus, no recall guidance) under ``guard``, raw ids (no PAD, no EOS)."""
    opts = SamplingOptions(seed=5, top_p=None, use_cache=use_cache, hooks={"recall_guidance": {"strength": 0.0}})
    return generate(net, None, prompt, opts, [guard], max_new_tokens=n)


def on(p):
    return LAY.note_on + p


def off(p):
    return LAY.note_off + p


def shift(steps):
    return LAY.time_shift + steps - 1


def masked_after(prompt: list[int], max_note_seconds=None) -> torch.Tensor:
    guard = NoteGrammarGuard.of(TOK, max_note_seconds)
    guard.start(torch.tensor([prompt]))
    return torch.isinf(guard(torch.zeros(1, TOK.vocab_size)))[0]


def test_only_sounding_pitches_may_be_released():
    forbidden = masked_after([on(60), on(64), shift(10), off(64)])
    allowed_offs = [p for p in range(128) if not forbidden[off(p)]]
    assert allowed_offs == [60]
    assert not forbidden[: LAY.note_off].any() and not forbidden[LAY.time_shift:].any()


def test_overdue_notes_must_end_first():
    held = [on(60), on(67), shift(100), shift(100), on(72), shift(50)]  # 60 and 67 held 2.5 s, 72 for 0.5 s
    forbidden = masked_after(held, max_note_seconds=2.0)
    assert [i for i in range(TOK.vocab_size) if not forbidden[i]] == [off(60), off(67)]
    assert not masked_after(held, max_note_seconds=3.0)[on(40)]  # nothing overdue yet: anything goes


def test_guarded_generation_keeps_the_grammar_and_both_paths_agree():
    net = tiny_net("music_transformer", max_seq_len=16)
    prompt = torch.tensor([[LAY.velocity + 15, on(60), on(64), shift(20)]] * 3)
    runs = {}
    for cached in (True, False):
        guard = NoteGrammarGuard.of(TOK, max_note_seconds=0.5)
        runs[cached] = guarded(net, prompt, 120, guard, use_cache=cached)
    assert torch.equal(runs[True], runs[False])
    for row in runs[True].numpy():
        assert grammar_breaks(TOK, row[:4], row[4:])["stray_note_off_share"] == 0
        notes = TOK.decode_notes(row)
        closed = notes.end < notes.end.max() - 1e-9  # notes closed before the end of the sample
        assert np.all(notes.end[closed] - notes.start[closed] <= 0.5 + 1.0 + 1e-6)  # + at most one shift


def test_grammar_breaks_counts_stray_offs_and_open_notes():
    seed = np.array([on(60), shift(5)])
    new = np.array([off(61), off(60), on(62), shift(3), on(63)])
    out = grammar_breaks(TOK, seed, new)
    assert out["stray_note_off_share"] == 1 / 5 and out["open_at_end_share"] == 2 / 2


def test_start_follows_the_prompt_as_update_does_id_by_id():
    # `start` is vectorised over the prompt; it must leave the state that feeding the ids one by one leaves.
    rng = np.random.default_rng(0)
    for trial in range(20):
        T = int(rng.integers(1, 300))
        prompt = torch.from_numpy(rng.integers(0, TOK.vocab_size, (3, T)))
        crowded = torch.from_numpy(rng.random((3, T)) < 0.6)  # many ons and offs of a few pitches
        few = torch.from_numpy(rng.integers(60, 64, (3, T)) + LAY.note_off * rng.integers(0, 2, (3, T)))
        prompt = torch.where(crowded, few, prompt)
        fast, slow = NoteGrammarGuard.of(TOK, 2.0, overtaken=3), NoteGrammarGuard.of(TOK, 2.0, overtaken=3)
        fast.start(prompt)
        slow.start(prompt[:, :0])
        for t in range(T):
            slow.update(prompt[:, t])
        assert np.array_equal(fast.onset, slow.onset) and np.array_equal(fast.now, slow.now), f"trial {trial}"
        assert np.array_equal(fast.overtaken * (fast.onset >= 0), slow.overtaken * (slow.onset >= 0)), f"trial {trial}"
        logits = torch.zeros(3, TOK.vocab_size)
        assert torch.equal(fast(logits), slow(logits))


def _sounding_counts(ids) -> list[int]:
    """Notes sounding after each id, followed id by id (the reference for `most_at_once`)."""
    sounding, counts = set(), []
    for i in map(int, ids):
        if LAY.note_on <= i < LAY.note_off:
            sounding.add(i - LAY.note_on)
        elif LAY.note_off <= i < LAY.note_off + 128:
            sounding.discard(i - LAY.note_off)
        counts.append(len(sounding))
    return counts


def test_most_at_once_counts_the_notes_sounding_while_time_passes():
    guard = NoteGrammarGuard.of(TOK, None, polyphony_ratio=1.0)
    # a 3-note chord over time, a fourth note struck and released in the same instant, a restruck pitch
    ids = [on(60), on(64), on(67), shift(10), on(72), off(72), on(60), shift(5), off(60), off(64), shift(5)]
    assert guard.most_at_once(torch.tensor(ids)) == 3
    assert guard.most_at_once(torch.tensor([shift(3), off(50)])) == 0
    from importlib.resources import files  # a real file: the bundled motif, against the id-by-id count

    ids = TOK.encode(str(files("musictx") / "assets" / "motif.mid"))
    counts = _sounding_counts(ids)
    shifts = (ids >= LAY.time_shift) & (ids < LAY.time_shift + 100)
    during = [c for c, s in zip(counts, shifts, strict=True) if s] + counts[-1:]
    assert guard.most_at_once(torch.as_tensor(ids)) == max(during) >= 2


def test_at_the_cap_a_sounding_note_ends_before_anything_else():
    """At the cap only the NOTE_OFFs of the sounding notes are left: no new note, and no time passes over the
    wall of held notes (the rule before let time pass, and the notes hung on to the note cap)."""
    for release in (True, False):
        guard = NoteGrammarGuard(LAY.note_on, LAY.note_off, LAY.time_shift, 100, None, polyphony_ratio=1.5,
                                 min_polyphony=1, release_at_cap=release)
        guard.start(torch.tensor([[on(60), on(64), shift(10), off(60), off(64), shift(10)]]))  # seed: 2 at once
        assert guard.cap.tolist() == [3]  # ceil(1.5 * 2)
        for pitch in (50, 55, 59):
            assert not torch.isinf(guard(torch.zeros(1, TOK.vocab_size)))[0, on(pitch)]
            guard.update(torch.tensor([on(pitch)]))
        if release:
            assert allowed(guard) == [off(50), off(55), off(59)]  # three sound: one of them ends first
        else:
            forbidden = torch.isinf(guard(torch.zeros(1, TOK.vocab_size)))[0]
            assert forbidden[LAY.note_on:LAY.note_off].all()
            assert not forbidden[off(55)] and not forbidden[shift(7)] and not forbidden[LAY.velocity]
        guard.update(torch.tensor([off(55)]))
        assert not torch.isinf(guard(torch.zeros(1, TOK.vocab_size)))[0, on(70)]
        assert not torch.isinf(guard(torch.zeros(1, TOK.vocab_size)))[0, shift(7)]
    floor = NoteGrammarGuard.of(TOK, None, polyphony_ratio=1.5)
    floor.start(torch.tensor([[on(60), shift(3)]]))
    assert floor.cap.tolist() == [MIN_POLYPHONY]  # a one-voice seed still leaves room for chords


def test_capped_generation_never_exceeds_the_cap_and_both_paths_agree():
    net = tiny_net("music_transformer", max_seq_len=32)
    prompt = torch.tensor([[LAY.velocity + 15, on(60), on(64), on(67), shift(20)]] * 3)
    runs = {}
    for cached in (True, False):
        guard = NoteGrammarGuard(LAY.note_on, LAY.note_off, LAY.time_shift, 100, None, polyphony_ratio=1.0,
                                 min_polyphony=1)
        runs[cached] = guarded(net, prompt, 300, guard, use_cache=cached)
    assert torch.equal(runs[True], runs[False])
    free = guarded(net, prompt, 300, NoteGrammarGuard.of(TOK, None))
    assert max(max(_sounding_counts(row)) for row in free) > 3  # the premise: unguarded, the net piles up
    assert max(max(_sounding_counts(row)) for row in runs[True]) == 3
    for row in runs[True].tolist():  # each time the texture reaches the cap, a note ends next
        counts = _sounding_counts(row)
        after_full = [row[t + 1] for t in range(4, len(row) - 1) if counts[t] == 3]
        assert after_full and all(LAY.note_off <= i < LAY.note_off + 128 for i in after_full)


def allowed(guard) -> list[int]:
    return [i for i, bad in enumerate(torch.isinf(guard(torch.zeros(1, TOK.vocab_size)))[0].tolist()) if not bad]


def test_a_pedal_release_takes_the_older_notes_with_it():
    """Once 3 notes end at one step, the notes struck before the oldest of them may only end, one at a time,
    before time moves on; then everything is allowed again. Younger notes (struck after it) stay."""
    guard = NoteGrammarGuard.of(TOK, None, pedal_release=3)
    # 48 struck first (the forgotten bass), then 60, 64, 67, then 72 (after the pedal went down again)
    guard.start(torch.tensor([[on(48), shift(20), on(60), on(64), on(67), shift(50), on(72), shift(10)]]))
    for pitch in (60, 64):
        guard.update(torch.tensor([off(pitch)]))
        assert on(40) in allowed(guard) and shift(1) in allowed(guard)  # 2 releases: not a pedal release yet
    guard.update(torch.tensor([off(67)]))
    assert allowed(guard) == [off(48)]  # 48 is older than 60: it ends before time moves on; 72 is younger
    guard.update(torch.tensor([off(48)]))
    assert shift(1) in allowed(guard) and off(72) in allowed(guard) and on(40) in allowed(guard)
    guard.update(torch.tensor([shift(5)]))  # a new step: a new count
    guard.update(torch.tensor([off(72)]))
    assert shift(1) in allowed(guard)
    off_guard = NoteGrammarGuard.of(TOK, None, pedal_release=None)
    off_guard.start(torch.tensor([[on(48), shift(20), on(60), on(64), on(67), shift(50)]]))
    for pitch in (60, 64, 67):
        off_guard.update(torch.tensor([off(pitch)]))
    assert shift(1) in allowed(off_guard)  # pedal_release=None: the older note may hang on


def test_pedalled_generation_leaves_no_older_note_behind_and_both_paths_agree():
    net = tiny_net("music_transformer")
    prompt = torch.tensor([[on(48), shift(20), on(60), on(64), on(67), shift(50)]] * 2)
    runs = [guarded(net, prompt, 300, NoteGrammarGuard.of(TOK, None, pedal_release=2), use_cache=c)
            for c in (True, False)]
    assert torch.equal(runs[0], runs[1])
    releases = 0
    for row in runs[0][:, prompt.shape[1]:].tolist():  # replay: after each step's 2nd release, no older survivor
        check = NoteGrammarGuard.of(TOK, None, pedal_release=2)
        check.start(prompt[:1])
        for i in row:
            if check.released[0] >= 2 and LAY.time_shift <= i < LAY.velocity:
                older = (check.onset[0] >= 0) & (check.onset[0] < check.oldest_released[0])
                assert not older.any()
                releases += 1
            check.update(torch.tensor([i]))
    assert releases >= 3  # the rule was reached, not vacuous


def test_a_note_outlasted_by_many_later_notes_must_end():
    """A note that ``overtaken`` notes struck after it have outlasted (the model forgot it in a run) may only
    end, before anything else; notes struck at its step or later are not held to it, and a re-strike starts
    its count again."""
    guard = NoteGrammarGuard.of(TOK, None, overtaken=3)
    guard.start(torch.tensor([[on(40), on(52), shift(10), on(60), shift(5), off(60)]]))  # 60 outlasted by 40, 52
    assert guard.overtaken[0, 40] == 1 and guard.overtaken[0, 52] == 1 and guard.overtaken[0, 60] == 0
    for pitch in (62, 64):
        guard.update(torch.tensor([on(pitch)]))
        guard.update(torch.tensor([shift(5)]))
        guard.update(torch.tensor([off(pitch)]))
    assert sorted(allowed(guard)) == [off(40), off(52)]  # both struck before 60, 62 and 64, all ended
    guard.update(torch.tensor([off(52)]))
    assert allowed(guard) == [off(40)]
    guard.update(torch.tensor([on(40)]))  # a re-strike is a new note (the guard allows only its end; a test)
    assert shift(1) in allowed(guard) and guard.overtaken[0, 40] == 0
    never = NoteGrammarGuard.of(TOK, None, overtaken=None)
    never.start(torch.tensor([[on(40), shift(10)] + [on(60), shift(5), off(60)] * 5]))
    assert shift(1) in allowed(never)  # off: the old note may hang on


def test_generation_under_the_overtaken_rule_leaves_no_forgotten_note_and_both_paths_agree():
    net = tiny_net("music_transformer")
    prompt = torch.tensor([[on(48), shift(20), on(60), shift(5), off(60), on(64), shift(5), off(64)]] * 2)
    runs = [guarded(net, prompt, 400, NoteGrammarGuard.of(TOK, None, overtaken=4), use_cache=c) for c in (True, False)]
    assert torch.equal(runs[0], runs[1])
    forced = 0
    for row in runs[0][:, prompt.shape[1]:].tolist():  # replay: a note outlasted by 4 ends next, nothing between
        check = NoteGrammarGuard.of(TOK, None, overtaken=4)
        check.start(prompt[:1])
        for i in row:
            forgotten = np.flatnonzero((check.onset[0] >= 0) & (check.overtaken[0] >= 4))
            if len(forgotten):
                assert i - LAY.note_off in forgotten
                forced += 1
            check.update(torch.tensor([i]))
    assert forced >= 2  # the rule was reached, not vacuous
