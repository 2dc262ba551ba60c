"""Accompaniment by playing the given tracks into a plain continuation (scheme "lead",
musictx.decoding.hooks.given_notes), with the shipped pop model: the melody goes into the stream note for note at
its own positions, the model never writes melody notes of its own, the harmony lean moves the new tracks
toward the melody's pitch classes, and ``musictx-generate task=accompany`` works with ``pop`` itself."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from symusic import Note, Score

from musictx.checkpoints.model_store import load_pretrained
from musictx.decoding import reference_steps
from musictx.decoding.hooks.given_notes import given_onsets
from musictx.decoding.hooks.repeat_echo import repeat_plan
from musictx.decoding.sampling import _Drawer
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.score_prep import ROLE_PROGRAMS
from musictx.paths import BUNDLED_MOTIF
from musictx.tasks.accompany import (
    Accompaniment,
    accompany_song,
    accompany_songs,
    bar_positions,
    given_harmony,
    given_sounding,
    lead_ids,
    led_prompt,
    melody_keys,
)
from musictx.tasks.song_bars import melody_song, parse_bars

from .metrical_fixtures import band_song
from .test_metrical import POP, needs_pop

MELODY = ROLE_PROGRAMS["MELODY"]


@pytest.fixture(name="pop", scope="module")
def fixture_pop():
    torch.set_num_threads(1)
    net, tok = load_pretrained("pop")
    return net.eval(), tok


def melody_alone(src, out):
    """The melody track of ``src`` alone at ``out``, beside a copy of its POP909 beat file if it has one."""
    score = Score(str(src))
    score.tracks = [t for t in score.tracks if t.name.upper() in ("MELODY", "")] or score.tracks[:1]
    score.dump_midi(str(out))
    beats = Path(src).with_name("beat_midi.txt")
    if beats.is_file():
        shutil.copy(beats, Path(out).with_name("beat_midi.txt"))
    return out


def bars_of(tok, ids: np.ndarray) -> list[np.ndarray]:
    at = list(np.flatnonzero(ids == tok.bar_id)) + [len(ids)]
    return [ids[a:b] for a, b in zip(at[:-1], at[1:], strict=True)]


@pytest.mark.parametrize("harmony", [0.0, 3.0])
def test_the_melody_goes_into_the_stream_note_for_note(pop, tmp_path, harmony):
    """With no lean at all, and with the lean toward the melody's pitch classes."""
    net, tok = pop
    song = melody_song(tok, melody_alone(band_song(tmp_path / "s.mid", bars=10, seed=3), tmp_path / "m.mid"))
    s, e = parse_bars("3-8", song)
    lean = {"harmony_lean": {"strength": harmony, "guess": 0.0}}
    new = lead_ids(net, tok, song, ["PIANO"], s, e, SamplingOptions(seed=1, hooks=lean))[0]
    bars = bars_of(tok, np.concatenate([[tok.bar_id], new]))
    assert len(bars) == e - s
    for k, bar in enumerate(bars):  # each bar's melody: the given tokens at the given positions
        assert given_onsets(tok, bar, {MELODY}) == given_onsets(tok, song.bar_ids(s + k), {MELODY})
    programs = {tok.id_to_token(int(i)) for i in new if tok.type_of[int(i)] == "Program"}
    assert programs == {f"Program_{MELODY}", "Program_0"}  # the melody's (played in) and the piano written
    n_melody = sum(len(given_onsets(tok, song.bar_ids(b), {MELODY})) for b in range(s, e))
    played = sum(len(given_onsets(tok, bar, {MELODY})) for bar in bars)
    assert played == n_melody > 0


