"""Which model serves each app request, without a browser: with no --model one `Continuer` picks per upload and
per tab by the command's rule (`musictx.generation.model_choice.choose_model`), loads each model once and says
which it used; --model pins one, and a pinned model that cannot do a tab says how to start the app instead.
Empty bar boxes are the whole piece; the audio progress bar names the WAV, not its temporary file."""

from __future__ import annotations

import numpy as np
import pretty_midi
import pytest
from symusic import Score

from musictx.app.core import Continuer, Settings, run_request
from musictx.app.infill_tab import Filler, bar_number
from musictx.app.messages import task_request
from musictx.decoding.errors import GenerateError
from musictx.generation.model_choice import choose_model

from .helpers import SHARED_DATA, random_pretty_midi
from .metrical_fixtures import band_song

TINY = Settings(seed_seconds=2, length_seconds=1, num_samples=1, seed=1)


@pytest.fixture(scope="module")
def uploads(tmp_path_factory) -> dict:
    """A band's song on a beat grid (two named tracks, 8 bars of 4/4), its melody alone, and a performance."""
    folder = tmp_path_factory.mktemp("uploads")
    song = band_song(folder / "song.mid", bars=8, bpm=120, beats_per_bar=4, seed=2)
    melody = Score(str(song))
    melody.tracks = [melody.tracks[0]]
    melody.dump_midi(str(folder / "melody.mid"))
    random_pretty_midi(np.random.default_rng(0), n_notes=60, seconds=6.0).write(str(folder / "played.mid"))
    return {"song": song, "melody": folder / "melody.mid", "played": folder / "played.mid"}


def test_one_app_chooses_per_upload_and_tab_and_loads_each_model_once(uploads, tmp_path):
    cont = Continuer(workdir=tmp_path / "work")
    assert cont.models.loaded() == []  # nothing loaded before a request needs it
    made = {}
    for path, model in ((uploads["played"], "piano"), (uploads["song"], "pop")):
        results, message = run_request(lambda p=path: cont.continue_file(p, TINY))
        made[model] = results[0].midi
        name, why = choose_model(path, ["piano", "pop", "pop_infill"])
        assert name == model and message == f"1 continuation(s) ready. Model `{model}`: {why}."
    filler = Filler(cont)
    assert filler.problem is None and filler.accompany_problem is None  # nothing to refuse: the app chooses
    take, message = task_request(lambda: filler.fill(uploads["song"], 5, 8), "fill")
    assert message == ("Done: listen, then Keep it or Retry. Model `pop_infill`: the Infill tab: the pop model "
                       "fine-tuned to fill bars.")
    take, message = task_request(lambda: filler.accompany(uploads["played"]), "accompany")  # a performance, too
    assert "Model `pop`: the Accompany tab: the pop model writes the accompaniment." in message
    assert "BRIDGE, PIANO written for bars 1-" in take.title.replace(" (no notes)", "")  # a silent one is marked
    assert "PIANO" in [t.name for t in Score(str(take.midi)).tracks]
    assert sorted(cont.models.loaded()) == ["piano", "pop", "pop_infill"]
    assert cont.models.get("pop") is cont.models.choose(uploads["song"]).model  # loaded once, then kept
    # a result continued further keeps the model that made it
    for model, midi in made.items():
        [again] = cont.continue_further(midi, TINY)
        assert again.model_line.startswith(f"Model `{model}`:")


def test_a_pinned_model_serves_every_request_and_says_how_to_unpin(uploads, tmp_path):
    cont = Continuer("piano", workdir=tmp_path / "work")
    assert cont.models.loaded() == ["piano"]  # a pinned model loads at the start: a bad one stops the app there
    [result] = cont.continue_file(uploads["song"], TINY)
    assert result.model_line == "Model `piano`: chosen with --model."
    filler = Filler(cont)
    assert filler.accompany_problem == ("The model `piano` reads performance events, not bars: start the app "
                                        "without --model (it then uses pop for this tab).")
    _, message = task_request(lambda: filler.accompany(uploads["melody"]), "accompany")
    assert message == f"**Cannot accompany:** {filler.accompany_problem}"
    with pytest.raises(GenerateError, match=r"^--model nosuch: no such file, model folder or shipped model name"):
        Continuer("nosuch", workdir=tmp_path / "other")
    assert "checkpoint" not in cont.models.startup_line()


