"""``accompany_context``: what the accompaniment of bars A-B of a whole song hears of the bars before A. "song": the
song's own BRIDGE and PIANO there, as a continuation hears its seed; "melody": its melody alone (which starts cold).
On real POP909 songs with the shipped pop model: the prompt holds the song's own notes before bar A, the command
takes the option (and refuses a bad one), a whole song (bars = all) is written as before, and the accompany
scorecard measures a whole song's bars with either context."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from symusic import Score

from musictx.checkpoints.model_store import load_pretrained
from musictx.decoding.errors import GenerateError
from musictx.decoding.sampling_options import SamplingOptions
from musictx.evaluation.checks import EvaluateError, check_song_options
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.score_prep import ROLE_PROGRAMS
from musictx.paths import BUNDLED_MOTIF
from musictx.tasks.accompany import heard_before, led_prompt
from musictx.tasks.song_bars import melody_song
from musictx.tasks.task import DEFAULT_ACCOMPANY_CONTEXT

from .test_metrical import POP, needs_pop

SONG = POP / "003" / "003.mid"
ROLES = ["BRIDGE", "PIANO"]


@pytest.fixture(name="pop", scope="module")
def fixture_pop():
    torch.set_num_threads(1)
    net, tok = load_pretrained("pop")
    return net.eval(), tok


def _programs(tok, ids) -> set[int]:
    """The programs whose notes ``ids`` strike."""
    return {int(tok.id_to_token(int(i)).split("_")[1]) for i in ids if tok.type_of[int(i)] == "Program"}


def _own_pitches(tok, song, b: int) -> list[int]:
    """The pitches of the song file's own BRIDGE and PIANO notes in bar ``b`` (0-based), as the tokens place them."""
    from musictx.tasks.write_back import in_bars

    per_beat = tok.miditok.config.max_num_pos_per_beat
    return sorted(p for t in Score(str(song.path)).tracks if t.name in ROLES
                  for p in t.notes.numpy()["pitch"][in_bars(song, t.notes.numpy()["time"], b, b + 1, per_beat)])


@needs_pop
def test_the_song_context_hears_the_songs_own_accompaniment_before_bar_a(pop):
    """Bars 9-12 of 003 accompanied anew: with "song" the prompt is the song's own last bars before bar 9, its
    BRIDGE and PIANO in them note for note, then the first Bar; with "melody" it holds none of them."""
    net, tok = pop
    song = melody_song(tok, SONG, anew=True)
    s, e = 8, 12
    accompaniment = {ROLE_PROGRAMS[r] for r in ROLES}
    heard = heard_before(tok, song, s, 512, "song")
    prompt = led_prompt(net, tok, song, ROLES, s, e, SamplingOptions(), context="song").ids[0].numpy()
    assert np.array_equal(prompt, [*heard, tok.bar_id]) and accompaniment <= _programs(tok, heard)
    last = np.flatnonzero(heard == tok.bar_id)[-1]  # bar 8, the one just before A, as the song plays it
    from musictx.tasks.write_back import middle_notes

    notes = middle_notes(tok, heard[last:], song, s - 1, s)
    assert sorted(n.pitch for p in accompaniment for n in notes.get(p, [])) == _own_pitches(tok, song, s - 1) != []
    melody = led_prompt(net, tok, song, ROLES, s, e, SamplingOptions(), context="melody").ids[0].numpy()
    assert not accompaniment & _programs(tok, melody)
    with pytest.raises(ValueError, match="accompany context 'seed'"):
        led_prompt(net, tok, song, ROLES, s, e, SamplingOptions(), context="seed")


@needs_pop
def test_a_whole_song_hears_nothing_before_its_first_bar_either_way(pop, tmp_path):
    """bars = all: there is nothing before bar 1, so both contexts give the one prompt (the whole-song case as it
    was), and the command writes a whole song's accompaniment anew with the default."""
    net, tok = pop
    song = melody_song(tok, SONG, anew=True)
    prompts = [led_prompt(net, tok, song, ROLES, 0, song.n_bars, SamplingOptions(), context=c).ids
               for c in ("melody", "song")]
    assert torch.equal(*prompts)
    short = _first_seconds(tmp_path / "short" / "003.mid", 40)
    record = run(GenerateOptions(task="accompany", seed_midi=str(short), num_samples=1, audio=False, best_of=1,
                                 output_dir=str(tmp_path / "out"), progress_every_s=None))
    assert f"written for bars 1-{melody_song(tok, short, anew=True).n_bars} of {short} (its own BRIDGE and PIANO " \
           "replaced: written anew for its melody)" in record["what"] and "heard" not in record["what"]
    made = Score(str(tmp_path / "out" / record["samples"][0]["midi"]))
    given = Score(str(short))
    assert [t.name for t in made.tracks] == ["MELODY", "BRIDGE", "PIANO"]
    assert made.tracks[0].notes.numpy()["pitch"].tolist() == given.tracks[0].notes.numpy()["pitch"].tolist()
    assert all(len(t.notes) for t in made.tracks[1:])


