"""A musician continuing their own MIDI files with ``musictx-generate``: what the run makes of a seed it cannot
take as it is, said in one line, never passed off as what was asked for.

- a seed denser than POP909 (a Chopin etude given to ``pop``) gets every bar asked for: the token cap makes room
  for the seed's densest bar (it stopped at 160 ids a bar, and the sample came back bars short, unsaid), and a
  sample that ``max_tokens`` still stops short says so in its line and record;
- a band of 16 tracks says what its drums do, though the tracks played as a part are counted past eight (the
  drum loop was cut from the line as "and 6 more");
- ``seed_seconds`` longer than the file says the seed is all the file has (it was silently the file's 4 s);
- notes held longer than the tokens' longest Duration (12 beats) are said to be heard and written that long;
- a track named in UTF-8 (music21's Chinese lyrics file) keeps its name in the sample's line and record;
- a dense melody (the etude) is accompanied in every bar asked for: its own ids take room in the token cap (the
  last 4 of 8 bars were left unaccompanied, unsaid), and an accompaniment the cap still stops says so;
- bars filled past the room the model's context leaves (8 bars of the etude) say where the fill stopped (bars 7-10
  came back empty, said "filled").
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pretty_midi
import pytest

from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.paths import BUNDLED_MOTIF
from musictx.tasks.prompt import new_rows, sample
from musictx.tasks.registry import task_named

from .helpers import EDGE_DIR, PIANO_DIR, needs_shared

ETUDE = PIANO_DIR / "asap" / "Chopin" / "Etudes_op_10" / "4" / "ADIG02.mid"  # ~20 notes a second, ~250 ids a bar

SCALE = (60, 62, 64, 65, 67, 69, 71, 72)


def _options(seed: Path, out: Path, **kwargs) -> GenerateOptions:
    base = dict(seed_midi=str(seed), output_dir=str(out), num_samples=1, best_of=1, seed=3, audio=False)
    return GenerateOptions(**{**base, **kwargs})


def _tune(path: Path, beats: int = 16, bpm: float = 120.0, long_notes: bool = False) -> Path:
    """A one-track tune of eighth notes at ``bpm`` (``beats`` beats), over two notes held 75 s where asked."""
    pm = pretty_midi.PrettyMIDI(initial_tempo=bpm)
    piano = pretty_midi.Instrument(0, name="piano")
    step = 30.0 / bpm
    piano.notes += [pretty_midi.Note(80, SCALE[(k * 3) % 8], k * step, k * step + step * 0.9) for k in range(beats * 2)]
    if long_notes:
        piano.notes += [pretty_midi.Note(70, pitch, 0.0, 75.0) for pitch in (36, 43)]
    pm.instruments.append(piano)
    pm.write(str(path))
    return path


def _band(path: Path) -> Path:
    """16 tracks: 15 pitched instruments, each its own line, and drums on channel 10, two bars at 110 bpm."""
    pm = pretty_midi.PrettyMIDI(initial_tempo=110.0)
    beat = 60 / 110
    programs = [0, 24, 32, 40, 41, 42, 48, 56, 57, 60, 65, 71, 73, 80, 88, 19]
    for k, program in enumerate(programs):
        track = pretty_midi.Instrument(program, is_drum=k == 9, name=f"track{k}")
        if k == 9:
            track.notes += [pretty_midi.Note(90, (36, 38, 42, 42)[b % 4], b * beat / 2, b * beat / 2 + 0.1)
                            for b in range(16)]
        else:
            track.notes += [pretty_midi.Note(80, 40 + 3 * k + (b % 3), b * beat, b * beat + beat * 0.9)
                            for b in range(8)]
        pm.instruments.append(track)
    pm.write(str(path))
    return path


@needs_shared
def test_a_seed_denser_than_pop909_gets_every_bar_asked_for(tmp_path, capsys):
    record = run(_options(ETUDE, tmp_path, checkpoint="pop", seed_seconds=4, length_bars=2))
    sample = record["samples"][0]
    assert sample["new_bars"] == 2 and "stop" not in sample  # 1 bar before, in a cap of 320 ids
    assert "stopped in bar" not in capsys.readouterr().out


def test_a_sample_the_token_cap_stops_short_says_so(tmp_path, capsys):
    record = run(_options(BUNDLED_MOTIF, tmp_path, length_bars=4, max_tokens=60))
    sample = record["samples"][0]
    assert sample["stop"] == "max_tokens" and sample["new_bars"] < 4
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(str(tmp_path / "sample_00.mid")))
    assert f"stopped in bar {sample['new_bars']} of the 4 asked for by max_tokens=60" in line
    assert json.loads((tmp_path / "generation.json").read_text())["samples"][0]["stop"] == "max_tokens"


def test_a_band_of_16_tracks_says_what_its_drums_do(tmp_path, capsys):
    run(_options(_band(tmp_path / "band.mid"), tmp_path / "out", length_bars=1))
    parts = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("the model learnt"))
    # 13 tracks played as PIANO beside track0's own piano: the first 8 named, the rest counted, then the drums
    assert "track8 (program 57) as PIANO; and 5 more; track9 (drums) plays the seed's last bar again" in parts


@pytest.mark.parametrize("model", ["pop", "piano"])
def test_seed_seconds_longer_than_the_file_is_said(model, tmp_path, capsys):
    tune = _tune(tmp_path / "short.mid", beats=8)  # 4 s
    record = run(_options(tune, tmp_path / "out", checkpoint=model, seed_seconds=30, length_seconds=2))
    said = [x for x in capsys.readouterr().out.splitlines() if "seed_seconds=30 asks for more than" in x]
    assert len(said) == 1 and str(tune) in said[0]
    assert f"the {record['seed']['seconds']:.2f} s to its end are the seed" in said[0]
    assert record["seed"]["seconds"] == pytest.approx(4.0, abs=0.05)


def test_a_seed_that_fits_says_neither(tmp_path, capsys):
    tune = _tune(tmp_path / "tune.mid", beats=16)  # 8 s, nothing held long
    run(_options(tune, tmp_path / "out", checkpoint="pop", seed_seconds=8, length_bars=1))
    out = capsys.readouterr().out
    assert "asks for more than" not in out and "held longer than" not in out


def test_notes_held_past_the_longest_duration_are_said(tmp_path, capsys):
    tune = _tune(tmp_path / "drone.mid", beats=16, long_notes=True)  # 8 s of tune over a 75 s drone
    run(_options(tune, tmp_path / "out", checkpoint="pop", seed_seconds=8, length_bars=1))
    said = [x for x in capsys.readouterr().out.splitlines() if "held longer than" in x]
    assert said == ["seed: 2 note(s) held longer than 12 beats, the longest the model's tokens hold, are heard and "
                    "written 12 beats long"]
    written = pretty_midi.PrettyMIDI(str(tmp_path / "out" / "sample_00.mid"))
    drone = [n for n in written.instruments[0].notes if n.pitch in (36, 43)]
    assert [round(n.end - n.start, 2) for n in drone] == [6.0, 6.0]  # 12 beats at 120 bpm, as said


@needs_shared
def test_a_track_named_in_utf8_is_named_so_in_the_sample_line(tmp_path, capsys):
    song = EDGE_DIR / "music21-testPrimitive" / "test18.mid"  # two tracks named 音轨1 ("track 1"), UTF-8
    record = run(_options(song, tmp_path, length_bars=1))
    assert list(record["samples"][0]["tracks"]) == ["音轨1"]  # was é\x9f³è½¨1: the bytes read as Latin-1
    assert "{'音轨1': " in capsys.readouterr().out


@needs_shared
def test_a_dense_melody_is_accompanied_in_every_bar_asked_for(tmp_path, capsys):
    run(_options(ETUDE, tmp_path, task="accompany", bars="2-9"))
    assert "the accompaniment stopped" not in capsys.readouterr().out
    written = pretty_midi.PrettyMIDI(str(tmp_path / "sample_00.mid"))
    downbeats = written.get_downbeats()
    onsets = np.array([n.start for i in written.instruments if i.name == "PIANO" for n in i.notes])
    per_bar = [int(((onsets >= downbeats[b]) & (onsets < downbeats[b + 1])).sum()) for b in range(1, 9)]
    assert min(per_bar) > 0, per_bar  # bars 6-9 had none


@needs_shared
def test_an_accompaniment_the_token_cap_stops_says_so(capsys):
    from musictx.checkpoints.model_store import load_pretrained
    from musictx.decoding.sampling_options import SamplingOptions

    net, tok = load_pretrained("pop")
    task = task_named("accompany")
    request = task.request(task.read(tok, ETUDE), 1, 5)  # bars 2-5
    prompt = request.prompt(net.eval(), tok, SamplingOptions(seed=0, best_of=1))
    prompt.max_new_tokens = 200  # the etude's melody alone fills this in its second bar
    request.written(tok, new_rows(sample(net, prompt), prompt))
    said = [x for x in capsys.readouterr().out.splitlines() if "the accompaniment stopped" in x]
    assert len(said) == 1 and said[0].startswith("sample 1 of 1: the accompaniment stopped in bar ")
    assert said[0].endswith("of bars 2-5, at the token cap; the bars after it are left unaccompanied")


@needs_shared
def test_a_fill_out_of_room_says_where_it_stopped(tmp_path, capsys):
    run(_options(ETUDE, tmp_path, task="infill", bars="3-10"))
    said = [x for x in capsys.readouterr().out.splitlines() if "the fill stopped" in x]
    assert len(said) == 1 and said[0].startswith("sample 1 of 1: the fill stopped in bar ")
    stopped = int(said[0].split("in bar ")[1].split(" ")[0])
    assert 3 <= stopped < 10 and said[0].endswith("the bars after it are left empty (fill fewer bars at a time)")
    written = pretty_midi.PrettyMIDI(str(tmp_path / "sample_00.mid"))
    downbeats = written.get_downbeats()
    onsets = np.array([n.start for i in written.instruments for n in i.notes])
    after = (onsets >= downbeats[stopped]) & (onsets < downbeats[10])  # bars stopped+1..10, 1-based
    assert not after.any()  # as said: empty
