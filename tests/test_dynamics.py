"""A seed played softer than the models ever heard (pp) is heard as loud as ``soft_seed_velocity`` and its new notes
written back as softly: before, both shipped models answered a seed at velocity 9 at mf (median 29-71). One played
louder than ``loud_seed_ratio`` times the model's own level (a file written at one velocity, 100 or 127) is heard at
that level and its new notes written back as loudly: before, the piano answered it at 41-69. A seed played between
is read as it is, byte for byte."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pretty_midi
import pytest

from musictx.checkpoints.model_store import load_pretrained
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.dynamics import Dynamics, LevelRule, heard_dynamics, level_rule, scaled
from musictx.paths import BUNDLED_MOTIF
from musictx.tasks import metrical_seed, seed_from_midi

BEAT = 60 / 90


def whisper(path: Path, velocity: int = 8) -> Path:
    """Eighths of a C major arpeggio over a held C, at ``velocity`` to ``velocity + 2``, on a beat grid."""
    pm = pretty_midi.PrettyMIDI(initial_tempo=90)
    piano = pretty_midi.Instrument(0, name="piano")
    for k in range(32):
        t = k * BEAT / 2
        piano.notes.append(pretty_midi.Note(velocity + k % 3, [60, 64, 67, 72][k % 4], t, t + 0.45 * BEAT))
        if k % 4 == 0:
            piano.notes.append(pretty_midi.Note(velocity, 48, t, t + 1.9 * BEAT))
    pm.instruments.append(piano)
    pm.write(str(path))
    return path


def test_a_soft_seed_is_scaled_to_the_floor_and_back():
    at_floor = LevelRule(50.0, 50.0)
    assert heard_dynamics(np.array([60, 70, 80]), at_floor) == Dynamics(1.0, 70.0)
    assert heard_dynamics(np.array([60]), None) == Dynamics()
    quiet = heard_dynamics(np.array([8, 10, 12]), at_floor)
    assert quiet.scale == pytest.approx(5.0) and quiet.median == 10
    assert scaled(np.array([8, 10, 30]), quiet.scale).tolist() == [40, 50, 127]  # within MIDI's velocities
    assert quiet.back(np.array([40, 50, 55, 2])).tolist() == [8, 10, 11, 1]
    assert quiet.line() == ("the seed is played softly (median velocity 10): heard at 50, its new notes written back "
                            "as softly (soft_seed_velocity=null: heard as it is)")
    assert Dynamics().line() == "" and "null" not in quiet.line(say_off=False)


def test_a_soft_seed_is_heard_at_the_models_own_level():
    pop, _ = load_pretrained("pop")
    piano, _ = load_pretrained("piano")
    assert (pop.heard_velocity, piano.heard_velocity) == (87.0, 63.0)  # their training music's median, in config.json
    assert level_rule(50, pop) == LevelRule(50.0, 87.0) and level_rule(50, piano) == LevelRule(50.0, 63.0)
    assert level_rule(70, piano) == LevelRule(70.0, 70.0)  # never under the floor
    assert level_rule(50, object()) == LevelRule(50.0, 50.0)  # a model that records no level: the floor
    assert level_rule(None, pop) is None
    assert level_rule(50, piano, 1.3) == LevelRule(50.0, 63.0, 63.0 * 1.3)  # and a ceiling, over the model's level
    assert level_rule(None, piano, 1.3) == LevelRule(0.0, 63.0, 63.0 * 1.3)
    assert level_rule(50, object(), 1.3) == LevelRule(50.0, 50.0)  # no level recorded: no ceiling


def test_a_seed_written_at_one_velocity_is_heard_at_the_models_level():
    rule = LevelRule(50.0, 63.0, 81.9, flat=True)
    flat = heard_dynamics(np.array([77, 77, 77, 77]), rule)
    assert flat == Dynamics(63 / 77, 77.0, flat=True) and flat.back(np.array([63])).tolist() == [77]
    assert flat.line() == ("the seed is written at one velocity (77): heard at 63, its new notes written back at its "
                           "level (flat_seed_level=false: heard as it is)")
    for as_it_is in ([77, 78, 77], [63, 63], [77]):  # some dynamics; the model's own level; one note
        assert heard_dynamics(np.array(as_it_is), rule).scale == 1.0
    assert heard_dynamics(np.array([77] * 4), LevelRule(50.0, 63.0, 81.9)).scale == 1.0  # flat_seed_level=false
    assert heard_dynamics(np.array([125] * 4), rule).line().startswith("the seed is played loudly")  # loud comes first
    piano, _ = load_pretrained("piano")
    assert level_rule(50, piano, 1.3, True).flat and not level_rule(50, object(), 1.3, True).flat  # needs a level
    assert level_rule(None, object(), None, True) is None


def test_a_loud_seed_is_scaled_down_to_the_models_level_and_back_up():
    rule = LevelRule(50.0, 63.0, 81.9)
    assert heard_dynamics(np.array([70, 80, 81]), rule) == Dynamics(1.0, 80.0)  # under the ceiling: as it is
    loud = heard_dynamics(np.array([120, 126, 127]), rule)
    assert loud.scale == pytest.approx(63 / 126) and loud.median == 126
    assert loud.back(np.array([63, 40, 90])).tolist() == [126, 80, 127]  # within MIDI's velocities
    assert loud.line() == ("the seed is played loudly (median velocity 126): heard at 63, its new notes written back "
                           "as loudly (loud_seed_ratio=null: heard as it is)")


def test_a_seed_played_mf_is_read_as_it_is():
    _, tok = load_pretrained("pop")
    assert metrical_seed(tok, BUNDLED_MOTIF, level=LevelRule(50.0, 87.0)).dynamics.scale == 1.0
    _, piano = load_pretrained("piano")
    as_is, floored = seed_from_midi(piano, BUNDLED_MOTIF), seed_from_midi(piano, BUNDLED_MOTIF, level=LevelRule(50, 63))
    assert floored.dynamics.scale == 1.0 and np.array_equal(as_is.ids, floored.ids)


def velocities(out: Path, record: dict, k: int = 0) -> tuple[list[int], list[int]]:
    """(the seed's velocities, the new notes') of a run's ``k``-th sample."""
    sample = record["samples"][k]
    seed_end = sample["total_seconds"] - sample["new_seconds"] - 0.01
    notes = [n for i in pretty_midi.PrettyMIDI(str(out / sample["midi"])).instruments for n in i.notes]
    return [n.velocity for n in notes if n.start < seed_end], [n.velocity for n in notes if n.start >= seed_end]


