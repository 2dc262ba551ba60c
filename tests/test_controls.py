"""The controls a musician expects from the command line: an instrument per written track (``programs=``),
a folder of seeds in one run."""

from __future__ import annotations

import pretty_midi
import pytest

from musictx.decoding.errors import GenerateError
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.midi_io import MidiReadError
from musictx.paths import BUNDLED_MOTIF

from .helpers import SHARED_DATA, needs_shared

SONG = SHARED_DATA / "pop" / "POP909" / "014" / "014.mid"
needs_pop = pytest.mark.skipif(not SONG.is_file(), reason=f"POP909 not found at {SONG} (CI and dev machines only)")


@needs_pop
def test_written_tracks_carry_the_asked_programs_and_their_names(tmp_path, capsys):
    record = run(GenerateOptions(seed_midi=str(SONG), seed_seconds=8, length_bars=2, num_samples=1, audio=False,
                                 programs={"MELODY": "Flute", "bridge": 40, "drums": 1}, output_dir=str(tmp_path),
                                 best_of=1))  # the programs, not the choice: BRIDGE plays in this draw
    pm = pretty_midi.PrettyMIDI(str(tmp_path / record["samples"][0]["midi"]))
    assert {i.name: i.program for i in pm.instruments} == {"MELODY": 73, "BRIDGE": 40, "PIANO": 0}
    assert record["samples"][0]["programs"] == {"melody": 73, "bridge": 40}
    assert "programs: no written track is named drums; left as they were" in capsys.readouterr().out


def test_a_piano_continuation_takes_its_program_and_bad_programs_are_refused_before_the_model(tmp_path):
    record = run(GenerateOptions(checkpoint="piano", seed_midi=str(BUNDLED_MOTIF), seed_seconds=2, length_seconds=1,
                                 num_samples=1, audio=False, programs="piano=Harpsichord",
                                 output_dir=str(tmp_path / "p")))
    pm = pretty_midi.PrettyMIDI(str(tmp_path / "p" / record["samples"][0]["midi"]))
    assert [i.program for i in pm.instruments] == [6]
    for bad, said in (({"MELODY": "Flooot"}, "programs.MELODY=Flooot: a General MIDI program is 0-127"),
                      ({"MELODY": 128}, "programs.MELODY=128"), ("MELODY", "give TRACK=PROGRAM pairs")):
        with pytest.raises(GenerateError, match=said):
            GenerateOptions(checkpoint="no such model", programs=bad, output_dir=str(tmp_path / "q")).check()


@needs_pop
def test_a_folder_of_seeds_is_continued_file_by_file_with_one_summary(tmp_path, capsys):
    import json

    seeds = tmp_path / "seeds"
    (seeds / "sub").mkdir(parents=True)
    (seeds / "a.mid").write_bytes(BUNDLED_MOTIF.read_bytes())
    (seeds / "sub" / "b.MID").write_bytes(SONG.read_bytes())
    (seeds / "broken.mid").write_bytes(b"MThd not really")
    (seeds / "notes.txt").write_text("not a seed")
    out = tmp_path / "out"
    summary = run(GenerateOptions(seed_midi=str(seeds), seed_seconds=5, length_seconds=4, num_samples=1,
                                  audio=False, output_dir=str(out)))
    assert [(d["seed"], d["checkpoint"]) for d in summary["continued"]] == [
        (str(seeds / "a.mid"), "pop"), (str(seeds / "sub" / "b.MID"), "pop")]  # each chose its model
    assert (out / "a" / "sample_00.mid").is_file() and (out / "sub" / "b" / "sample_00.mid").is_file()
    assert [s["seed"] for s in summary["skipped"]] == [str(seeds / "broken.mid")]
    assert json.loads((out / "seeds.json").read_text()) == summary
    said = capsys.readouterr().out
    assert f"seeds: 2 of 3 files of {seeds} continued into {out}; 1 skipped" in said
    assert f"skipped: seed_midi={seeds / 'broken.mid'}: unreadable MIDI" in said
    (tmp_path / "empty").mkdir()
    with pytest.raises(GenerateError, match="a folder without .mid or .midi files in it"):
        run(GenerateOptions(seed_midi=str(tmp_path / "empty"), output_dir=str(tmp_path / "o2")))


