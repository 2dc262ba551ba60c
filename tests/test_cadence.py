"""``ending=true``: a continuation's last two bars close the piece, a cadence to its key's tonic chord, struck on the
last bar's downbeat, held, the root in the bass; a band's drums close on a crash. Real shipped `pop`, real MIDI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pretty_midi
import pytest
import torch

from musictx.checkpoints.model_store import load_pretrained
from musictx.decoding.hooks.cadence import Cadence, cadence_chords
from musictx.paths import BUNDLED_MOTIF

from .test_drum_loop import BEAT, ROCK, groove


def last_bar(path: Path, beats_per_bar: int = 4) -> tuple[list[pretty_midi.Note], float, float]:
    """(the pitched notes struck in the file's last bar, its start, its end), from the file's own downbeats."""
    pm = pretty_midi.PrettyMIDI(str(path))
    notes = [n for i in pm.instruments if not i.is_drum for n in i.notes]
    downbeats = pm.get_downbeats()
    start = max(d for d in downbeats if d <= max(n.start for n in notes) + 1e-6)
    bar = 60 / pm.get_tempo_changes()[1][-1] * beats_per_bar
    return [n for n in notes if n.start >= start - 1e-6], start, start + bar


def generate(out: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "musictx.commands.generate", f"seed_midi={BUNDLED_MOTIF}", "length_bars=4",
           "num_samples=2", "seed=3", "audio=false", f"output_dir={out}", f"hydra.run.dir={out}", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.mark.slow  # 8-15 s of real runs; in `make test-all` (the fast suite stays under 10 min)
def test_the_motif_ends_on_its_tonic_chord_held_with_the_root_in_the_bass(tmp_path):
    generate(tmp_path / "ends", "ending=true")
    generate(tmp_path / "cut")
    for k in range(2):  # the bundled motif is in C major
        notes, start, end = last_bar(tmp_path / "ends" / f"sample_0{k}.mid")
        assert {round(n.start - start, 3) for n in notes} == {0.0}  # one chord, on the downbeat
        assert {n.pitch % 12 for n in notes} <= {0, 4, 7} and {0, 4} <= {n.pitch % 12 for n in notes}
        assert min(notes, key=lambda n: n.pitch).pitch % 12 == 0
        assert all(n.end >= end - 0.01 for n in notes)  # held to the bar's end
        cut, start, _ = last_bar(tmp_path / "cut" / f"sample_0{k}.mid")  # without: the music runs on to the line
        assert len({round(n.start - start, 3) for n in cut}) > 1


def test_the_bar_before_leans_on_iv_then_v7_and_the_last_bar_forbids_what_would_not_close():
    from musictx.tasks import metrical_seed

    net, tok = load_pretrained("pop")
    vocab = tok.miditok.vocab
    seed = metrical_seed(tok, BUNDLED_MOTIF, learnt=net.learnt_programs)
    hook = Cadence(tok, bars=2, strength=3.0)  # the first new bar is the one before the last
    hook.start(torch.tensor([[*seed.ids.tolist(), tok.bar_id]]))

    def follow(*names: str) -> torch.Tensor:
        """The hook's logits (V,) from zeros after the ids ``names``."""
        for name in names:
            hook.update(torch.tensor([vocab[name]]))
        return hook(torch.zeros(1, tok.vocab_size))[0]

    sub, dom, _ = cadence_chords((0, "major"))
    pitch_ids = tok.ids_of_type("Pitch")
    pitches = tok.numbers_of("Pitch")[pitch_ids]
    leaned = follow("Position_0", "Program_0")
    assert hook.keys_read == [(0, "major")]  # the motif is in C
    assert torch.equal(leaned[pitch_ids], torch.from_numpy(3.0 * sub[pitches % 12].astype(np.float32)))  # F A C
    leaned = follow("Pitch_65", "Velocity_63", "Duration_1.0.4", "Position_8", "Program_0")  # the second half
    assert torch.equal(leaned[pitch_ids], torch.from_numpy(3.0 * dom[pitches % 12].astype(np.float32)))  # G B D F
    follow("Pitch_67", "Velocity_63", "Duration_1.0.4")  # G4: the bar before's lowest note but F4
    last = follow("Bar_None")
    assert torch.isinf(last[tok.ids_of_type("Position")[1:]]).all() and last[vocab["Position_0"]] == 0
    assert torch.isinf(last[tok.bar_id])  # nothing struck yet: the bar may not close
    bass = follow("Position_0", "Program_0")
    allowed = pitches[torch.isfinite(bass[pitch_ids]).numpy()]
    assert allowed.tolist() == [60]  # a root at most an octave under F4 (65) and not above it: C4
    follow("Pitch_60", "Velocity_63")
    held = follow()
    durations = tok.ids_of_type("Duration")
    assert (tok.duration_beats()[durations][torch.isfinite(held[durations]).numpy()] >= 4).all()
    follow("Duration_4.0.2", "Program_0")
    assert torch.isinf(follow()[tok.bar_id])  # C alone: the third is missing
    upper = pitches[torch.isfinite(follow()[pitch_ids]).numpy()]
    assert set(upper % 12) == {0, 4, 7} and upper.min() >= 60  # the triad, over the bass
    assert not torch.isinf(follow("Pitch_64", "Velocity_63", "Duration_4.0.2")[tok.bar_id])  # C and E: it may close


def test_a_bands_drums_close_on_a_crash_under_the_final_chord(tmp_path):
    out = tmp_path / "band"
    cmd = [sys.executable, "-m", "musictx.commands.generate", f"seed_midi={groove(tmp_path / 'g.mid', [ROCK] * 4)}",
           "length_bars=4", "num_samples=1", "ending=true", "audio=false", f"output_dir={out}",
           f"hydra.run.dir={out}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "and a crash on the last bar's downbeat" in done.stdout
    kit = next(i for i in pretty_midi.PrettyMIDI(str(out / "sample_00.mid")).instruments if i.is_drum)
    last = 7 * 4 * BEAT  # the seed's 4 bars, then 4 new: the last starts at bar 8
    final = [n for n in kit.notes if n.start >= last - 1e-3]
    assert {round(n.start - last, 3) for n in final} == {0.0} and 49 in {n.pitch for n in final}
    assert len([n for n in kit.notes if 6 * 4 * BEAT - 1e-3 <= n.start < last - 1e-3]) == len(ROCK)  # bar 7: the beat


def test_ending_is_for_a_continuation(tmp_path):
    from musictx.decoding.errors import GenerateError
    from musictx.generation.generate_options import GenerateOptions

    net, tok = load_pretrained("piano")
    with pytest.raises(GenerateError, match="ending=true: a piano's close holds its chord 2 s"):
        GenerateOptions(output_dir=str(tmp_path), ending=True, length_seconds=2).check_model(net, tok)
    for task in ("infill", "accompany"):  # said, not ignored
        with pytest.raises(GenerateError, match=f"ending=true is not for task={task}"):
            GenerateOptions(output_dir=str(tmp_path / task), task=task, seed_midi=str(BUNDLED_MOTIF), bars="3-4",
                            ending=True).check()


def test_the_app_and_its_api_end_the_piece(tmp_path):
    from musictx.app.api import _flag
    from musictx.app.core import Continuer, Settings

    app = Continuer(model="pop", workdir=tmp_path / "work")
    (result,) = app.continue_file(BUNDLED_MOTIF, Settings(seed_seconds=20, length_seconds=5, num_samples=1,
                                                          ending=True), report=lambda f, t: None)
    notes, start, _ = last_bar(result.midi)
    assert {round(n.start - start, 3) for n in notes} == {0.0} and {n.pitch % 12 for n in notes} <= {0, 4, 7}
    assert _flag("true") and not _flag("off")
    with pytest.raises(ValueError):
        _flag("maybe")


def test_a_piano_continuation_ends_on_its_seeds_tonic_chord_held(tmp_path):
    from musictx.io.keys import cadence_chords, key_of_histogram

    from .helpers import write_random_midi

    seed = write_random_midi(tmp_path / "played.mid", seed=4, n_notes=60, seconds=10.0)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "musictx.commands.generate", "checkpoint=piano", f"seed_midi={seed}",
           "length_seconds=6", "num_samples=3", "seed=2", "ending=true", "audio=false", f"output_dir={out}",
           f"hydra.run.dir={out}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "max_tokens" not in done.stdout  # time never stood still for good
    played = pretty_midi.PrettyMIDI(str(seed)).instruments[0].notes
    key = key_of_histogram(np.bincount([n.pitch % 12 for n in played], minlength=12).astype(float))
    tonic = cadence_chords(key)[2]
    for k in range(3):
        notes = pretty_midi.PrettyMIDI(str(out / f"sample_0{k}.mid")).instruments[0].notes
        end, last = max(n.end for n in notes), max(n.start for n in notes)
        chord = [n for n in notes if n.start >= last - 0.005]  # struck together at the last onset
        assert end - 3.0 < last <= end - 2.0  # struck 2 s before the end, held past it by the last TIME_SHIFT
        assert {n.pitch % 12 for n in chord} == set(np.flatnonzero(tonic))  # the triad, all three
        assert min(chord, key=lambda n: n.pitch).pitch % 12 == key[0]  # the root in the bass
        assert all(n.end >= end - 0.05 for n in chord)  # held to the end