@pytest.mark.parametrize("model", ["pop", "piano"])
def test_a_whispered_seed_is_continued_as_softly(tmp_path, model, capsys):
    seed = whisper(tmp_path / "whisper.mid")
    given = sorted(n.velocity for n in pretty_midi.PrettyMIDI(str(seed)).instruments[0].notes)
    medians = {}
    for floor in (50.0, None):
        out = tmp_path / f"out_{floor}"
        record = run(GenerateOptions(seed_midi=str(seed), checkpoint=model, num_samples=1, best_of=1, length_seconds=8,
                                     soft_seed_velocity=floor, audio=False, output_dir=str(out),
                                     progress_every_s=None))
        seed_v, new_v = velocities(out, record)
        medians[floor] = np.median(new_v)
        if floor is not None:  # the seed written back as it was played, within a velocity bin
            assert np.max(np.abs(np.array(sorted(seed_v)) - np.array(given))) <= 2
            level = load_pretrained(model)[0].heard_velocity  # the model's own level: its training music's
            assert f"the seed is played softly (median velocity 9): heard at {level:.0f}" in capsys.readouterr().out
    assert medians[50.0] <= 14  # the seed's 8-10
    assert medians[None] >= 2 * medians[50.0]  # heard as it is, the model answers it louder


@pytest.mark.parametrize("model", ["pop", "piano"])
def test_the_app_says_it_in_its_own_words(tmp_path, model):
    from musictx.app.core import Continuer, Settings, run_request

    app = Continuer(model, workdir=tmp_path / "app", max_upload_mb=0.5)
    settings = Settings(seed_seconds=6, length_seconds=3, num_samples=1, seed=2)
    results, message = run_request(lambda: app.continue_file(whisper(tmp_path / "whisper.mid"), settings))
    assert results and "the seed is played softly (median velocity" in message
    assert f"heard at {app.first_model().net.heard_velocity:.0f}, its new notes written back as softly" in message
    assert "soft_seed_velocity" not in message  # a command-line option the page does not have


def softened(path: Path, velocity: int = 12) -> Path:
    """``path`` with every note at ``velocity`` (a song played pp)."""
    pm = pretty_midi.PrettyMIDI(str(path))
    for instrument in pm.instruments:
        for note in instrument.notes:
            note.velocity = velocity
    pm.write(str(path))
    return path