def test_a_second_folder_run_into_the_same_output_keeps_the_first_and_says_so(tmp_path, capsys):
    """Its samples take the next numbers and its summary the next name, reserved before any seed is continued: the
    end of a long run cannot be refused for a name the folder already held."""
    import json

    seeds, out = tmp_path / "seeds", tmp_path / "out"
    seeds.mkdir()
    (seeds / "a.mid").write_bytes(BUNDLED_MOTIF.read_bytes())
    opts = GenerateOptions(checkpoint="piano", seed_midi=str(seeds), seed_seconds=2, length_seconds=1,
                           num_samples=1, audio=False, output_dir=str(out))
    first = run(opts)
    second = run(opts)
    assert json.loads((out / "seeds.json").read_text()) == first
    assert json.loads((out / "seeds_2.json").read_text()) == second
    assert [d["samples"] for d in first["continued"] + second["continued"]] == [["sample_00.mid"], ["sample_01.mid"]]
    said = capsys.readouterr().out
    assert f"continued into {out} (seeds.json of an earlier run kept: this run's is seeds_2.json)" in said
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no claim left behind


@needs_shared
def test_a_whole_long_seed_is_said_to_be_one(tmp_path, capsys):
    performance = SHARED_DATA / "piano" / "asap" / "Bach" / "Prelude" / "bwv_860" / "ZhangH04M.mid"  # about 50 s
    long_seed = tmp_path / "twice.mid"
    twice = pretty_midi.PrettyMIDI(str(performance))
    end = twice.get_end_time()
    for inst in twice.instruments:  # the performance played twice: over a minute
        inst.notes += [pretty_midi.Note(n.velocity, n.pitch, n.start + end, n.end + end) for n in inst.notes]
    twice.write(str(long_seed))
    run(GenerateOptions(checkpoint="piano", seed_midi=str(long_seed), length_seconds=1, num_samples=1, audio=False,
                        output_dir=str(tmp_path / "out")))
    said = capsys.readouterr().out
    assert f"of {long_seed} (seed_seconds=null); the new music follows its end" in said
    assert "seed_seconds=N keeps its first N s; seed_from=end its last 10 s" in said


@needs_pop
def test_accompany_a_whole_song_writes_a_new_accompaniment_for_its_melody(tmp_path):
    record = run(GenerateOptions(task="accompany", seed_midi=str(SONG), bars="2-4", num_samples=1, audio=False,
                                 output_dir=str(tmp_path / "out")))
    assert "BRIDGE, PIANO written for bars 2-4" in record["what"]
    assert ("(its own BRIDGE and PIANO replaced in bars 2-4 by ones written anew for its melody, kept in its other "
            "bars)") in record["what"]
    made = pretty_midi.PrettyMIDI(str(tmp_path / "out" / record["samples"][0]["midi"]))
    given = pretty_midi.PrettyMIDI(str(SONG))
    assert [i.name for i in made.instruments] == ["MELODY", "BRIDGE", "PIANO"]
    assert len(made.instruments[0].notes) == len(given.instruments[0].notes)  # the melody, note for note
    # the song's own piano in its other bars (test_accompany_whole.py checks which notes)
    assert len(made.instruments[2].notes) > len(given.instruments[2].notes) / 2
    with pytest.raises(MidiReadError, match="already has a PIANO track"):  # a track named: as before
        run(GenerateOptions(task="accompany", seed_midi=str(SONG), tracks=["piano"], bars="2-4", num_samples=1,
                            audio=False, output_dir=str(tmp_path / "out2")))
