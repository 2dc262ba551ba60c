"""Filling bars of a band's song and accompanying its melody with models that learnt POP909's parts only: a bass
is filled as part of pop's PIANO (its low notes), drums keep their notes, a track named alone changes alone, and an
accompaniment says which of the band's tracks are parts its model never learnt; each said in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from musictx.checkpoints.model_store import load_pretrained
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.midi_io import MidiReadError
from musictx.tasks.registry import task_named

from .test_learnt_parts import band, notes_by_track

GAP = (2, 4)  # bars 3-4, 0-based bar numbers [2, 4)


def fill(midi: Path, out: Path, **more) -> dict:
    """Bars 3-4 of ``midi`` filled by the shipped pop_infill, the copy cache off (the band repeats every 4 bars,
    which the cache would copy back note for note)."""
    opts = GenerateOptions(task="infill", checkpoint="pop_infill", seed_midi=str(midi), bars="3-4", num_samples=1,
                           audio=False, output_dir=str(out), **more)
    return run(opts.with_hook("copy_cache", strength=0.0))


def in_gap(notes):
    return sorted(n for n in notes if GAP[0] <= n[0] < GAP[1])


def test_every_track_of_a_band_filled_plays_its_bass_as_piano_and_keeps_its_drums(tmp_path, capsys):
    """Before, the bass and the drums fell silent in the bars filled (the model never writes program 33 or drums)."""
    seed = band(tmp_path / "band.mid")
    record = fill(seed, tmp_path / "out")
    assert ("the model learnt PIANO, MELODY and BRIDGE only: bass (program 33) as PIANO; kit (drums) keeps its notes "
            "there and gets no new ones") in record["what"]
    assert record["what"] in capsys.readouterr().out
    before, after = notes_by_track(seed), notes_by_track(tmp_path / "out" / "sample_00.mid")
    assert in_gap(after["drums"]) == in_gap(before["drums"])  # the kit's own notes
    bass, piano = in_gap(after["bass"]), in_gap(after["piano"])
    assert bass and piano and in_gap(after["melody"])
    assert max(p for _, p in bass) < min(p for _, p in piano) + 12  # the part's low end
    assert len({t for t, _ in bass}) == len(bass)  # one note at a time, as the band's bass plays
    for name in before:  # outside the gap, every track is the file's own
        assert [n for n in after[name] if not GAP[0] <= n[0] < GAP[1]] == \
               [n for n in before[name] if not GAP[0] <= n[0] < GAP[1]], name


def test_a_bass_filled_alone_changes_alone(tmp_path):
    """tracks=bass: the model redoes the PIANO part it shares with the piano; the bass takes the notes of its
    register and the piano keeps its own, as every other track does."""
    seed = band(tmp_path / "band.mid")
    record = fill(seed, tmp_path / "out", tracks="bass", seed=3)
    assert "piano (program 0) shares its part and keeps its own notes" in record["what"]
    before, after = notes_by_track(seed), notes_by_track(tmp_path / "out" / "sample_00.mid")
    for name in ("melody", "piano", "drums"):
        assert after[name] == before[name], name
    bass = in_gap(after["bass"])
    assert bass and bass != in_gap(before["bass"])
    assert all(p < 50 for _, p in bass)  # nearer the bass's register (29-31) than the piano's


def test_drums_cannot_be_filled_by_a_model_that_never_learnt_them(tmp_path):
    seed = band(tmp_path / "band.mid")
    net, tok = load_pretrained("pop_infill")
    song = task_named("infill").read(tok, seed, learnt=net.learnt_programs)
    with pytest.raises(MidiReadError, match=r"band\.mid.*kit \(drums\): a part the model never learnt"):
        task_named("infill").request(song, *GAP, "kit")


def test_accompanying_a_band_says_which_tracks_are_parts_the_model_never_learnt(tmp_path):
    """The melody with a bass and a kit: BRIDGE and PIANO written; the bass and the kit stay in the file as they
    are and are heard as they are (their pitches are ids the model knows: left out, the accompaniment's pitch
    classes matched the song's less, docs/pop.md), which the line says."""
    seed = band(tmp_path / "band.mid", parts=("melody", "bass", "kit"))
    net, tok = load_pretrained("pop")
    song = task_named("accompany").read(tok, seed, learnt=net.learnt_programs)
    heard = {tok.id_to_token(int(i)) for i in song.ids if tok.type_of[i] == "Program"}
    assert heard == {"Program_80", "Program_33", "Program_-1"}  # the melody, the bass, the drums
    record = run(GenerateOptions(task="accompany", checkpoint="pop", seed_midi=str(seed), num_samples=1, audio=False,
                                 output_dir=str(tmp_path / "out")))
    assert ("; bass (program 33) and kit (drums) are parts the model never learnt (it learnt PIANO, MELODY and "
            "BRIDGE): it hears them and plays with them; they stay as they are") in record["what"]
    before, after = notes_by_track(seed), notes_by_track(tmp_path / "out" / "sample_00.mid")
    for name in before:
        assert after[name] == before[name], name
    assert after["PIANO"]


def test_the_app_s_infill_tab_says_how_it_filled_a_band(tmp_path):
    from musictx.app.core import Continuer
    from musictx.app.infill_tab import Filler
    from musictx.app.messages import task_request

    filler = Filler(Continuer(workdir=tmp_path / "work"))  # no model pinned: pop_infill for the Infill tab
    filler.cont.audio_reason = "off in this test"
    seed = band(tmp_path / "band.mid")
    result, message = task_request(lambda: filler.fill(seed, 3, 4, "bass", repeats=False, seed=3), "fill")
    assert result is not None, message
    assert message.endswith("The model learnt PIANO, MELODY and BRIDGE only: bass (program 33) as PIANO; piano "
                            "(program 0) shares its part and keeps its own notes; the tracks asked for take the "
                            "part's new notes of their register"), message
    after = notes_by_track(result.midi)
    assert after["piano"] == notes_by_track(seed)["piano"]
    # the copy cache on (the tab's default): the bars come back as bars 7-8 play them, and the box to untick is named
    plain = band(tmp_path / "plain.mid", parts=("melody", "piano"))
    result, message = task_request(lambda: filler.fill(plain, 3, 4), "fill")
    assert message.endswith("100% of the notes written are the song's own there: the copy cache plays its bars "
                            "again where they come back (untick \"Let the bars repeat\" for new music)"), message


def test_bars_that_come_back_as_the_song_s_own_notes_say_so(tmp_path, capsys):
    """The band repeats every 4 bars, so the copy cache (on by default) plays bars 3-4 again as bars 7-8 play
    them: the user hears nothing new, and the line says why and what to set."""
    seed = band(tmp_path / "band.mid", parts=("melody", "piano"))
    run(GenerateOptions(task="infill", checkpoint="pop_infill", seed_midi=str(seed), bars="3-4", num_samples=1,
                        audio=False, output_dir=str(tmp_path / "out")))
    assert notes_by_track(tmp_path / "out" / "sample_00.mid") == notes_by_track(seed)
    assert ("; 100% of the notes written are the song's own there: the copy cache plays its bars again where they "
            "come back (hooks.copy_cache.strength=0 for new music)") in capsys.readouterr().out


def high_bass_band(path: Path) -> Path:
    """8 bars: a named melody and a bass line (program 33) between G2 and C4, where a piano's left hand plays."""
    import pretty_midi

    pm = pretty_midi.PrettyMIDI(initial_tempo=110)
    beat = 60 / 110
    melody, bass = pretty_midi.Instrument(73, name="melody"), pretty_midi.Instrument(33, name="bass")
    for bar in range(8):
        root = [55, 52, 53, 50][bar % 4]
        for k in range(4):
            t = (bar * 4 + k) * beat
            melody.notes.append(pretty_midi.Note(90, [72, 74, 76, 79][(bar + k) % 4], t, t + 0.9 * beat))
            bass.notes.append(pretty_midi.Note(90, root + (0, 7, 12, 7)[k] - 7, t, t + 0.9 * beat))
    pm.instruments = [melody, bass]
    pm.write(str(path))
    return path


@pytest.mark.parametrize("floor", [True, False])
def test_an_accompaniment_stays_above_the_band_s_bass(tmp_path, floor):
    """The PIANO written over a given bass line: with the bass floor (on by default) no note under the bass note
    sounding with it; without, the model's left hand goes under it (12 of 96 notes at this seed)."""
    import pretty_midi

    seed = high_bass_band(tmp_path / "band.mid")
    opts = GenerateOptions(task="accompany", checkpoint="pop", seed_midi=str(seed), tracks=["PIANO"], num_samples=1,
                           audio=False, output_dir=str(tmp_path / "out"))
    run(opts.with_hook("bass_floor", enabled=floor))
    made = {i.name: i.notes for i in pretty_midi.PrettyMIDI(str(tmp_path / "out" / "sample_00.mid")).instruments}
    under = [n for n in made["PIANO"] if any(b.start <= n.start + 1e-3 < b.end and n.pitch < b.pitch
                                             for b in made["bass"])]
    assert len(made["PIANO"]) > 50
    assert (len(under) == 0) if floor else (len(under) >= 5), [(n.start, n.pitch) for n in under]