def _first_seconds(path, seconds: float):
    """The notes of 003 that end in its first ``seconds`` (its melody enters at 25 s) at ``path``, its beat file
    beside."""
    import shutil

    score = Score(str(SONG))
    assert len(score.tempos) == 1  # one tempo: seconds are ticks at one rate
    end = seconds * score.tempos[0].qpm / 60 * score.ticks_per_quarter
    for track in score.tracks:
        track.notes = track.notes.filter(lambda n: n.time + n.duration <= end, inplace=False)
    path.parent.mkdir(parents=True)
    score.dump_midi(str(path))
    shutil.copy(SONG.with_name("beat_midi.txt"), path.with_name("beat_midi.txt"))
    return path


def _accompany(out, bars: str | None, context: str, seed: int = 0) -> tuple[dict, Score]:
    record = run(GenerateOptions(task="accompany", seed_midi=str(SONG), bars=bars, num_samples=1, audio=False,
                                 best_of=1, output_dir=str(out), accompany_context=context, seed=seed,
                                 progress_every_s=None))
    return record, Score(str(out / record["samples"][0]["midi"]))


@needs_pop
def test_the_command_takes_the_context_and_keeps_the_song_outside_the_bars(tmp_path):
    """``accompany_context=song bars=9-10``: the song's own accompaniment is kept outside bars 9-10, new notes are
    written inside, and they are not the ones the melody context writes with the same seed."""
    from .test_accompany_whole import _inside, _notes

    song = melody_song(load_pretrained("pop")[1], SONG, anew=True)
    given = Score(str(SONG))
    inside = {}
    for context in ("song", "melody"):
        record, made = _accompany(tmp_path / context, "9-10", context)
        assert ("; the bars before bar 9 heard as the song plays them (accompany_context=melody: without its BRIDGE "
                "and PIANO)" if context == "song" else "; the bars before bar 9 heard without its BRIDGE and PIANO "
                "(accompany_context=song: as the song plays them)") in record["what"]
        for old, new in zip(given.tracks, made.tracks, strict=True):
            assert _notes(old, ~_inside(song, old, 8, 10)) == _notes(new, ~_inside(song, new, 8, 10)), old.name
        inside[context] = [_notes(t, _inside(song, t, 8, 10)) for t in made.tracks[1:]]
        assert sum(map(len, inside[context])) > 0
    assert inside["song"] != inside["melody"]


def test_a_bad_context_is_refused_before_the_model_loads(tmp_path):
    # the bundled motif: the options are refused before any song is read, so no shared data is needed
    opts = GenerateOptions(task="accompany", seed_midi=str(BUNDLED_MOTIF), output_dir=str(tmp_path),
                           accompany_context="all")
    with pytest.raises(GenerateError, match=r"accompany_context=all: give one of melody, song"):
        opts.check()
    other = "song" if DEFAULT_ACCOMPANY_CONTEXT == "melody" else "melody"
    opts = GenerateOptions(seed_midi=str(BUNDLED_MOTIF), output_dir=str(tmp_path), accompany_context=other)
    with pytest.raises(GenerateError, match=f"accompany_context={other} is not for task=continue"):
        opts.check()
    block = {"max_songs": None, "first_bar": 17, "bars": 4, "seconds": 30, "accompany_from": "first_bar",
             "accompany_scheme": "lead", "accompany_chords": False, "accompany_song": True}
    check_song_options("accompany", {}, {**block, "accompany_context": None})  # null: the task's default
    with pytest.raises(EvaluateError, match="infill.accompany_context must be one of melody, song, got 'all'"):
        check_song_options("accompany", {}, {**block, "accompany_context": "all"})
    with pytest.raises(EvaluateError, match="infill.accompany_context is for infill.accompany_scheme=lead"):
        check_song_options("accompany", {}, {**block, "accompany_context": "song", "accompany_scheme": "infill"})
    with pytest.raises(EvaluateError, match="infill.accompany_song must be true or false"):
        check_song_options("accompany", {}, {**block, "accompany_song": "yes"})


@needs_pop
@pytest.mark.parametrize("context", ["melody", "song"])
def test_the_scorecard_accompanies_a_whole_songs_bars_from_bar_17(pop, context):
    """``infill.accompany_song=true accompany_from=first_bar``: the bars from bar 17 written in the whole song, its
    melody untouched, the seams with its own accompaniment measured."""
    from musictx.evaluation.task_scorecard import format_task_scorecard, run_task_scorecard

    settings = {"first_bar": 17, "seconds": 8, "seed": 0, "accompany_song": True, "accompany_from": "first_bar",
                "accompany_context": context}
    result = run_task_scorecard(*pop, [POP / "006" / "006.mid"], settings, "accompany", progress=lambda _: None)
    card = result["songs"][0]
    assert card["bars"][0] == 17 and card["model"]["melody_unchanged"] == 1.0
    assert np.isfinite(card["model"]["seam_in"]) and np.isfinite(card["real"]["seam_in"])
    heard = {"melody": "its melody alone", "song": "its own bars"}[context]
    assert f"written in the whole song, its own BRIDGE and PIANO kept around them, hearing {heard} before them" in \
        format_task_scorecard(result)