@pytest.mark.parametrize("task", ["infill", "accompany"])
def test_bars_filled_or_accompanied_in_a_pp_song_are_written_as_softly(tmp_path, task, capsys):
    from .metrical_fixtures import band_song

    song = softened(band_song(tmp_path / "song.mid", bars=8, beats_per_bar=4, seed=3))
    bar = 4 * 60 / 100  # seconds a bar: 4/4 at 100 bpm
    medians = {}
    for floor in (50.0, None):
        out = tmp_path / f"out_{floor}"
        extra = {"tracks": ["bridge"]} if task == "accompany" else {"hooks": {"copy_cache": {"strength": 0.0}}}
        run(GenerateOptions(seed_midi=str(song), task=task, bars="3-6", num_samples=1, soft_seed_velocity=floor,
                            flat_seed_level=floor is not None, audio=False, output_dir=str(out),
                            progress_every_s=None, **extra))  # at one velocity: off means the flat rule too
        written = [(i.name, n) for i in pretty_midi.PrettyMIDI(str(out / "sample_00.mid")).instruments
                   for n in i.notes]
        inside = [n for name, n in written if 2 * bar - 0.01 <= n.start < 6 * bar - 0.01]
        new = [n.velocity for name, n in written if name == "BRIDGE"] if task == "accompany" else \
            [n.velocity for n in inside]
        kept = [n.velocity for name, n in written if name != "BRIDGE" and n not in inside]
        assert new and set(kept) == {12}  # the song's own notes as they were
        medians[floor] = np.median(new)
    assert "the song is played softly (median velocity 12): heard at 87" in capsys.readouterr().out
    assert medians[50.0] <= 30 < medians[None]


def at_one_velocity(path: Path, velocity: int) -> Path:
    """`whisper`'s arpeggio with every note at ``velocity`` (as a notation program writes it: no dynamics)."""
    pm = pretty_midi.PrettyMIDI(str(whisper(path)))
    for note in pm.instruments[0].notes:
        note.velocity = velocity
    pm.write(str(path))
    return path


def test_a_seed_written_at_one_mf_velocity_is_continued_at_it(tmp_path, capsys):
    """Every note at 80 (a notation program's mf): the piano model, heard as it is, answered at its own 63."""
    seed = at_one_velocity(tmp_path / "mf.mid", 80)
    medians = {}
    for flat in (True, False):
        out = tmp_path / f"out_{flat}"
        record = run(GenerateOptions(seed_midi=str(seed), checkpoint="piano", num_samples=4,
                                     length_seconds=8, flat_seed_level=flat, audio=False, output_dir=str(out),
                                     progress_every_s=None, seed=1))
        medians[flat] = np.median([v for k in range(4) for v in velocities(out, record, k)[1]])
    assert "the seed is written at one velocity (77): heard at 63" in capsys.readouterr().out
    assert medians[True] >= 70 and medians[False] <= 66  # 75 and 61 when written


@pytest.mark.parametrize(("option", "said"), [
    ({"soft_seed_velocity": 0}, "soft_seed_velocity must be in 1..127 or null, got 0"),
    ({"soft_seed_velocity": float("nan")}, "soft_seed_velocity"),
    ({"loud_seed_ratio": 0.8}, "loud_seed_ratio must be > 1 .* got 0.8")])
def test_a_floor_outside_midis_velocities_or_a_ceiling_under_the_level_is_refused_in_one_line(option, said):
    from musictx.decoding.errors import GenerateError

    with pytest.raises(GenerateError, match=said):
        GenerateOptions(**option).check_sampling()


def test_a_seed_written_at_one_loud_velocity_is_continued_as_loudly(tmp_path, capsys):
    """Every note at 127, as notation programs export: the piano model, heard as it is, answered at 41-61."""
    seed = at_one_velocity(tmp_path / "loud.mid", 127)
    medians = {}
    for ratio in (1.3, None):
        out = tmp_path / f"out_{ratio}"
        record = run(GenerateOptions(seed_midi=str(seed), checkpoint="piano", num_samples=1,
                                     length_seconds=8, loud_seed_ratio=ratio, flat_seed_level=ratio is not None,
                                     audio=False, output_dir=str(out), progress_every_s=None, seed=1))
        seed_v, new_v = velocities(out, record)
        medians[ratio] = np.median(new_v)
        assert np.min(seed_v) >= 125  # the seed written back as it was played, within a velocity bin
    assert "the seed is played loudly (median velocity 125): heard at 63" in capsys.readouterr().out
    assert medians[1.3] >= 100 and medians[None] <= 80


def test_a_models_level_goes_with_its_folder_and_a_bad_one_is_refused(tmp_path):
    import json

    from musictx.checkpoints.model_store import ModelLoadError, load_model_folder, save_model_folder

    net, tok = load_pretrained("pop")
    back, _, _ = load_model_folder(save_model_folder(net, tok, tmp_path / "copy", dtype="float32"))
    assert back.heard_velocity == 87.0
    config = json.loads((tmp_path / "copy" / "config.json").read_text())
    (tmp_path / "copy" / "config.json").write_text(json.dumps({**config, "velocity": 300}))
    with pytest.raises(ModelLoadError, match=r"config\.json: 'velocity' must be a MIDI velocity \(1 \.\. 127\)"):
        load_model_folder(tmp_path / "copy")
