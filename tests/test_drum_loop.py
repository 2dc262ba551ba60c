"""A band's drums under a continuation by a model that learnt none: the seed's last bars of drums, as long as the
groove it repeats, played again under the new bars (``drums=loop``); said in the run's line and on the app's page."""

from __future__ import annotations

from pathlib import Path

import pretty_midi
import pytest

from musictx.checkpoints.model_store import load_pretrained
from musictx.generation.generate_options import GenerateOptions
from musictx.tasks.continue_metrical import seed_drum_loop
from musictx.tasks.metrical_seeds import metrical_seed

BEAT = 60 / 110


def groove(path: Path, bars: list[list[int]]) -> Path:
    """A piano's chord on every beat and a kit whose bar k strikes the pitches ``bars[k]`` on its eighths."""
    pm = pretty_midi.PrettyMIDI(initial_tempo=110)
    piano, kit = pretty_midi.Instrument(0, name="piano"), pretty_midi.Instrument(0, True, "kit")
    for k, pitches in enumerate(bars):
        for j in range(4):
            t = (4 * k + j) * BEAT
            piano.notes += [pretty_midi.Note(70, p, t, t + 0.9 * BEAT) for p in (60, 64, 67)]
        for j, pitch in enumerate(pitches):
            t = (4 * k + j / 2) * BEAT
            kit.notes.append(pretty_midi.Note(100, pitch, t, t + 0.1))
    pm.instruments = [piano, kit]
    pm.write(str(path))
    return path


ROCK = [36, 42, 38, 42, 36, 36, 38, 42]
FILL = [38, 38, 45, 45, 47, 47, 49, 49]


BACKBEAT = [36, 42, 38, 42, 36, 42, 38, 46]  # a second bar of a two-bar beat


def loop_of(tmp_path, bars):
    net, tok = load_pretrained("pop")
    seed = metrical_seed(tok, groove(tmp_path / "groove.mid", bars), learnt=net.learnt_programs)
    return seed_drum_loop(net, tok, seed, "loop")


def played(loop, new_bars: int) -> list[list[int]]:
    """The kit's pitches in each of the first ``new_bars`` new bars, in onset order."""
    rows = sorted(loop.notes[1], key=lambda row: (row[0], row[1]))
    return [[p for j, _, _, p, _ in rows if j == loop.order[k % loop.period]] for k in range(new_bars)]


@pytest.mark.parametrize(("bars", "period"), [
    ([ROCK] * 4, 1),  # one bar again and again
    ([ROCK, FILL] * 3, 2),  # a beat and its fill: both come back, in turn
    ([ROCK, FILL, ROCK[::-1], FILL[::-1]], 2),  # nothing repeats: the last two bars
])
def test_the_loop_is_as_long_as_the_groove_the_seed_repeats(tmp_path, bars, period):
    loop = loop_of(tmp_path, bars)
    assert loop.period == period and not loop.groove
    assert played(loop, period) == bars[-period:]
    net, tok = load_pretrained("pop")
    seed = metrical_seed(tok, groove(tmp_path / "groove.mid", bars), learnt=net.learnt_programs)
    assert seed_drum_loop(net, tok, seed, "seed") is None


def test_a_fill_that_ends_the_seed_closes_each_phrase_and_the_groove_plays_between(tmp_path):
    loop = loop_of(tmp_path, [ROCK] * 7 + [FILL])  # an 8-bar phrase: the beat seven times, then the fill
    assert (loop.groove, loop.phrase) == (1, 8)
    assert played(loop, 16) == ([ROCK] * 7 + [FILL]) * 2  # the old code looped beat and fill every other bar


def test_a_two_bar_groove_goes_on_in_its_phase_after_the_fill(tmp_path):
    bars = [ROCK, BACKBEAT] * 3 + [ROCK, FILL]  # the fill takes the place of the beat's second bar
    loop = loop_of(tmp_path, bars)
    assert (loop.groove, loop.phrase) == (2, 8)
    assert played(loop, 8) == bars


def test_a_fill_that_closes_no_phrase_of_the_seed_is_left_out_and_said(tmp_path):
    from musictx.tasks.drum_loop import loop_words

    loop = loop_of(tmp_path, [ROCK] * 5 + [FILL])  # six bars: no 4-bar phrase ends on its last bar
    assert (loop.groove, loop.phrase) == (1, 0)
    assert played(loop, 4) == [ROCK] * 4
    assert "without its last bar's fill" in loop_words(loop)


def test_drums_that_come_in_after_the_seed_are_said_to_leave_nothing_to_loop(tmp_path, capsys):
    """A kit that enters after the seed's bars: drums=loop has nothing to loop, and the run says so in one line."""
    from musictx.generation.continue_midi import run

    song = groove(tmp_path / "late.mid", [[]] * 4 + [ROCK] * 4)  # the piano alone for 4 bars, then the kit
    run(GenerateOptions(seed_midi=str(song), seed_seconds=4 * 4 * BEAT, length_bars=1, num_samples=1, best_of=1,
                        audio=False, drums="loop", output_dir=str(tmp_path / "out")))
    assert "drums=loop: the file's drums play no note in the seed's bars 1-4, so none play" in capsys.readouterr().out


def test_the_app_says_the_drums_play_on_and_its_box_stops_them(tmp_path):
    from musictx.app.core import Continuer, Settings

    app = Continuer(model="pop", workdir=tmp_path / "work")
    song = groove(tmp_path / "groove.mid", [ROCK] * 4)
    last_drum = {}
    for drums in ("loop", "seed"):
        (result,) = app.continue_file(song, Settings(seed_seconds=8.7, length_seconds=4.4, num_samples=1,
                                                     drums=drums), report=lambda f, t: None)
        kit = next(t for t in pretty_midi.PrettyMIDI(str(result.midi)).instruments if t.is_drum)
        last_drum[drums] = max(n.start for n in kit.notes)
        if drums == "loop":  # the page's words: its box, not the command's option
            assert ("kit (drums) plays the seed's last bar again under the new ones (untick \"Drums play on\": they "
                    "stop where the seed does)") in result.seed_note
    assert last_drum["loop"] > 4 * 4 * BEAT > last_drum["seed"]  # past the seed's four bars, or not


def test_drums_takes_loop_or_seed():
    from musictx.decoding.errors import GenerateError

    with pytest.raises(GenerateError, match="drums=groove: give one of loop, seed"):
        GenerateOptions(output_dir="out", drums="groove").check()