def test_the_melodys_ids_are_written_without_asking_the_net(pop, tmp_path, monkeypatch):
    """Each given note's ids are the only ones left (`GivenNotes.only_choice`): written without a draw and fed to the
    net with the next id. The accompaniment is the one of the general forward, which asks the net after every id."""
    net, tok = pop
    song = melody_song(tok, melody_alone(band_song(tmp_path / "s.mid", bars=8, seed=4), tmp_path / "m.mid"))
    s, e = parse_bars("3-6", song)
    skipped, skip = [], _Drawer.skip
    monkeypatch.setattr(_Drawer, "skip", lambda self, shape: skipped.append(shape) or skip(self, shape))
    fast = lead_ids(net, tok, song, ["PIANO"], s, e, SamplingOptions(seed=2))[0]
    folded = len(skipped)
    with reference_steps():
        general = lead_ids(net, tok, song, ["PIANO"], s, e, SamplingOptions(seed=2))[0]
    given = sum(len(notes) for b in range(s, e) for _, notes in given_onsets(tok, song.bar_ids(b), {MELODY}))
    assert np.array_equal(fast, general) and len(skipped) == folded  # the general forward folds nothing
    assert given <= folded <= given + (e - s)  # every given id, and the guard's TimeSig after each new Bar


@needs_pop
def test_the_harmony_lean_moves_the_new_tracks_to_the_melody_pitch_classes(pop, tmp_path):
    net, tok = pop
    song = melody_song(tok, melody_alone(POP / "003" / "003.mid", tmp_path / "003.mid"))
    s, e = 16, 24
    given = {MELODY}
    halves, lengths = given_harmony(song, given, s, e), bar_positions(tok, song, s, e)

    def share(harmony: float) -> float:
        hits = total = 0
        for seed in (0, 1):
            lean = {"harmony_lean": {"strength": harmony, "guess": 0.0}}  # the melody's own pitch classes
            opts = SamplingOptions(seed=seed, hooks=lean)
            new = lead_ids(net, tok, song, ["BRIDGE", "PIANO"], s, e, opts)[0]
            for k, bar in enumerate(bars_of(tok, np.concatenate([[tok.bar_id], new]))):
                for pos, ids in given_onsets(tok, bar, {0, ROLE_PROGRAMS["BRIDGE"]}):
                    sounding = halves[k][int(pos * 2 >= lengths[k])]
                    pitches = [int(tok.id_to_token(i).split("_")[1]) for i in ids if tok.type_of[i] == "Pitch"]
                    hits += sum(p % 12 in sounding for p in pitches) if sounding else 0
                    total += len(pitches) if sounding else 0
        return hits / max(total, 1)

    off, on = share(0.0), share(4.0)
    assert on > off + 0.1, (off, on)


def test_accompany_runs_with_the_shipped_pop_model_and_keeps_the_melody(pop, tmp_path):
    from musictx.generation.continue_midi import run
    from musictx.generation.generate_options import GenerateOptions

    path = melody_alone(band_song(tmp_path / "s.mid", bars=6, bpm=96, beats_per_bar=4, seed=2), tmp_path / "m.mid")
    record = run(GenerateOptions(checkpoint="pop", seed_midi=str(path), task="accompany", num_samples=1,
                                 audio=False, output_dir=str(tmp_path / "out")))
    sample = record["samples"][0]
    out = Score(str(tmp_path / "out" / sample["midi"]))
    # a track the model left silent is not in the file (MIDI keeps no empty track), and the record says so
    written = [r for r in ("BRIDGE", "PIANO") if r not in sample["silent_tracks"]]
    assert [t.name for t in out.tracks] == ["Melody", *written]
    assert set(sample["tracks"]) | set(sample["silent_tracks"]) == {"Melody", "BRIDGE", "PIANO"}
    given = Score(str(path)).tracks[0].notes.numpy()
    kept = out.tracks[0].notes.numpy()
    assert all(np.array_equal(given[k], kept[k]) for k in ("time", "duration", "pitch", "velocity"))
    assert sum(len(t.notes) for t in out.tracks[1:]) > 0


def test_an_unknown_scheme_is_refused(pop, tmp_path):
    net, tok = pop
    song = melody_song(tok, melody_alone(band_song(tmp_path / "s.mid", bars=4), tmp_path / "m.mid"))
    with pytest.raises(ValueError, match="accompany scheme 'fim': give one of lead, infill"):
        accompany_song(net, tok, song, ["PIANO"], 0, 2, SamplingOptions(), scheme="fim")


