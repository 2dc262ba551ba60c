"""A metrical model records the parts it learnt (the Programs its training data plays) with its weights, and a
continuation plays only those: a band's bass and drums, which the shipped `pop` never heard (POP909 has a
melody, a counter-melody and a piano), keep their seed notes, get no new ones, and the user is told so in one
line; a seed of no learnt part at all is refused, naming its file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pretty_midi
import pytest
from symusic import Score

from musictx.checkpoints.model_store import ModelLoadError, load_model, load_pretrained, save_model_folder
from musictx.decoding.errors import GenerateError
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.tasks.metrical_seeds import metrical_seed
from musictx.tasks.played_as import play_as_learnt, unlearnt
from musictx.tasks.take import score_roll
from musictx.training.data import MusicDataModule

from .metrical_fixtures import fixture_band_dir, fixture_remi_checkpoint, fixture_remi_dir  # noqa: F401

BPM = 110


def band(path: Path, parts=("melody", "piano", "bass", "kit")) -> Path:
    """8 bars of 4/4: a named melody (flute), a piano's chords, a bass (program 33) and a drum kit, as asked."""
    pm = pretty_midi.PrettyMIDI(initial_tempo=BPM)
    beat = 60 / BPM
    tracks = {"melody": pretty_midi.Instrument(73, name="melody"), "piano": pretty_midi.Instrument(0, name="piano"),
              "bass": pretty_midi.Instrument(33, name="bass"), "kit": pretty_midi.Instrument(0, True, "kit")}
    for bar in range(8):
        root = [48, 45, 41, 43][bar % 4]
        for k in range(4):
            t = (bar * 4 + k) * beat
            tracks["melody"].notes.append(pretty_midi.Note(90, [72, 74, 76, 79][(bar + k) % 4], t, t + 0.9 * beat))
            tracks["piano"].notes += [pretty_midi.Note(70, root + 12 + i, t, t + 0.9 * beat) for i in (0, 4, 7)]
            tracks["kit"].notes.append(pretty_midi.Note(100, [36, 42, 38, 42][k], t, t + 0.1))
        tracks["bass"].notes.append(pretty_midi.Note(90, root - 12, bar * 4 * beat, (bar * 4 + 4) * beat))
    pm.instruments = [tracks[p] for p in parts]
    pm.write(str(path))
    return path


def options(seed: Path, out: Path) -> GenerateOptions:
    return GenerateOptions(checkpoint="pop", seed_midi=str(seed), length_bars=2, num_samples=1, best_of=1,
                           audio=False, output_dir=str(out))


def notes_by_track(path: Path, bar_ticks_of=lambda tpq: 4 * tpq) -> dict[str, list[tuple[float, int]]]:
    """Each track's notes as (onset in bars, pitch), drums under "drums"."""
    score = Score(str(path))
    bar = bar_ticks_of(score.ticks_per_quarter)
    return {("drums" if t.is_drum else t.name): [(n.time / bar, n.pitch) for n in t.notes] for t in score.tracks}


@pytest.mark.parametrize("drums", ["loop", "seed"])
def test_a_band_seed_plays_its_bass_as_pop_s_piano_part_and_says_so(tmp_path, capsys, drums):
    """The bass (program 33, a part pop never learnt) is read with the piano as POP909's PIANO part (whose left hand
    plays the bass line) and gets the low notes of the new bars back, one at a time; every seed note comes back on
    its own track. The kit, a part pop never learnt either, plays its seed's last bar on under the new ones
    (``drums=loop``, the default: it repeats bar by bar) or stops with the seed (``drums=seed``)."""
    seed = band(tmp_path / "band.mid")
    record = run(replace(options(seed, tmp_path / "out"), drums=drums))
    said = capsys.readouterr().out.splitlines()
    kit = ("kit (drums) plays the seed's last bar again under the new ones (drums=seed: its notes only)"
           if drums == "loop" else "kit (drums) keeps its seed notes and gets no new ones")
    assert (f"the model learnt PIANO, MELODY and BRIDGE only: bass (program 33) as PIANO; {kit} (tracks that share "
            "a part get its new notes by register)") in said
    before, after = notes_by_track(seed), notes_by_track(tmp_path / "out" / record["samples"][0]["midi"])
    for name, notes in before.items():  # the seed's 8 bars, note for note on their own tracks
        assert sorted(n for n in after[name] if n[0] < 8) == sorted(notes), name
    new = {name: [n for n in notes if n[0] >= 8] for name, notes in after.items()}
    last_bar = [(t - 7, p) for t, p in before["drums"] if t >= 7]
    assert new["drums"] == ([(t + 8 + k, p) for k in range(2) for t, p in last_bar] if drums == "loop" else [])
    assert new["melody"] and new["piano"] and new["bass"], new
    assert max(p for _, p in new["bass"]) < min(p for _, p in new["piano"]) + 12  # the low end of the part
    assert len({t for t, _ in new["bass"]}) == len(new["bass"])  # one note at a time, as the seed's bass


