"""Harmony in the tokens (musictx/io/chord_tokens.py): a Chord event at each bar line and chord change, read
from the chord file beside a song, invisible to decoding, kept by the prep and allowed by the grammar."""

from __future__ import annotations

import numpy as np
import torch
from symusic import Note, Score, Tempo, TimeSignature, Track

from data_prep.options import prep_options
from data_prep.prepare import write_dataset
from musictx.decoding.hooks.metrical_guard import RemiGuard
from musictx.io.chord_labels import Chords
from musictx.io.chord_tokens import CHORD_TOKENS, chord_token
from musictx.io.metrical_tokenizer import MetricalTokenizer
from musictx.io.token_store import TokenArrays
from musictx.tasks.metrical_seeds import bar_lines, ticks_to_seconds
from tests.helpers import SHARED_DATA, needs_shared, started_on_bars, step

TOK = MetricalTokenizer(chords=True)


def test_labels_fall_into_eight_families_a_root():
    assert chord_token("C:maj6") == chord_token("C") == "Chord_C:maj"
    assert chord_token("Eb:sus2") == chord_token("D#:sus4(b7)") == "Chord_D#:sus"
    assert chord_token("B:hdim7") == chord_token("B:dim7") == "Chord_B:dim"
    assert chord_token("A:minmaj7") == "Chord_A:min" and chord_token("G:7") == "Chord_G:7"
    assert chord_token("N") == chord_token("Cmaj7") == "Chord_N"  # no chord, and a label it does not know
    assert len(CHORD_TOKENS) == 1 + 12 * 8 and TOK.vocab_size == MetricalTokenizer().vocab_size + len(CHORD_TOKENS)


def _song(folder, chords: str):
    """Two bars of 4/4 at 120 bpm (a beat is 0.5 s): bar 1 strikes beats 1, 2 and 4, bar 2 beat 1; the chord
    file ``chords`` beside it."""
    score = Score(480)
    score.tempos.append(Tempo(0, 120.0))
    score.time_signatures.append(TimeSignature(0, 4, 4))
    track = Track("piano", 0, False)
    for beat, pitch in ((0, 60), (1, 64), (3, 67), (4, 57)):
        track.notes.append(Note(beat * 480, 400, pitch, 80))
    score.tracks.append(track)
    folder.mkdir(parents=True, exist_ok=True)
    score.dump_midi(str(folder / "song.mid"))
    (folder / "chord_midi.txt").write_text(chords)
    return folder / "song.mid"


def test_each_bar_line_and_chord_change_gets_its_event_after_its_position(tmp_path):
    # C for beats 1-2, C6 (the same family: no new event) to beat 3, G7 from beat 3, where nothing is struck
    path = _song(tmp_path / "a", "0.0 0.5 C:maj\n0.5 1.0 C:maj6\n1.0 2.0 G:7\n2.0 4.0 A:min7\n")
    tokens = [TOK.id_to_token(int(i)) for i in TOK.encode(path)]
    chords = [(k, t) for k, t in enumerate(tokens) if t.startswith("Chord_")]
    assert [t for _, t in chords] == ["Chord_C:maj", "Chord_G:7", "Chord_A:min7"]
    assert [tokens[k - 1] for k, _ in chords] == ["Position_0", "Position_8", "Position_0"]
    # G7 at beat 3 of bar 1 got a Position of its own, between beat 2's notes and beat 4's
    at = tokens.index("Chord_G:7")
    assert tokens[at - 2].startswith("Duration_") and tokens[at + 1] == "Position_12"
    assert tokens.count("Position_8") == 1
    # the events carry no notes: decoded, the song is the one without them
    plain = MetricalTokenizer()
    notes = [sorted((n.time, n.pitch) for t in s.tracks for n in t.notes)
             for s in (TOK.decode_score(TOK.encode(path)), plain.decode_score(plain.encode(path)))]
    assert notes[0] == notes[1] and len(notes[0]) == 4
    assert MetricalTokenizer.from_dict(TOK.to_dict()) == TOK