def test_counter_rest_takes_points_off_the_bridge_only_where_the_melody_sounds(pop):
    from musictx.decoding.hooks.given_notes import CounterRest, GivenNotes, sounding_positions

    _, tok = pop
    bridge = ROLE_PROGRAMS["BRIDGE"]
    # one 16-position bar (ticks 0..1600): a melody note sounds over positions 0-7, then the melody rests
    sounding = sounding_positions(np.array([0]), np.array([800]), np.array([0, 1600]), [16])
    assert [s.tolist() for s in sounding] == [[True] * 8 + [False] * 8]
    given = GivenNotes(tok, [[]], {MELODY})
    given.start(torch.tensor([[tok.bar_id]]))
    rest = CounterRest(tok, given, sounding, bridge, 4.0)
    logits = torch.zeros(1, tok.vocab_size)
    bridge_id, piano_id = tok.vocab[f"Program_{bridge}"], tok.vocab["Program_0"]
    assert torch.equal(rest(logits), logits)  # no Position yet in the bar
    for pos, penalised in ((4, True), (10, False)):
        given.update(torch.tensor([tok.vocab[f"Position_{pos}"]]))
        out = rest(logits)
        assert out[0, bridge_id].item() == (-4.0 if penalised else 0.0)
        assert out[0, piano_id].item() == 0.0  # the piano plays under the melody: untouched
    assert logits.abs().sum() == 0  # the caller's logits are not changed in place


def test_the_harmony_lean_is_stronger_on_the_strong_beats(pop):
    """A 16-position bar guessed to hold C (weight 1) and G (weight 0.5): after the piano's Program, a C gets
    ``strong`` at positions 0 and 8 (the bar's first beat and its middle) and ``strength`` elsewhere; a G
    half of each; a D nothing."""
    from musictx.decoding.hooks.given_notes import GivenNotes, HarmonyLean

    _, tok = pop
    weights = np.zeros(12)
    weights[[0, 7]] = 1.0, 0.5
    given = GivenNotes(tok, [[]], {MELODY})
    given.start(torch.tensor([[tok.bar_id]]))
    lean = HarmonyLean(tok, given, [(weights, weights)], [16], strength=5.0, strong=10.0)
    logits = torch.zeros(1, tok.vocab_size)
    c, g, d = (tok.vocab[f"Pitch_{p}"] for p in (60, 67, 62))
    for pos, bonus in ((0, 10.0), (4, 5.0), (8, 10.0), (12, 5.0)):
        given.update(torch.tensor([tok.vocab[f"Position_{pos}"]]))
        given.update(torch.tensor([tok.vocab["Program_0"]]))
        out = lean(logits)[0]
        assert (out[c].item(), out[g].item(), out[d].item()) == (bonus, bonus / 2, 0.0), pos
    same = HarmonyLean(tok, given, [(weights, weights)], [16], strength=5.0)  # strong: None, the same bonus
    assert same(logits)[0, c].item() == 5.0
    assert logits.abs().sum() == 0  # the caller's logits are not changed in place


@needs_pop
def test_counter_rest_keeps_the_bridge_to_the_melodys_rests(pop, tmp_path):
    """POP909 song 003's melody (a training song: a behaviour check, not a score), bars 17-24, 2 seeds: the
    bridge's onsets under a sounding melody note, with the counter rest off and on."""
    net, tok = pop
    song = melody_song(tok, melody_alone(POP / "003" / "003.mid", tmp_path / "003.mid"))
    s, e = 16, 24
    bridge = ROLE_PROGRAMS["BRIDGE"]

    sounding = given_sounding(song, {MELODY}, s, e, bar_positions(tok, song, s, e))

    def bridge_onsets(penalty: float) -> tuple[int, int]:
        under = total = 0
        for seed in (0, 1):
            sampling = SamplingOptions(seed=seed, hooks={"counter_rest": {"strength": penalty}})
            new = lead_ids(net, tok, song, ["BRIDGE", "PIANO"], s, e, sampling)[0]
            for k, bar in enumerate(bars_of(tok, np.concatenate([[tok.bar_id], new]))):
                for pos, _ in given_onsets(tok, bar, {bridge}):
                    total += 1
                    under += bool(sounding[k][min(pos, len(sounding[k]) - 1)])
        return under, total

    off, on = bridge_onsets(0.0), bridge_onsets(4.0)
    assert on[0] < off[0] / 2, (off, on)