def test_strangers_take_the_free_melodic_parts_and_the_rest_join_the_piano():
    """An unnamed flute line over a violin line, a guitar's chords and a bass: the highest line is the MELODY, the
    next the BRIDGE, the chords and the bass the PIANO; a seed with a melody of its own keeps it."""
    pm = pretty_midi.PrettyMIDI()
    for program, pitches, chord in [(73, [79, 81, 83], False), (40, [67, 69, 71], False), (25, [55, 59], True),
                                    (33, [36, 38, 40], False)]:
        inst = pretty_midi.Instrument(program)
        for k in range(12):
            inst.notes += [pretty_midi.Note(80, p, 0.5 * k, 0.5 * k + 0.4)
                           for p in (pitches if chord else [pitches[k % len(pitches)]])]
        pm.instruments.append(inst)
    tok = load_pretrained("pop")[1]
    read = tok.read(Score.from_midi(_midi_bytes(pm)))
    tracks, plan = play_as_learnt(read.score, read.tracks, (0, 80, 81))
    assert [t.program for t in tracks.tracks] == [80, 81, 0, 0] == [t.program for t in read.score.tracks]
    assert plan.played_as == {"(unnamed) (program 73)": "MELODY", "(unnamed) (program 40)": "BRIDGE",
                              "(unnamed) (program 25)": "PIANO", "(unnamed) (program 33)": "PIANO"}
    assert [m.track.real_program for m in plan.shared[0]] == [25, 33] and plan.shared[0][1].one_at_a_time
    pm.instruments[1].name = "vocal"  # the violin, named as a melody, takes MELODY by its name; the flute the BRIDGE
    again = tok.read(Score.from_midi(_midi_bytes(pm)))
    assert [t.program for t in play_as_learnt(again.score, again.tracks, (0, 80, 81))[0].tracks] == [81, 80, 0, 0]


def _midi_bytes(pm) -> bytes:
    import io

    buffer = io.BytesIO()
    pm.write(buffer)
    return buffer.getvalue()