def test_a_transposed_song_has_its_chords_transposed(tmp_path):
    ids = TOK.encode(_song(tmp_path / "t", "0.0 1.0 C:maj\n1.0 4.0 B:min7\n"))
    up = [TOK.id_to_token(int(i)) for i in TOK.transpose_ids(ids, 2) if TOK.type_of[i] == "Chord"]
    assert up == ["Chord_D:maj", "Chord_C#:min7", "Chord_C#:min7"]
    down = TOK.transpose_ids(TOK.transpose_ids(ids, 5), -5)
    assert (down == ids).all()


def test_with_chords_off_the_ids_are_the_plain_ones_and_without_a_chord_file_they_are_guessed(tmp_path):
    path = _song(tmp_path / "b", "0.0 4.0 D:min\n")
    plain = MetricalTokenizer().encode(path)
    assert (MetricalTokenizer(chords=False).encode(path) == plain).all()
    (tmp_path / "b" / "chord_midi.txt").unlink()
    # a chord a half bar from the notes sounding there: C and E (C major), then G alone (a root of its own
    # weighs a little more: G major), then A alone, then nothing (no chord)
    guessed = [TOK.id_to_token(int(i)) for i in TOK.encode(path) if TOK.type_of[i] == "Chord"]
    assert guessed == ["Chord_C:maj", "Chord_G:maj", "Chord_A:maj", "Chord_N"]


def test_the_grammar_lets_a_chord_follow_a_position_and_the_notes_follow_it():
    guard = RemiGuard(TOK, programs=[0])
    allowed = guard.allowed[guard._type_index["Position"]]
    assert allowed[TOK.vocab["Chord_A:min"]] and allowed[TOK.vocab["Program_0"]]
    after = guard.allowed[guard._type_index["Chord"]]
    assert after[TOK.vocab["Program_0"]] and after[TOK.vocab["Position_4"]] and after[TOK.bar_id]
    assert not after[TOK.vocab["Pitch_60"]] and not after[TOK.vocab["Chord_C:maj"]]
    assert not guard.allowed[guard._type_index["Bar"]][TOK.vocab["Chord_C:maj"]]  # after Bar comes the meter
    # in a run: a bar of the seed, then the sampler at a Position of the new bar
    started_on_bars(guard, TOK, [["Bar_None", "TimeSig_4/4", "Position_0", "Chord_C:maj", "Program_0", "Pitch_60",
                                  "Velocity_63", "Duration_1.0.4"]])
    step(guard, TOK, "TimeSig_4/4", "Position_4")
    logits = guard(torch.zeros(1, TOK.vocab_size))[0]
    assert logits[TOK.vocab["Chord_G:7"]] == 0 and logits[TOK.vocab["Pitch_60"]] == float("-inf")
    step(guard, TOK, "Chord_G:7")
    logits = guard(torch.zeros(1, TOK.vocab_size))[0]
    assert logits[TOK.vocab["Program_0"]] == 0 and logits[TOK.vocab["Position_8"]] == 0
    assert logits[TOK.vocab["Position_4"]] == float("-inf")  # positions still only move on


def test_the_prep_writes_the_chord_file_of_each_song_and_of_its_versions(tmp_path):
    from tests.test_pop_versions import _song_folder

    for n in range(1, 7):
        _song_folder(tmp_path / "pop", n)
        (tmp_path / "pop" / f"{n:03d}" / "chord_midi.txt").write_text("0.0 8.0 C:maj\n8.0 40.0 F:maj7\n")
    opts = prep_options(output_dir=str(tmp_path / "data"), source="folder", input_dir=str(tmp_path / "pop"),
                        tokenizer="remi", num_workers=0, pop_versions="train", allow_empty=True,
                        split={"validation": 0.0, "test": 0.0, "group_by": "file"})
    opts.tokenizer["chords"] = True  # musictx-prep tokenizer=remi tokenizer.chords=true
    done = write_dataset(opts, progress=False)
    train = TokenArrays(done.out_dir, "train")
    chords = {name: [TOK.id_to_token(int(i)) for i in train.piece(k) if TOK.type_of[i] == "Chord"]
              for k, name in enumerate(train.files)}
    versions = [name for name in chords if "versions" in name]
    assert versions and len(chords) > len(versions)
    for name, seen in chords.items():
        # bars of 2 s from the first downbeat at 0.5 s: the pickup bar (-1.5 s) opens with no chord and C comes
        # in at 0 s inside it, then the bar lines at 0.5, 2.5, 4.5 and 6.5 s are C's, F comes in at 8 s inside
        # the fifth bar and holds every bar line after it
        assert seen[:7] == ["Chord_N"] + ["Chord_C:maj"] * 5 + ["Chord_F:maj7"], name
        assert set(seen[7:]) == {"Chord_F:maj7"}, name
    for name in versions:  # a version keeps its song's quarter notes: the main file's chords on its bars
        assert chords[name] == chords[f"{name[:3]}/{name[:3]}.mid"], name