def test_given_chords_lead_the_accompaniment(pop, tmp_path):
    """A lead sheet's chords (a lab file) lead the harmony lean: over a C-major melody, chords of F# major
    make the new tracks play F#-major pitch classes far more often than the melody alone does."""
    from musictx.io.chord_labels import Chords

    path = melody_alone(band_song(tmp_path / "s.mid", bars=8, bpm=100, beats_per_bar=4, seed=4), tmp_path / "m.mid")
    tok = pop[1]
    song = melody_song(tok, path)
    lab = tmp_path / "sheet.lab"
    lab.write_text(f"0.0 {song.line_seconds([song.n_bars])[0] + 1:.3f} F#:maj\n")
    f_sharp = {6, 10, 1}

    def share(chords) -> float:
        new = lead_ids(pop[0], tok, song, ["PIANO"], 0, song.n_bars, SamplingOptions(seed=0), chords=chords)[0]
        written = [int(tok.id_to_token(i).split("_")[1]) for _, ids in given_onsets(tok, new, {0})
                   for i in ids if tok.type_of[i] == "Pitch"]  # the piano's pitches
        assert written, "the piano wrote nothing"
        return float(np.mean([p % 12 in f_sharp for p in written]))

    assert share(Chords.read(lab)) > share(None) + 0.3


def test_chords_with_another_task_or_a_bad_file_are_refused_in_one_line(tmp_path):
    from musictx.decoding.errors import GenerateError
    from musictx.generation.generate_options import GenerateOptions, check_task
    from musictx.io.chord_labels import ChordFileError, Chords

    with pytest.raises(GenerateError, match="chords= is not for task=infill"):
        check_task(GenerateOptions(seed_midi="x.mid", task="infill", bars="1-2", chords="a.lab"))
    with pytest.raises(GenerateError, match="chords=.*nope.lab: no such file"):
        check_task(GenerateOptions(seed_midi="x.mid", task="accompany", chords=str(tmp_path / "nope.lab")))
    bad = tmp_path / "bad.lab"
    bad.write_text("0 2 C:maj\n2 4 Cmaj7\n")
    with pytest.raises(ChordFileError, match=r"chords=.*bad.lab, line 2: unknown chord 'Cmaj7'"):
        Chords.read_option(str(bad))


def test_repeat_plan_points_each_repeat_at_its_latest_earlier_bar():
    assert repeat_plan(["a", "b", None, "a", "b", "a", None, "c"]) == {3: 0, 4: 1, 5: 3}
    assert repeat_plan([None, None]) == {}