def test_a_drum_loop_alone_is_refused_naming_its_file(tmp_path):
    seed = band(tmp_path / "loop.mid", parts=("kit",))
    with pytest.raises(GenerateError, match=r"loop\.mid: none of its tracks \(kit \(drums\)\) is a part the model "
                                            r"learnt \(PIANO, MELODY and BRIDGE\)"):
        run(options(seed, tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_the_parts_travel_with_the_weights_and_a_bad_entry_is_refused(tmp_path):
    net, tok = load_pretrained("pop")
    assert net.learnt_programs == (0, 80, 81)  # POP909's PIANO, MELODY and BRIDGE, the programs inside musictx
    folder = save_model_folder(net, tok, tmp_path / "copy")
    assert load_model(str(folder))[0].learnt_programs == (0, 80, 81)
    config = json.loads((folder / "config.json").read_text())
    del config["programs"]
    (folder / "config.json").write_text(json.dumps(config))
    unrecorded, _, _ = load_model(str(folder))  # a model saved before the parts were recorded plays every track
    assert unrecorded.learnt_programs is None
    seed = metrical_seed(tok, band(tmp_path / "band.mid"))
    assert unlearnt(unrecorded.learnt_programs, seed.tracks, seed.score) == []
    (folder / "config.json").write_text(json.dumps({**config, "programs": [0, 300]}))
    with pytest.raises(ModelLoadError, match=r"config\.json: 'programs' must list General MIDI program numbers"):
        load_model(str(folder))


def test_training_records_the_programs_of_its_data(remi_checkpoint, remi_dir):
    """The tiny model the metrical tests train (real Lightning, band songs of a Melody and a Piano track)."""
    net, _, _ = load_model(remi_checkpoint)
    assert net.learnt_programs == tuple(MusicDataModule(remi_dir).programs()) == (0, 80)


def test_unnamed_tracks_are_told_apart_in_the_summary(tmp_path):
    pm = pretty_midi.PrettyMIDI()
    for program in (0, 0, 33):
        inst = pretty_midi.Instrument(program)
        inst.notes.append(pretty_midi.Note(80, 60, 0.0, 0.5))
        pm.instruments.append(inst)
    pm.write(str(tmp_path / "three.mid"))
    _, counts, _, parts = score_roll(Score(str(tmp_path / "three.mid")))
    assert counts == {"program 0": 1, "program 0 (2)": 1, "program 33": 1} and [p for p, _ in parts] == list(counts)


def test_the_app_says_which_tracks_it_played_as_another_part(tmp_path):
    from musictx.app.core import Continuer, Settings

    app = Continuer(model="pop", workdir=tmp_path / "work")
    (result,) = app.continue_file(band(tmp_path / "band.mid"), Settings(seed_seconds=8.8, length_seconds=4.4,
                                                                        num_samples=1), report=lambda f, t: None)
    assert result.seed_note.startswith("the model learnt PIANO, MELODY and BRIDGE only: bass (program 33) as PIANO")
    assert "bass" in {t.name for t in Score(str(result.midi)).tracks}


def test_two_tracks_of_one_name_and_program_keep_their_own_seed_notes(tmp_path):
    """Two tracks named Guitar on program 25 (chords, and a low line) share pop's PIANO part; written back, each
    has its own seed notes, not one of them all."""
    pm = pretty_midi.PrettyMIDI(initial_tempo=BPM)
    chords, low = pretty_midi.Instrument(25, name="Guitar"), pretty_midi.Instrument(25, name="Guitar")
    melody = pretty_midi.Instrument(0, name="melody")
    beat = 60 / BPM
    for k in range(32):
        melody.notes.append(pretty_midi.Note(90, [72, 74, 76, 79][k % 4], k * beat, (k + 0.9) * beat))
        chords.notes += [pretty_midi.Note(70, p, k * beat, (k + 0.9) * beat) for p in (55, 59, 62)]
        if k % 4 == 0:
            low.notes.append(pretty_midi.Note(80, 40, k * beat, (k + 3.9) * beat))
    pm.instruments = [melody, chords, low]
    pm.write(str(tmp_path / "guitars.mid"))
    record = run(options(tmp_path / "guitars.mid", tmp_path / "out"))
    out = Score(str(tmp_path / "out" / record["samples"][0]["midi"]))
    seed_end = 8 * 4 * out.ticks_per_quarter
    guitars = [sorted({n.pitch for n in t.notes if n.time < seed_end}) for t in out.tracks if t.name == "Guitar"]
    assert guitars == [[55, 59, 62], [40]]


def test_tracks_named_for_a_part_take_it_before_the_unnamed_ones():
    """POP909's other arrangements name their counter-melody CAU; a track named only piano is the PIANO part even
    after an unnamed track on program 0 (which once took the part's program first)."""
    from musictx.io.score_prep import assign_programs

    pm = pretty_midi.PrettyMIDI()
    for name in ("", "CAU", "Piano", "melody"):
        inst = pretty_midi.Instrument(0, name=name)
        inst.notes.append(pretty_midi.Note(80, 60, 0.0, 0.5))
        pm.instruments.append(inst)
    tracks = assign_programs(Score.from_midi(_midi_bytes(pm)))
    assert [(t.name, t.program) for t in tracks.tracks] == [("", 1), ("CAU", 81), ("Piano", 0), ("melody", 80)]


def test_a_track_without_notes_is_not_said_to_go_silent(tmp_path):
    """A lyrics or tempo track (no notes, here on program 5) is no part: the line names only the drums."""
    import mido

    from musictx.tasks.continue_metrical import parts_line, playable_programs

    midi = mido.MidiFile(str(band(tmp_path / "band.mid")))
    midi.tracks.append(mido.MidiTrack([mido.MetaMessage("track_name", name="lyrics"),
                                       mido.Message("program_change", program=5, channel=5),
                                       mido.MetaMessage("lyrics", text="la", time=10)]))
    midi.save(str(tmp_path / "with_lyrics.mid"))
    net, tok = load_pretrained("pop")
    seed = metrical_seed(tok, tmp_path / "with_lyrics.mid", learnt=net.learnt_programs)
    assert "lyrics" not in seed.tracks.describe()  # a track without notes is no track of the seed's (it took a part)
    line = parts_line(net, seed)
    assert "lyrics" not in line and "kit (drums) keeps its seed notes" in line
    assert set(playable_programs(net, seed)) == {0, 80}  # the piano (with the bass) and the melody


def test_an_unnamed_melody_on_the_piano_s_program_is_heard_as_the_melody():
    """Two unnamed tracks on program 0, a tune and its chords (a file from a notation program): the first took
    the PIANO part by its program and the tune was played as the piano's; now the tune is the MELODY and the chords
    the PIANO. A file of one track keeps its part (the bundled motif is continued as before)."""
    pm = pretty_midi.PrettyMIDI()
    tune, chords = pretty_midi.Instrument(0, name="Track 1"), pretty_midi.Instrument(0, name="Track 2")
    for k in range(16):
        tune.notes.append(pretty_midi.Note(90, [72, 74, 76, 79][k % 4], 0.5 * k, 0.5 * k + 0.4))
        chords.notes += [pretty_midi.Note(70, p, 0.5 * k, 0.5 * k + 0.4) for p in (48, 52, 55)]
    pm.instruments = [tune, chords]
    tok = load_pretrained("pop")[1]
    read = tok.read(Score.from_midi(_midi_bytes(pm)))
    assert [t.program for t in read.tracks.tracks] == [0, 1]  # the tune first on program 0: the PIANO part
    tracks, plan = play_as_learnt(read.score, read.tracks, (0, 80, 81))
    assert [t.program for t in tracks.tracks] == [80, 0]
    assert plan.played_as == {"Track 1 (program 0)": "MELODY", "Track 2 (program 0)": "PIANO"} and not plan.shared
    pm.instruments = [tune]
    alone = tok.read(Score.from_midi(_midi_bytes(pm)))
    assert play_as_learnt(alone.score, alone.tracks, (0, 80, 81)) == (alone.tracks, None)


def test_lines_that_share_a_part_take_one_note_of_an_onset_each():
    """A viola and a cello (lines both) share the PIANO part: of a chord of 57 and 62 struck at once, the viola
    (median 60) keeps the nearer, 62, and the cello, striking nothing there, takes 57 (it stayed on the viola)."""
    from musictx.io.score_prep import Track
    from musictx.tasks.played_as import Member, owners

    viola, cello = (Member(k, Track(0, name, p), median, True) for k, name, p, median in
                    ((0, "Viola", 41, 60.0), (1, "Cello", 42, 45.0)))
    notes = {"time": np.array([0, 0, 480]), "pitch": np.array([57, 62, 43])}
    assert owners(notes, [viola, cello]).tolist() == [1, 0, 1]


def test_two_tracks_named_alike_are_told_apart_in_the_line():
    from musictx.io.score_prep import Track, TrackMap
    from musictx.tasks.played_as import described

    violins = TrackMap((Track(40, "Violin", 40), Track(41, "Violin", 40), Track(42, "Viola", 41)))
    assert described(violins) == ["Violin (program 40)", "Violin (2) (program 40)", "Viola (program 41)"]
