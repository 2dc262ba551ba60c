"""Infill and accompaniment (issue 40): the format on real tokens, the training curriculum, the grown
embedding, and the two tasks end to end with the shipped pop model (its embedding grown for the sentinels)
on a POP909 song and on a two-track MIDI written here: outside the bars (and tracks) asked for, the file
comes back note for note; new notes sit inside the range's bar lines; the melody is never touched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from symusic import Score

from musictx.checkpoints.model_store import load_pretrained, save_model_folder
from musictx.checkpoints.net_specs import build_net, net_spec
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.infill_format import BarSplitter, InfillIds, bar_starts
from musictx.io.metrical_tokenizer import MetricalTokenizer
from musictx.io.midi_io import MidiReadError
from musictx.io.score_prep import ROLE_PROGRAMS
from musictx.tasks.accompany import accompany_song
from musictx.tasks.infill import infill_song
from musictx.tasks.song_bars import (
    melody_song,
    parse_bars,
    programs_of_names,
    read_song,
    reading_said,
    roles_to_write,
)
from musictx.tasks.write_back import in_bars
from musictx.training.infill_windows import InfillCurriculum
from musictx.training.vocab_growth import grow_rows

from .metrical_fixtures import band_song
from .test_metrical import POP, needs_pop

SONG = POP / "003" / "003.mid"
FIELDS = ("time", "duration", "pitch", "velocity")


@pytest.fixture(name="grown", scope="module")
def fixture_grown():
    """(net, tokenizer): the shipped pop model with rows for the infill sentinels (mean rows, untrained)."""
    torch.set_num_threads(1)
    net0, tok0 = load_pretrained("pop")
    tok = MetricalTokenizer(params=tok0.params, infill=True)
    spec = net_spec(net0)
    spec["config"] = dict(spec["config"], vocab_size=tok.vocab_size)
    net = build_net(spec)
    net.load_state_dict(grow_rows(net0.state_dict(), tok0.vocab_size, tok.vocab_size))
    return net.eval(), tok


def notes_of(track, keep=None) -> list[tuple]:
    a = track.notes.numpy()
    mask = np.ones(len(a["time"]), bool) if keep is None else keep(a["time"])
    return sorted(zip(*(a[k][mask].tolist() for k in FIELDS), strict=True))


def test_tokenizer_appends_sentinels_and_keeps_every_id():
    plain, infill = MetricalTokenizer(), MetricalTokenizer(infill=True)
    assert infill.vocab_size == plain.vocab_size + 3
    assert all(infill.vocab[t] == i for t, i in plain.vocab.items())
    back = MetricalTokenizer.from_dict(infill.to_dict())
    assert back == infill and back != plain
    ids = InfillIds.of(infill)
    names = [infill.id_to_token(i) for i in (ids.start, ids.end, ids.fill)]
    assert names == ["Infill_Start", "Infill_End", "Fill_None"]
    with pytest.raises(ValueError, match="no infill tokens"):
        InfillIds.of(plain)


@needs_pop
def test_split_bar_partitions_the_notes_of_a_real_bar():
    tok = MetricalTokenizer(infill=True)
    ids = tok.encode(SONG)
    starts = bar_starts(ids, tok.bar_id)
    bar = ids[starts[10]:starts[11]]
    splitter = BarSplitter(tok)
    piano = {0}
    given, taken = splitter.split(bar, piano)
    notes = tok.note_table(bar)[0]
    given_notes, taken_notes = tok.note_table(given)[0], tok.note_table(taken)[0]
    assert len(given_notes) + len(taken_notes) == len(notes) > 0
    assert splitter.programs_in(np.array(taken)) == piano and 0 not in splitter.programs_in(np.array(given))
    # every note keeps its onset and pitch in the part it went to
    both = sorted(zip(np.r_[given_notes.start, taken_notes.start], np.r_[given_notes.pitch, taken_notes.pitch],
                      strict=True))
    assert both == sorted(zip(notes.start, notes.pitch, strict=True))
    given_all, taken_all = splitter.split(bar, None)
    assert "Pitch" not in {tok.type_of[i] for i in given_all} and len(tok.note_table(taken_all)[0]) == len(notes)


@needs_pop
def test_curriculum_windows_hold_one_middle_with_a_bar_per_fill():
    from musictx.training.windows import RandomWindows

    tok = MetricalTokenizer(infill=True)
    ids = tok.encode(SONG)
    curriculum = InfillCurriculum(prob=1.0, max_bars=6)
    sentinels = InfillIds.of(tok)
    kinds = set()
    for g in range(30):
        rng = np.random.default_rng(g)
        start = int(rng.integers(0, len(ids) - 1100))
        out = curriculum.apply(ids[start:start + 1100], 1025, tok, rng)
        assert len(out) <= 1025
        (at,) = np.flatnonzero(out == sentinels.start)
        assert out[-1] == sentinels.end and (out == sentinels.end).sum() == 1
        fills, middle_bars = int((out[:at] == sentinels.fill).sum()), int((out[at:] == tok.bar_id).sum())
        assert 1 <= fills == middle_bars <= 6
        kinds.add(len(BarSplitter(tok).programs_in(out[at:])))
    assert len(kinds) > 1  # both whole-bar and some-track middles are drawn
    # prob 0 draws nothing from the rng: the windows are those of a run without the curriculum
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    assert np.array_equal(InfillCurriculum().apply(ids[:1025], 1025, tok, rng_a), ids[:1025])
    assert rng_a.random() == rng_b.random()
    window = RandomWindows(Path("unused"), "train", 16, tok, infill=InfillCurriculum(prob=0.5))
    assert window.infill.prob == 0.5


@needs_pop
def test_cold_accompaniment_windows_hold_the_span_alone_with_its_melody():
    """A cold window has no bars around the span: Bar ... Fill for each span bar (the melody given), then
    the taken accompaniment; the melody is never taken."""
    tok = MetricalTokenizer(infill=True)
    ids = tok.encode(SONG)
    cold = InfillCurriculum(prob=1.0, track_share=1.0, accompany_share=1.0, cold_share=1.0, max_bars=4)
    warm = InfillCurriculum(prob=1.0, track_share=1.0, accompany_share=1.0, cold_share=0.0, max_bars=4)
    sentinels, splitter = InfillIds.of(tok), BarSplitter(tok)
    melody = ROLE_PROGRAMS["MELODY"]
    seen = 0
    for g in range(20):
        start = int(np.random.default_rng(g).integers(0, len(ids) - 1100))
        out = cold.apply(ids[start:start + 1100], 1025, tok, np.random.default_rng(g))
        other = warm.apply(ids[start:start + 1100], 1025, tok, np.random.default_rng(g))
        (at,) = np.flatnonzero(out == sentinels.start)
        taken = splitter.programs_in(out[at:])
        if melody in taken or not taken:
            continue  # a whole-bar or melody-taking draw: not an accompaniment window
        seen += 1
        fills = int((out[:at] == sentinels.fill).sum())
        assert out[0] == tok.bar_id and int((out[:at] == tok.bar_id).sum()) == fills  # only the span's bars
        assert melody in splitter.programs_in(out[:at]) or len(splitter.programs_in(out[:at])) == 0
        assert not (splitter.programs_in(out[:at]) & taken)  # nothing of the taken tracks before the middle
        assert len(out) < len(other)  # the warm window keeps the edges
    assert seen >= 3


def test_init_from_grows_the_embedding_and_keeps_the_old_rows(tmp_path):
    from musictx.training.finetune import init_net_from

    net0, tok0 = load_pretrained("pop")
    save_model_folder(net0, tok0, tmp_path / "pop", dtype="float32")
    tok = MetricalTokenizer(params=tok0.params, infill=True)
    net, _ = init_net_from(str(tmp_path / "pop"), {"name": "music_transformer"}, tok, {})
    old = net0.state_dict()
    for name in ("tok_emb.weight", "head.weight"):
        grown = net.state_dict()[name]
        assert grown.shape[0] == tok.vocab_size
        torch.testing.assert_close(grown[: tok0.vocab_size], old[name].float())
        torch.testing.assert_close(grown[tok0.vocab_size:], old[name].float().mean(0).expand(3, -1))


def check_outside_unchanged(path, out: Score, song, s, e, taken, per_beat=4) -> None:
    original = Score(str(path))
    assert out.ticks_per_quarter == original.ticks_per_quarter
    assert [(t.time, t.mspq) for t in out.tempos] == [(t.time, t.mspq) for t in original.tempos]
    assert [(t.time, t.numerator, t.denominator) for t in out.time_signatures] == \
        [(t.time, t.numerator, t.denominator) for t in original.time_signatures]
    shift = song.read.shift_ticks
    lo, hi = int(song.lines[s]) - shift, int(song.lines[e]) - shift
    for before, after, info in zip(original.tracks, out.tracks, song.read.tracks.tracks, strict=True):
        assert after.name == before.name
        if taken is not None and info.program not in taken:
            assert notes_of(after) == notes_of(before)  # a given track: every note, in the range too
            continue
        outside = lambda t: ~in_bars(song, t, s, e, per_beat)  # noqa: E731
        assert notes_of(after, outside) == notes_of(before, outside)
        new = [n for n in notes_of(after) if n not in notes_of(before, outside)]
        assert all(lo <= t < hi and t + d <= hi for t, d, _, _ in new)  # inside the range's bar lines


@needs_pop
@pytest.mark.parametrize("tracks", [None, "piano"])
def test_infill_a_pop909_song_changes_nothing_outside(grown, tmp_path, tracks):
    net, tok = grown
    song = read_song(tok, SONG)
    s, e = parse_bars("9-12", song)
    taken = programs_of_names(song, tracks)
    out, middle = infill_song(net, tok, song, s, e, taken, SamplingOptions(seed=3))
    assert (middle == tok.bar_id).sum() == e - s and middle[0] == tok.bar_id
    out.dump_midi(str(tmp_path / "out.mid"))
    check_outside_unchanged(SONG, Score(str(tmp_path / "out.mid")), song, s, e, taken)


def test_infill_and_accompany_a_two_track_user_midi(grown, tmp_path):
    net, tok = grown
    path = band_song(tmp_path / "mine.mid", bars=12, bpm=96, beats_per_bar=4, seed=1)
    song = read_song(tok, path)
    s, e = parse_bars("5-8", song)
    taken = programs_of_names(song, "piano")
    out, _ = infill_song(net, tok, song, s, e, taken, SamplingOptions(seed=1))
    check_outside_unchanged(path, out, song, s, e, taken)

    melody_only = Score(str(path))
    melody_only.tracks = [melody_only.tracks[0]]
    melody_only.dump_midi(str(tmp_path / "melody.mid"))
    song = melody_song(tok, tmp_path / "melody.mid")
    roles = roles_to_write(song, None)
    assert roles == ["BRIDGE", "PIANO"]
    # counter_rest off and BRIDGE asked for 2 notes a bar: this melody sounds almost throughout, where the counter
    # rest may leave BRIDGE silent (a silent track is left out of the file); here both new tracks must come out as
    # their own named tracks (without the ask, whether this small model plays BRIDGE at all hung on the seed: seed
    # 1 did until the typical PIANO changed the draws)
    no_rest = SamplingOptions(seed=1, hooks={"counter_rest": {"strength": 0.0}, "density": {"bridge": 2.0}})
    out, _ = accompany_song(net, tok, song, roles, 0, song.n_bars, no_rest)
    out.dump_midi(str(tmp_path / "acc.mid"))
    back, given = Score(str(tmp_path / "acc.mid")), Score(str(tmp_path / "melody.mid"))
    assert [t.name for t in back.tracks] == ["Melody", "BRIDGE", "PIANO"]
    assert notes_of(back.tracks[0]) == notes_of(given.tracks[0])  # the melody, note for note
    assert [(t.time, t.mspq) for t in back.tempos] == [(t.time, t.mspq) for t in given.tempos]
    assert [(t.numerator, t.denominator) for t in back.time_signatures] == [(4, 4)]
    end = int(song.lines[song.n_bars])
    assert sum(len(t.notes) for t in back.tracks[1:]) > 0
    assert all(n.time + n.duration <= end for t in back.tracks[1:] for n in t.notes)


def test_bad_requests_name_the_file_and_the_problem(grown, tmp_path):
    _, tok = grown
    path = band_song(tmp_path / "mine.mid", bars=8, seed=2)
    song = read_song(tok, path)
    with pytest.raises(MidiReadError, match=r"mine\.mid.*bars=9-12 is outside the song's bars 1-8"):
        parse_bars("9-12", song)
    from musictx.decoding.errors import GenerateError

    with pytest.raises(GenerateError, match=r"bars=6-4: the first bar comes after the last \(.*bars=4-6\)"):
        parse_bars("6-4", song)
    with pytest.raises(MidiReadError, match=r"mine\.mid.*no track named drums \(tracks: Melody, Piano\)"):
        programs_of_names(song, "drums")
    two = Score(str(path))
    two.tracks[0].name = "Strings"
    two.dump_midi(str(tmp_path / "nomelody.mid"))
    with pytest.raises(MidiReadError, match=r"nomelody\.mid.*no melody track"):
        melody_song(tok, tmp_path / "nomelody.mid")
    with pytest.raises(MidiReadError, match="already has a PIANO track"):
        roles_to_write(melody_song(tok, path), "piano")
    with pytest.raises(MidiReadError, match="the model writes bridge and piano"):
        roles_to_write(melody_song(tok, path), "drums")


@needs_pop
def test_generate_command_path_writes_the_filled_song_and_refuses_bad_options(grown, tmp_path):
    from musictx.decoding.errors import GenerateError
    from musictx.generation.continue_midi import run
    from musictx.generation.generate_options import GenerateOptions

    net, tok = grown
    save_model_folder(net, tok, tmp_path / "model", dtype="float32")
    opts = dict(checkpoint=str(tmp_path / "model"), seed_midi=str(SONG), num_samples=1, audio=False,
                output_dir=str(tmp_path / "out"))
    record = run(GenerateOptions(**opts, task="infill", bars="9-10", tracks=["BRIDGE", "piano"]))
    sample = record["samples"][0]
    assert (tmp_path / "out" / sample["midi"]).is_file() and sample["tracks"]["MELODY"] > 0
    assert "bars 9-10" in record["what"] and "(BRIDGE, PIANO)" in record["what"]
    with pytest.raises(GenerateError, match="task=infill needs bars=FIRST-LAST"):
        run(GenerateOptions(**opts, task="infill"))
    with pytest.raises(GenerateError, match="task=fill: use one of continue, infill, accompany"):
        run(GenerateOptions(**opts, task="fill"))
    with pytest.raises(GenerateError, match="no infill tokens"):
        run(GenerateOptions(**{**opts, "checkpoint": "pop"}, task="infill", bars="1-2"))


@pytest.mark.parametrize("scheme", ["lead", "infill"])
def test_accompany_a_bar_range_writes_only_there(grown, tmp_path, scheme):
    # the infill scheme with the model trained on it (pop with untrained sentinel rows writes nothing there)
    net, tok = load_pretrained("pop_infill") if scheme == "infill" else grown
    path = band_song(tmp_path / "mine.mid", bars=12, bpm=110, beats_per_bar=3, seed=4)
    melody_only = Score(str(path))
    melody_only.tracks = [melody_only.tracks[0]]
    melody_only.tracks[0].name = ""  # one unnamed track: taken as the melody
    melody_only.dump_midi(str(tmp_path / "tune.mid"))
    song = melody_song(tok, tmp_path / "tune.mid")
    s, e = parse_bars("5-8", song)
    out, _ = accompany_song(net, tok, song, roles_to_write(song, "piano"), s, e, SamplingOptions(seed=5), scheme=scheme)
    assert [t.name for t in out.tracks] == ["", "PIANO"]
    assert notes_of(out.tracks[0]) == notes_of(melody_only.tracks[0])
    assert [(t.numerator, t.denominator) for t in out.time_signatures] == [(3, 4)]
    lo, hi = int(song.lines[s]), int(song.lines[e])  # no beat file: the file's own ticks, no shift
    piano = out.tracks[1].notes.numpy()
    assert len(piano["time"]) > 0
    assert np.all((piano["time"] >= lo) & (piano["time"] + piano["duration"] <= hi))


def test_generate_command_line_reads_a_bare_track_list(tmp_path):
    """``tracks=bridge,piano`` as the issue writes it (Hydra alone would read it as a sweep)."""
    import os
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "musictx-generate"
    path = band_song(tmp_path / "mine.mid", bars=4, seed=3)
    done = subprocess.run([str(exe), "task=infill", f"seed_midi={path}", "bars=1-2", "tracks=bridge,piano",
                           "checkpoint=pop", f"output_dir={tmp_path / 'out'}"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    # the options got through Hydra and the checks; the shipped pop model then has no infill tokens
    assert done.returncode == 1 and "no infill tokens" in done.stderr, done.stderr[-1500:]
    assert "Ambiguous" not in done.stderr


@needs_pop
def test_a_pop909_file_without_its_beat_file_gets_bars_found_from_its_music_and_says_so(tmp_path):
    tok = MetricalTokenizer(infill=True)
    song = POP / "030" / "030.mid"  # its MIDI says 1/4 (a beat a bar); its bars are in beat_midi.txt
    alone = tmp_path / "030.mid"
    alone.write_bytes(song.read_bytes())
    found = read_song(tok, alone)
    warning = reading_said(found)
    assert "030.mid: its meter says one beat a bar" in warning and "found from the music" in warning
    annotated = read_song(tok, song)
    assert found.n_bars == pytest.approx(annotated.n_bars, abs=1)  # bars as long as the annotated ones
    assert reading_said(read_song(tok, song)) == ""  # its beat file beside it: real bars
    assert reading_said(read_song(tok, band_song(tmp_path / "mine.mid", bars=4, beats_per_bar=3))) == ""


def test_a_runs_samples_are_drawn_as_one_batch(grown, tmp_path):
    """infill and accompany draw all their samples at once (issue 49): each draw is a (3,) row of ids, and
    each sample is its own filling of the same bars, the rest of the file untouched."""
    from musictx.tasks.accompany import accompany_songs
    from musictx.tasks.infill import infill_songs

    net, tok = grown
    path = band_song(tmp_path / "mine.mid", bars=8, bpm=100, beats_per_bar=4, seed=6)
    song = read_song(tok, path)
    s, e = parse_bars("3-4", song)
    taken = programs_of_names(song, "piano")
    widths = []
    # the copy cache off: on this song of one bar played over and over it copies that bar in every sample
    no_cache = SamplingOptions(seed=4, hooks={"copy_cache": {"strength": 0.0}})
    made = infill_songs(net, tok, song, s, e, taken, no_cache, samples=3,
                        on_step=lambda ids, done: widths.append(len(ids)))
    assert len(made) == 3 and set(widths) == {3}
    for out, middle in made:
        assert (middle == tok.bar_id).sum() == e - s
        check_outside_unchanged(path, out, song, s, e, taken)
    assert len({tuple(middle.tolist()) for _, middle in made}) > 1  # not one sample three times

    melody_only = Score(str(path))
    melody_only.tracks = [melody_only.tracks[0]]
    melody_only.dump_midi(str(tmp_path / "melody.mid"))
    tune = melody_song(tok, tmp_path / "melody.mid")
    widths.clear()
    made = accompany_songs(net, tok, tune, ["PIANO"], 0, 4, SamplingOptions(seed=4), samples=2,
                           on_step=lambda ids, done: widths.append(len(ids)))
    assert len(made) == 2 and set(widths) == {2} and all(new_ids > 0 for _, new_ids in made)
    pitches = [score.tracks[-1].notes.numpy()["pitch"].tolist() for score, _ in made]
    assert pitches[0] != pitches[1]