def test_a_repeated_melody_gets_its_accompaniment_again(pop, tmp_path):
    """Eight bars of one two-bar melody: with a strong repeat echo the piano of bars 3-8 plays what it played
    the first time the melody went so, more than without it (which repeats itself a good deal already)."""
    net, tok = pop
    path = melody_alone(band_song(tmp_path / "s.mid", bars=2, bpm=100, beats_per_bar=4, seed=5), tmp_path / "m.mid")
    two = Score(str(path))
    phrase = [(n.time, n.duration, n.pitch, n.velocity) for n in two.tracks[0].notes]
    for r in range(1, 4):  # the two bars three more times
        for t, d, p, v in phrase:
            two.tracks[0].notes.append(Note(t + r * 8 * two.ticks_per_quarter, d, p, v))
    two.dump_midi(str(tmp_path / "loop.mid"))
    song = melody_song(tok, tmp_path / "loop.mid")
    assert repeat_plan(melody_keys(tok, song, {MELODY}, 0, 8)) == {k: k - 2 for k in range(2, 8)}

    def shared(strength: float) -> float:
        shares = []
        for seed in (0, 1, 2):
            opts = SamplingOptions(seed=seed, hooks={"repeat_echo": {"strength": strength}})
            new = lead_ids(net, tok, song, ["PIANO"], 0, 8, opts)[0]
            bars = [[int(i) for i in given_onsets(tok, bar, {0}) for i in i[1]]
                    for bar in bars_of(tok, np.concatenate([[tok.bar_id], new]))]
            for k in range(2, 8):
                a, b = Counter(bars[k]), Counter(bars[k - 2])
                shares.append(sum((a & b).values()) / max(sum(a.values()), sum(b.values()), 1))
        return float(np.mean(shares))
    off, on = shared(0.0), shared(6.0)
    # measured: the H100's pop from a prompt of the first Bar alone (a tune alone), 0.72 -> 0.78 (seeds 3-5:
    # 0.70 -> 0.78); after the melody's preview it repeated itself less, 0.28 -> 0.45
    assert on > off + 0.04 and on > 0.7, (off, on)


def motif_melody(out: Path) -> Path:
    """The bundled motif's top line (its notes from G3 up) as a MELODY track: a tune from its first bar."""
    score = Score(str(BUNDLED_MOTIF))
    track = score.tracks[0]
    track.notes = [n for n in track.notes if n.pitch >= 55]
    track.name, track.program = "MELODY", MELODY
    score.dump_midi(str(out))
    return out


def test_a_tune_from_its_first_bar_is_accompanied_in_every_bar(pop, tmp_path):
    """The melody alone: the prompt is the first Bar alone, with no preview. After the melody heard alone the model
    went on alone (3-15 notes in these 8 bars, where POP909's accompaniments play ~100); bars before that hold
    another track (a given piano) are still the prompt, the preview after them."""
    net, tok = pop
    song = melody_song(tok, motif_melody(tmp_path / "tune.mid"))
    prompt = led_prompt(net, tok, song, ["BRIDGE", "PIANO"], 0, song.n_bars, SamplingOptions())
    assert prompt.ids.tolist() == [[tok.bar_id]]
    written, _ = accompany_song(net, tok, song, ["BRIDGE", "PIANO"], 0, song.n_bars, SamplingOptions(seed=0))
    notes = [n for t in written.tracks if t.name != "MELODY" for n in t.notes]
    assert len(notes) >= 3 * song.n_bars, len(notes)
    band = melody_song(tok, band_song(tmp_path / "band.mid", bars=6, bpm=96, beats_per_bar=4, seed=2))
    assert len(led_prompt(net, tok, band, ["BRIDGE"], 2, 6, SamplingOptions()).ids[0]) > band.end_of(2)


@needs_pop
def test_an_accompaniments_piano_plays_as_busily_as_pop909s_under_a_melody_this_busy(pop, tmp_path):
    """The density lean's typical PIANO (`Accompaniment.typical_density`): in bars where the model's own habit is
    too busy (066: 1.27x) or too sparse (548: 0.55x) it comes within 15% of POP909's piano for the melody."""
    net, tok = pop
    for name, s in (("066", 11), ("548", 10)):
        song = melody_song(tok, melody_alone(POP / name / f"{name}.mid", tmp_path / f"{name}.mid"))
        target = Accompaniment(tok, song, {MELODY}, {ROLE_PROGRAMS["PIANO"]}, s, s + 8, None).typical_density()
        got = {}
        for typical in (True, False):
            opts = SamplingOptions(seed=0, hooks={"density": {"typical": typical}})
            out, _ = accompany_song(net, tok, song, ["PIANO"], s, s + 8, opts)
            a, z = song.lines[s], song.lines[s + 8]
            got[typical] = sum(a <= n.time < z for t in out.tracks if t.name != "MELODY" for n in t.notes) / 8
        piano = target[ROLE_PROGRAMS["PIANO"]]
        assert abs(got[True] / piano - 1) < 0.15 < abs(got[False] / piano - 1), (name, piano, got)