def test_empty_bar_boxes_are_the_whole_piece(uploads, tmp_path):
    filler = Filler(Continuer(workdir=tmp_path / "work"))
    take, message = task_request(lambda: filler.accompany(uploads["melody"], [], None, ""), "accompany")
    assert message.startswith("Done")
    assert "BRIDGE, PIANO written for bars 1-8, random seed 0" in take.title.replace(" (no notes)", "")
    take, _ = task_request(lambda: filler.accompany(uploads["melody"], ["PIANO"], "5", None), "accompany")
    assert "PIANO written for bars 5-8" in take.title
    assert [bar_number(v, "From") for v in (None, "", " 3 ", 4, 2.0)] == [None, None, 3, 4, 2]
    for bad in ("0", "abc", "2.5", -1):
        with pytest.raises(GenerateError, match=r"^From bar: '.*' is not a bar number"):
            bar_number(bad, "From")
    full = band_song(tmp_path / "full.mid", bars=4, names=("Melody", "Bridge"))  # nothing missing but PIANO
    _, message = task_request(lambda: filler.accompany(full, ["BRIDGE"]), "accompany")
    assert message.startswith("**Cannot accompany:** full.mid: already has a BRIDGE track (program ")
    assert message.endswith("; the Infill tab's Tracks box redoes it")  # the page's words, not task=infill's
    _, message = task_request(lambda: filler.fill(uploads["song"], "x", 8), "fill")
    assert message == ("**Cannot fill:** From bar: 'x' is not a bar number (a whole number from 1; empty: the "
                       "first bar)")


def test_audio_progress_names_the_wav_not_its_temporary_file(tmp_path, capsys):
    """A piece over one render chunk (120 s) shows a progress bar; it is labelled with the WAV being made."""
    from musictx.io import audio

    if audio.audio_unavailable(engine="midirenderer"):
        pytest.skip("midirenderer is not installed (audio extra)")
    pm = pretty_midi.PrettyMIDI()
    pm.instruments.append(pretty_midi.Instrument(0))
    pm.instruments[0].notes += [pretty_midi.Note(80, 60, t, t + 0.5) for t in (0.0, 65.0, 130.0)]
    pm.write(str(tmp_path / "long.mid"))
    audio.render_wav(tmp_path / "long.mid", tmp_path / "long.wav", engine="midirenderer")
    shown = capsys.readouterr().out
    assert "audio long.wav" in shown and ".tmp" not in shown


def test_the_beats_per_bar_box_reads_the_bars_as_the_user_says(uploads, tmp_path):
    """The band song is 8 bars of 4/4; read as 2 beats a bar it has 16 (the take is written into the user's own
    file, its meter as it was)."""
    filler = Filler(Continuer(workdir=tmp_path / "work"))
    take, message = task_request(lambda: filler.accompany(uploads["melody"], ["PIANO"], None, None, beats="2"),
                                 "accompany")
    assert message.startswith("Done") and "PIANO written for bars 1-16" in take.title, message
    assert "2 beats a bar, as asked" in take.title
    _, message = task_request(lambda: filler.fill(uploads["song"], 1, 2, beats="many"), "fill")
    assert message == "**Cannot fill:** Beats per bar: give a whole number from 1 to 16, or leave it empty, got 'many'"


FULL_SONG = SHARED_DATA / "pop" / "POP909" / "098" / "098.mid"  # MELODY, BRIDGE and PIANO, 45 s
needs_pop = pytest.mark.skipif(not FULL_SONG.is_file(), reason=f"POP909 not found at {FULL_SONG} (CI and dev machines)")


@needs_pop
def test_accompany_on_a_whole_song_writes_a_new_accompaniment_for_its_melody(tmp_path):
    upload = tmp_path / "song.mid"  # as a user uploads it: no beat file beside it
    upload.write_bytes(FULL_SONG.read_bytes())
    filler = Filler(Continuer(workdir=tmp_path / "work"))
    take, message = task_request(lambda: filler.accompany(upload, [], "1", "4"), "accompany")
    assert message.startswith("Done"), message
    # BRIDGE may be marked "(no notes)" where the model left it silent; the song's own parts stay outside bars 1-4
    assert "PIANO written for bars 1-4" in take.title, take.title
    assert "own BRIDGE and PIANO replaced in bars 1-4" in take.title and "kept in its other bars" in take.title
    made, given = Score(str(take.midi)), Score(str(FULL_SONG))
    assert [t.name for t in made.tracks] == ["MELODY", "BRIDGE", "PIANO"]
    melody = [t for t in given.tracks if t.name == "MELODY"][0]
    assert len(made.tracks[0].notes) == len(melody.notes)  # the melody kept note for note
    _, message = task_request(lambda: filler.accompany(upload, ["PIANO"]), "accompany")  # a track ticked: as before
    assert message.startswith("**Cannot accompany:** song.mid: already has a PIANO track")


def test_the_first_click_continues_all_of_the_bundled_motif(tmp_path):
    """The page starts on the bundled motif with `Settings`' defaults: the seed is its 8 bars, not a part of them."""
    cont = Continuer(workdir=tmp_path / "work")
    [result] = cont.continue_file(cont.motif, Settings(length_seconds=2, num_samples=1))
    motif = pretty_midi.PrettyMIDI(str(cont.motif)).instruments[0].notes
    made = [n for i in pretty_midi.PrettyMIDI(str(result.midi)).instruments for n in i.notes]
    seed_part = sorted((round(n.start, 2), n.pitch) for n in made if n.start < motif[-1].end - 0.01)
    assert seed_part == sorted((round(n.start, 2), n.pitch) for n in motif)
