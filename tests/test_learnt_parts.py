"""A metrical model records the parts it learnt (the Programs its training data plays) with its weights, and a
continuation plays only those: a band's bass and drums, which the shipped `pop` never heard (POP909 has a
melody, a counter-melody and a piano), keep their seed notes, get no new ones, and the user is told so in one
line; a seed of no learnt part at all is refused, naming its file."""

from __future__ import annotations

import json
from pathlib import Path

import pretty_midi
import pytest
from symusic import Score

from musictx.checkpoints.model_store import ModelLoadError, load_model, load_pretrained, save_model_folder
from musictx.decoding.errors import GenerateError
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.tasks.continue_metrical import unlearnt_tracks
from musictx.tasks.metrical_seeds import metrical_seed
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


def test_a_band_seed_continues_the_parts_the_model_learnt_and_says_which_it_leaves(tmp_path, capsys):
    record = run(options(band(tmp_path / "band.mid"), tmp_path / "out"))
    said = capsys.readouterr().out.splitlines()
    assert ("not continued: bass (program 33), kit (drums): the model learnt PIANO, MELODY and BRIDGE only; these "
            "keep their seed notes and get no new ones") in said
    score = Score(str(tmp_path / "out" / record["samples"][0]["midi"]))
    seed_end = 8 * 4 * score.ticks_per_quarter  # the seed's 8 bars, then the 2 new ones
    new = {("drums" if t.is_drum else t.name): sum(n.time >= seed_end for n in t.notes) for t in score.tracks}
    seed = {("drums" if t.is_drum else t.name): sum(n.time < seed_end for n in t.notes) for t in score.tracks}
    assert new["bass"] == new["drums"] == 0 and seed["bass"] == 8 and seed["drums"] == 32
    assert new["melody"] > 0 and new["piano"] > 0


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
    assert unlearnt_tracks(unrecorded, metrical_seed(tok, band(tmp_path / "band.mid"))) == []
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