def test_the_typical_piano_follows_the_melodys_notes_and_leaves_a_given_piano_alone(pop, tmp_path):
    """Half the melody's notes: 2^-0.505 (0.70x) the piano's (the fit's slope); a piano given, or a melody of
    under 8 notes in the bars, asks nothing."""
    _, tok = pop
    full = motif_melody(tmp_path / "full.mid")
    score = Score(str(full))
    score.tracks[0].notes = score.tracks[0].notes[::2]
    score.dump_midi(str(tmp_path / "half.mid"))
    piano, bridge = ROLE_PROGRAMS["PIANO"], ROLE_PROGRAMS["BRIDGE"]
    typical = {}
    for name in ("full", "half"):
        song = melody_song(tok, tmp_path / f"{name}.mid")
        typical[name] = Accompaniment(tok, song, {MELODY}, {piano, bridge}, 0, song.n_bars, None).typical_density()
        assert list(typical[name]) == [piano]  # BRIDGE is left to the model and the counter rest
        assert Accompaniment(tok, song, {MELODY, piano}, {bridge}, 0, song.n_bars, None).typical_density() == {}
        assert Accompaniment(tok, song, {MELODY}, {piano}, 0, 1, None).typical_density() == {}  # 1 bar: too few
    assert typical["half"][piano] / typical["full"][piano] == pytest.approx(0.70, abs=0.05)


def test_the_bundled_motif_gets_a_piano_in_every_sample(pop):
    """The motif is one track, bass and all, read as the melody; 1 sample in 4-6 wrote under 10 notes in its 8
    bars (6 samples of seed 0: PIANO 244, 75, none, 126, 147, 247) until the typical PIANO (117-121)."""
    net, tok = pop
    song = melody_song(tok, BUNDLED_MOTIF)
    takes = accompany_songs(net, tok, song, ["BRIDGE", "PIANO"], 0, song.n_bars, SamplingOptions(seed=0), samples=6)
    target = Accompaniment(tok, song, {MELODY}, {ROLE_PROGRAMS["PIANO"]}, 0, song.n_bars, None).typical_density()
    per_bar = [sum(len(t.notes) for t in score.tracks if t.name == "PIANO") / song.n_bars
               for score, _ in takes]
    assert all(abs(n / target[ROLE_PROGRAMS["PIANO"]] - 1) < 0.25 for n in per_bar), (per_bar, target)


def test_a_whole_song_accompanied_anew_keeps_its_bars_after_the_melodys_last(pop, tmp_path):
    """A song whose piano plays on after the last sung note: accompanied anew, its melody alone still has every bar of
    the song (the outro's empty bars, its meter kept), so the new accompaniment runs to the song's end, where the
    melody's own bars cut the song there, and bars= takes the outro's bars."""
    import pretty_midi

    _, tok = pop
    path = band_song(tmp_path / "song.mid", bars=8, beats_per_bar=4, names=("MELODY", "PIANO"))
    pm = pretty_midi.PrettyMIDI(str(path))
    melody, piano = pm.instruments
    bar_seconds = 4 * 60.0 / 100.0
    melody.notes = [n for n in melody.notes if n.start < 4 * bar_seconds]  # sung in bars 1-4 only
    bridge = pretty_midi.Instrument(0, name="BRIDGE")
    bridge.notes = [pretty_midi.Note(80, 76, 0.0, 1.0)]
    pm.instruments.append(bridge)
    pm.write(str(path))
    song, as_given = melody_song(tok, path, anew=True), melody_song(tok, path)
    assert set(song.left_out) == {"PIANO", "BRIDGE"}
    assert song.n_bars == as_given.n_bars == 8 and len(song.lines) == len(as_given.lines)
    sung = bars_of(tok, song.ids)
    assert all(len(bar) > 2 for bar in sung[:4]) and all(list(bar) == list(sung[4]) for bar in sung[4:])
    assert [tok.id_to_token(int(i)) for i in sung[-1]] == ["Bar_None", "TimeSig_4/4"]
    assert parse_bars("7-8", song) == (6, 8)