@needs_shared
def test_a_pop909_song_has_its_annotated_chord_at_every_bar_line():
    path = SHARED_DATA / "pop" / "POP909" / "003" / "003.mid"
    read = TOK.read(path)
    ids = TOK.encode_read(read, path)
    tokens = [TOK.id_to_token(int(i)) for i in ids]
    bars = [k for k, t in enumerate(tokens) if t == "Bar_None"]
    firsts = [next(t for t in tokens[k:] if t.startswith("Chord_")) for k in bars]
    assert all(tokens[k + 2:k + 4][1].startswith("Chord_") for k in bars)  # Bar TimeSig Position_0 Chord
    # each bar's chord is the file's at that bar line, read on the file's own clock
    chords = Chords.read(path.with_name("chord_midi.txt"), strict=False)
    lines = ticks_to_seconds(read.score, bar_lines(read.score)) - ticks_to_seconds(
        read.score, np.array([read.shift_ticks]))[0]
    expected = []
    for t in lines[:len(bars)]:
        k = int(np.searchsorted(chords.starts, t + 0.01, side="right")) - 1
        expected.append(chord_token(chords.labels[k]) if k >= 0 and t < chords.ends[k] else "Chord_N")
    agree = np.mean([a == b for a, b in zip(firsts, expected, strict=True)])
    assert agree > 0.95, agree
    # without the events, and the Positions put in for them (a Position before another, or a Bar), the ids
    # are the plain tokenizer's
    rest = [t for t in tokens if not t.startswith("Chord_")]
    rest = [t for k, t in enumerate(rest) if not (t.startswith("Position_") and (
        k + 1 == len(rest) or rest[k + 1].startswith(("Position_", "Bar_"))))]
    plain = MetricalTokenizer()
    assert rest == [plain.id_to_token(int(i)) for i in plain.encode(path)]


def _forced(hook) -> set[str]:
    """The ids ``hook`` leaves drawable from flat logits."""
    out = hook(torch.zeros(1, TOK.vocab_size))[0]
    return {TOK.id_to_token(int(i)) for i in torch.nonzero(out == 0).flatten()}


def test_a_lead_sheet_is_written_as_the_new_bars_chord_events(tmp_path):
    from musictx.decoding.hooks.chord_events import LeadSheetChords

    lab = tmp_path / "sheet.lab"
    lab.write_text("0 1 C:maj\n1 2 A:min\n2 3 A:min\n3 4 F:maj7\n")  # bars of 2 s: C then Am, Am then F
    hook = started_on_bars(LeadSheetChords(TOK, Chords.read(lab), np.array([0.0, 2.0, 4.0])), TOK,
                           [["Bar_None", "TimeSig_4/4", "Position_0", "Chord_G:7", "Program_0", "Pitch_55",
                             "Velocity_63", "Duration_4.0.2"]])
    step(hook, TOK, "TimeSig_4/4")
    assert _forced(hook) == {"Position_0"}  # every bar opens Position_0 and its chord, an empty one too
    step(hook, TOK, "Position_0")
    assert _forced(hook) == {"Chord_C:maj"}  # a bar opens with the sheet's chord
    step(hook, TOK, "Chord_C:maj", "Program_0", "Pitch_60", "Velocity_63", "Duration_1.0.4", "Position_4")
    assert not any(t.startswith("Chord_") for t in _forced(hook)) and "Program_0" in _forced(hook)  # still C
    step(hook, TOK, "Program_0", "Pitch_64", "Velocity_63", "Duration_1.0.4", "Position_8")
    assert _forced(hook) == {"Chord_A:min"}  # the sheet changes chord at the half bar
    step(hook, TOK, "Chord_A:min", "Program_0", "Pitch_69", "Velocity_63", "Duration_2.0.4", "Bar_None",
         "TimeSig_4/4", "Position_0")
    assert _forced(hook) == {"Chord_A:min"}  # the next bar opens with its chord again, the same one
    step(hook, TOK, "Chord_A:min", "Program_0", "Pitch_57", "Velocity_63", "Duration_4.0.2", "Bar_None",
         "TimeSig_4/4")
    assert len(_forced(hook)) > 1  # past the bars the lines cover: the model's own


