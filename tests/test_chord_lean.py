"""Chord lean (musictx.decoding.hooks.chord_lean): a lead sheet (``chords=``) leads a metrical continuation. Only a
Pitch after a Program moves, toward the chord of the new bar's half; the command takes ``chords=`` for a
continuation of a metrical seed and refuses it for a Performance model in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from musictx.checkpoints.model_store import load_model
from musictx.decoding.errors import GenerateError
from musictx.decoding.hooks.chord_lean import ChordLean, half_bar_chords
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.chord_labels import Chords
from musictx.tasks.continue_metrical import sample_bars
from musictx.tasks.metrical_seeds import metrical_seed

from .helpers import bonused, started_on_bars, step
from .helpers import remi_bar as _bar
from .metrical_fixtures import band_song

PIANO, WHOLE = 0, "4.0.2"
F_SHARP_MAJOR = {6, 10, 1}


@pytest.fixture(name="pop", scope="module")
def fixture_pop():
    net, tok, _ = load_model("pop")
    return net, tok


def test_each_half_bar_leans_toward_its_own_chord_on_a_pitch_only(pop, tmp_path):
    _, tok = pop
    lab = tmp_path / "sheet.lab"
    lab.write_text("0 1 C:maj\n1 2 A:min\n")
    halves = half_bar_chords(Chords.read(lab), np.array([0.0, 2.0]))  # one bar of 2 s: C, then A minor
    lean = started_on_bars(ChordLean(tok, halves, 3.0), tok, [_bar((0, [(PIANO, 48, WHOLE)]))])
    step(lean, tok, "TimeSig_4/4", "Position_0")
    assert bonused(lean, tok) == set()  # a Program comes next
    step(lean, tok, "Program_0")
    raised = {int(t.split("_")[1]) % 12 for t in bonused(lean, tok)}
    assert raised == {0, 4, 7} and all(t.startswith("Pitch_") for t in bonused(lean, tok))
    step(lean, tok, "Pitch_60", "Velocity_95", f"Duration_{WHOLE}", "Position_8", "Program_0")
    assert {int(t.split("_")[1]) % 12 for t in bonused(lean, tok)} == {9, 0, 4}  # the bar's second half
    masked = torch.zeros(1, tok.vocab_size)
    masked[0, tok.vocab["Pitch_69"]] = float("-inf")
    assert lean(masked)[0, tok.vocab["Pitch_69"]] == float("-inf")


def test_a_lead_sheet_leads_the_continuation_of_a_user_file(pop, tmp_path):
    """A C-major band song continued 4 bars under F#-major chords: the new piano pitches move to F# major."""
    net, tok = pop
    path = band_song(tmp_path / "song.mid", bars=6, bpm=100, beats_per_bar=4, seed=2)
    lab = tmp_path / "sheet.lab"
    lab.write_text("0 3600 F#:maj\n")
    seed = metrical_seed(tok, path)
    program = tok.miditok.vocab["Program_0"]

    def share(chords) -> float:
        rows = sample_bars(net, tok, seed, SamplingOptions(seed=3), num_samples=2, bars=4, chords=chords)
        pitches = [int(tok.id_to_token(int(r[k + 1])).split("_")[1]) for r in rows
                   for k in np.flatnonzero(r[:-1] == program) if tok.type_of[int(r[k + 1])] == "Pitch"]
        assert pitches, "the piano wrote nothing"
        return float(np.mean([p % 12 in F_SHARP_MAJOR for p in pitches]))

    with_chords, alone = share(Chords.read(lab)), share(None)
    # 0.66-0.69 over seeds 1-5 with the shipped full_velocity (0.8+ when the nucleus also cut velocities)
    assert with_chords > 0.6 and with_chords > alone + 0.3, (with_chords, alone)


def test_the_command_takes_chords_for_a_metrical_continuation_and_refuses_them_for_piano(tmp_path, capsys):
    from musictx.generation.continue_midi import run
    from musictx.generation.generate_options import GenerateOptions

    path = band_song(tmp_path / "song.mid", bars=4, bpm=100, beats_per_bar=4, seed=5)
    lab = tmp_path / "sheet.lab"
    lab.write_text("0 3600 D:min\n")
    base = dict(seed_midi=str(path), num_samples=1, length_bars=2, audio=False, seed=1)
    record = run(GenerateOptions(**base, checkpoint="pop", chords=str(lab), output_dir=str(tmp_path / "led")))
    written = json.loads((tmp_path / "led" / "generation.json").read_text())
    assert written["settings"]["chords"] == str(lab) and record["samples"][0]["notes"] > 0
    assert "lead sheet" not in capsys.readouterr().out  # the sheet runs past the new bars: nothing to say
    lab.write_text("0 1 D:min\n")  # a sheet that ends before the new music starts: said, not silently ignored
    run(GenerateOptions(**base, checkpoint="pop", chords=str(lab), output_dir=str(tmp_path / "short")))
    assert f"chords={lab}: the new music (" in capsys.readouterr().out
    with pytest.raises(GenerateError, match="a lead sheet leads a metrical .REMI. model's music; checkpoint=piano"):
        run(GenerateOptions(**base, checkpoint="piano", chords=str(lab), output_dir=str(tmp_path / "p")))