def test_a_chord_model_continues_under_a_lead_sheet_end_to_end(tmp_path):
    """A tiny model with chord events, trained for a few steps, continues a song under a lead sheet through
    ``musictx-generate``'s own run: the new bars' chord events are the sheet's."""
    from musictx.decoding.sampling_options import SamplingOptions
    from musictx.models.transformer import MusicTransformer
    from musictx.tasks.continue_metrical import bars_prompt
    from musictx.tasks.metrical_seeds import metrical_seed
    from musictx.tasks.prompt import sample

    path = _song(tmp_path / "s", "0.0 2.0 C:maj\n2.0 4.0 A:min\n")
    sheet = tmp_path / "sheet.lab"
    sheet.write_text("0 5 D:min\n5 6 G:7\n6 30 C:maj\n")  # the seed's bars are 0-4 s; new bars 4-6, 6-8 ...
    torch.manual_seed(0)
    net = MusicTransformer(vocab_size=TOK.vocab_size, d_model=32, n_layers=1, n_heads=2, d_ff=64,
                           max_seq_len=256).eval()
    seed = metrical_seed(TOK, path)
    prompt = bars_prompt(net, TOK, seed, SamplingOptions(seed=3), num_samples=2, bars=3,
                         chords=Chords.read(sheet))
    prompt.hooks.new_bar_lines_s = np.array([4.0, 6.0, 8.0, 10.0])
    ids = sample(net, prompt)[:, prompt.ids.shape[1] - 1:].numpy()
    for row in ids:
        tokens = [TOK.id_to_token(int(i)) for i in row]
        bars = [k for k, t in enumerate(tokens) if t == "Bar_None"]
        firsts = [next((t for t in tokens[k:] if t.startswith("Chord_")), None) for k in bars[:3]]
        assert firsts == ["Chord_D:min", "Chord_C:maj", "Chord_C:maj"], tokens
        assert "Chord_G:7" in tokens[bars[0]:bars[1]] or not any(
            t.startswith("Position_") and int(t.split("_")[1]) >= 8 for t in tokens[bars[0]:bars[1]])


@needs_shared
def test_the_scorecard_gives_each_song_its_own_chords_as_a_lead_sheet(tmp_path):
    """``scorecard.lead_sheet=true``: a POP909 song is continued under its chord_midi.txt; a song without a chord
    file beside it is skipped, saying why."""
    import shutil

    from musictx.checkpoints.model_store import load_model
    from musictx.evaluation.scorecard import run_scorecard

    net, tok, _ = load_model("pop")
    song = SHARED_DATA / "pop" / "POP909" / "003" / "003.mid"
    bare = tmp_path / "003" / "003.mid"
    bare.parent.mkdir()
    shutil.copy(song, bare)
    shutil.copy(song.with_name("beat_midi.txt"), bare.with_name("beat_midi.txt"))
    opts = {"seed_seconds": 8.0, "seed_from": 20.0, "length_seconds": 8.0, "num_samples": 1, "lead_sheet": True}
    result = run_scorecard(net, tok, [song, bare], opts, progress=lambda _: None)
    assert [s["song"] for s in result["songs"]] == [str(song)]
    assert result["skipped"][0][0].endswith("003.mid") and "no chord_midi.txt" in result["skipped"][0][1]
