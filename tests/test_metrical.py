"""The metrical tokenizer through every stage: tokenize, prep, train, generate, evaluate, on band songs made
here (two named tracks on one program, 3/4 and 4/4) and, where ../shared is present, on POP909."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pretty_midi
import pytest
import torch
from symusic import Score

from musictx.checkpoints.model_store import load_model
from musictx.decoding.errors import GenerateError
from musictx.decoding.hooks.bar_repeats import BarRepeatLimit
from musictx.decoding.hooks.metrical_guard import RemiGuard
from musictx.evaluation.scorecard import run_scorecard
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.generation.model_choice import choose_model
from musictx.io.metrical_tokenizer import MetricalTokenizer
from musictx.io.ngram_index import INDEX_FILE, load_index
from musictx.io.token_store import TokenArrays, load_tokenizer
from musictx.io.tokenizer import EventTokenizer, TokenizerMismatchError
from musictx.io.tokenizers import tokenizer_from_dict
from musictx.tasks.metrical_seeds import metrical_seed

from .helpers import SHARED_DATA
from .metrical_fixtures import band_song, fixture_band_dir, fixture_remi_checkpoint, fixture_remi_dir  # noqa: F401

POP = SHARED_DATA / "pop" / "POP909"
needs_pop = pytest.mark.skipif(not POP.is_dir(), reason=f"POP909 not found at {POP} (CI and dev machines only)")


def test_round_trip_keeps_named_tracks_meter_and_notes(tmp_path):
    path = band_song(tmp_path / "s.mid", bars=6, bpm=100, beats_per_bar=3)
    tok = MetricalTokenizer()
    read = tok.read(path)
    score, tracks, shift = read.score, read.tracks, read.shift_ticks
    assert shift == 0 and [t.name for t in tracks.tracks] == ["Melody", "Piano"]
    assert len({t.program for t in tracks.tracks}) == 2  # one program each in the tokens, though both are 0
    back = tok.decode_score(tok.encode_score(score), tracks).resample(score.ticks_per_quarter, min_dur=1)
    assert [(t.name, t.program) for t in back.tracks] == [("Melody", 0), ("Piano", 0)]
    assert (back.time_signatures[0].numerator, back.time_signatures[0].denominator) == (3, 4)
    for a, b in zip(score.tracks, back.tracks, strict=True):
        assert np.array_equal(a.notes.numpy()["time"], b.notes.numpy()["time"])
        assert np.array_equal(a.notes.numpy()["pitch"], b.notes.numpy()["pitch"])
    pm = tok.decode(tok.encode(path), tracks)
    assert [i.name for i in pm.instruments] == ["Melody", "Piano"]


def test_saved_tokenizer_rebuilds_itself_and_refuses_other_settings():
    tok = MetricalTokenizer()
    again = tokenizer_from_dict(json.loads(json.dumps(tok.to_dict())))
    assert again == tok and again.vocab_size == tok.vocab_size
    assert tok.to_dict()["miditok"]["config"]["beat_res"]  # MidiTok's own parameter file, inside
    finer = MetricalTokenizer(positions_per_beat=8)
    with pytest.raises(TokenizerMismatchError, match="beat_res"):
        tok.check_compatible(finer, what="the checkpoint")
    with pytest.raises(TokenizerMismatchError, match="reads REMI tokens, data holds Performance events"):
        tok.check_compatible({"kind": "performance"})
    with pytest.raises(TokenizerMismatchError, match="reads Performance events, data holds REMI tokens"):
        EventTokenizer().check_compatible(tok)  # was an AttributeError on the REMI tokenizer
    # the extra token families named (a pop_infill model on plain pop data was said to differ in "vocabulary")
    with pytest.raises(TokenizerMismatchError, match=r"differ from data\.dir=d: the infill sentinels \(here, not in"):
        MetricalTokenizer(infill=True).check_compatible(tok, what="data.dir=d")
    with pytest.raises(TokenizerMismatchError, match=r"the chord events \(in the checkpoint, not here\)"):
        tok.check_compatible(MetricalTokenizer(chords=True), what="the checkpoint")


def _notes_by_program(tok, ids) -> Counter:
    """(Program token, Pitch token) of each note of ``ids``."""
    tokens = [tok.id_to_token(int(i)) for i in ids]
    return Counter((program, pitch) for program, pitch in zip(tokens, tokens[1:], strict=False)
                   if program.startswith("Program_") and pitch.startswith("Pitch_"))


def test_a_song_decoded_without_its_track_map_reads_back_with_each_part_in_its_role(tmp_path):
    """Decoded without a map, the bridge (program 81) was named "Lead 2 (sawtooth)", which reads as a melody: read
    back, the bridge that starts first took the melody's program. Named by their roles, each part keeps its own."""
    tok = MetricalTokenizer()
    song = band_song(tmp_path / "s.mid", names=("Bridge", "Melody"))  # the bridge first: it took program 80
    ids = tok.encode(song)
    back = tok.decode_score(ids)
    assert [t.name for t in back.tracks] == ["MELODY", "BRIDGE"]
    back.dump_midi(str(tmp_path / "back.mid"))
    assert _notes_by_program(tok, tok.encode(tmp_path / "back.mid")) == _notes_by_program(tok, ids)


@pytest.mark.skipif(not (POP / "001" / "001.mid").is_file(),
                    reason=f"POP909 not found under {SHARED_DATA} (CI and dev machines)")
def test_a_pop909_song_encoded_decoded_and_encoded_again_gives_its_ids_back(tmp_path):
    tok = MetricalTokenizer()
    ids = tok.encode(POP / "001" / "001.mid")
    tok.decode_score(ids).dump_midi(str(tmp_path / "back.mid"))
    assert np.array_equal(tok.encode(tmp_path / "back.mid"), ids)  # 1,850 of 7,110 ids differed: parts swapped


def test_transpose_moves_pitches_only_and_refuses_to_leave_the_range(tmp_path):
    tok = MetricalTokenizer()
    ids = tok.encode(band_song(tmp_path / "s.mid"))
    up = tok.transpose_ids(ids, 3)
    p0, _ = tok.pitch_positions(ids)
    p1, _ = tok.pitch_positions(up)
    assert np.array_equal(p1, p0 + 3) and np.sum(up != ids) == len(p0)
    assert np.array_equal(tok.transpose_ids(ids, 60), ids)  # C4 + 60 is past the top: left as it was


@needs_pop
def test_pop909_bars_come_from_the_beat_file():
    tok = MetricalTokenizer()
    for song, per_bar in (("001", 4), ("034", 6)):
        path = POP / song / f"{song}.mid"
        read = tok.read(path)
        score, tracks = read.score, read.tracks
        assert [t.name for t in tracks.tracks] == ["MELODY", "BRIDGE", "PIANO"]
        assert score.time_signatures[0].numerator == per_bar and len(score.time_signatures) == 1
        beats = np.loadtxt(path.with_name("beat_midi.txt"))
        first_downbeat_s = beats[beats[:, 2] == 1][0, 0]
        seed = metrical_seed(tok, path)
        # the bar line the seed starts on, on the file's own clock, is a bar's length before a downbeat
        gap = (first_downbeat_s - seed.origin_seconds) / seed.bar_seconds()
        assert abs(gap - round(gap)) < 0.01, (song, gap)
        out = tok.decode(tok.encode_score(score), tracks)
        assert [i.name for i in out.instruments] == ["MELODY", "BRIDGE", "PIANO"]


def test_prep_writes_remi_tokens_and_a_memorization_index(remi_dir, band_dir):
    tok = load_tokenizer(remi_dir)
    assert tok.kind == "remi"
    arrays = TokenArrays(remi_dir, "train")
    assert len(arrays) >= 3 and tok.errors(arrays.piece(0)[:-1]) == 0
    index = load_index(remi_dir / INDEX_FILE)
    assert index.dtype == np.uint64 and len(index) > 100 and np.all(np.diff(index.astype(np.float64)) >= 0)
    manifest = json.loads((remi_dir / "manifest.json").read_text())
    assert manifest["tokenizer"]["kind"] == "remi" and manifest["input_dir"] == str(band_dir)


def test_checkpoint_carries_its_tokenizer(remi_checkpoint, remi_dir):
    net, tok, meta = load_model(remi_checkpoint)
    assert tok == load_tokenizer(remi_dir) and net.head.out_features == tok.vocab_size


def test_generate_keeps_tracks_tempo_meter_and_grid(remi_checkpoint, tmp_path):
    seed_path = band_song(tmp_path / "seed.mid", bars=8, bpm=100, beats_per_bar=3, seed=11)
    opts = GenerateOptions(checkpoint=str(remi_checkpoint), seed_midi=str(seed_path), seed_seconds=6.0, length_bars=4,
                           num_samples=2, audio=False, output_dir=str(tmp_path / "out"),
                           hooks={"recall_guidance": {"strength": 0.0}})
    record = run(opts)
    assert record["seed"]["bars"] == 3 and record["bars"] == 4  # 6 s of 1.8 s bars: the nearest bar line
    tpq = Score(str(seed_path)).ticks_per_quarter
    for sample in record["samples"]:
        out = Score(str(tmp_path / "out" / sample["midi"]))
        names = [t.name for t in out.tracks]
        assert names == ["Melody", "Piano"] and all(t.program == 0 for t in out.tracks)
        assert abs(out.tempos[0].qpm - 100) < 0.01
        assert (out.time_signatures[0].numerator, out.time_signatures[0].denominator) == (3, 4)
        bar = 3 * out.ticks_per_quarter
        onsets = np.concatenate([t.notes.numpy()["time"] for t in out.tracks])
        assert onsets.max() < 7 * bar  # 3 seed bars + 4 new ones, nothing past them
        assert np.all(onsets % (out.ticks_per_quarter // 4) == 0)  # every onset on the 16th grid
        assert sample["new_bars"] == 4 and out.ticks_per_quarter == (tpq if tpq % 8 == 0 else 480)


def test_guard_keeps_the_grammar_and_the_seed_tracks(remi_checkpoint, tmp_path):
    from musictx.decoding.sampling_options import SamplingOptions
    from musictx.tasks.continue_metrical import sample_bars

    net, tok, _ = load_model(remi_checkpoint)
    seed = metrical_seed(tok, band_song(tmp_path / "seed.mid", bars=4, seed=5))
    pieces = sample_bars(net, tok, seed, SamplingOptions(temperature=1.5,
                                                         hooks={"recall_guidance": {"strength": 0.0}}), num_samples=3,
                         bars=6)
    programs = {int(tok.id_to_token(int(i)).split("_")[1]) for p in pieces for i in p if tok.type_of[i] == "Program"}
    assert programs <= {t.program for t in seed.tracks.tracks}
    for ids in pieces:
        assert tok.errors(np.concatenate([seed.ids, ids])) == 0
        assert (ids == tok.bar_id).sum() == 6


def test_the_bar_repeat_limit_breaks_a_loop_of_identical_bars():
    tok = MetricalTokenizer()
    v = tok.vocab
    bar = [v["Bar_None"], v["TimeSig_4/4"], v["Position_0"], v["Program_0"], v["Pitch_60"], v["Velocity_63"],
           v["Duration_1.0.4"]]
    guard, repeats = RemiGuard(tok, programs=[0]), BarRepeatLimit(tok, max_repeats=4)

    def allowed(prompt: list[int]) -> torch.Tensor:
        """The ids both hooks allow after ``prompt``, in the sampler's order."""
        guard.start(torch.tensor([prompt]))
        repeats.start(torch.tensor([prompt]))
        return torch.isfinite(repeats(guard(torch.zeros(1, tok.vocab_size))))[0]

    looped = allowed(bar * 4 + bar[:4])  # four identical bars, then the fifth up to its first pitch
    assert not looped[v["Pitch_60"]] and looped[v["Pitch_62"]]
    fourth = allowed(bar * 3 + bar[:4])  # three: a fourth is still fine
    assert fourth[v["Pitch_60"]] and not fourth[v["Program_1"]]  # Program_1: not a seed track


def test_shipped_model_choice_follows_the_seed(tmp_path):
    band = band_song(tmp_path / "band.mid")
    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(0)
    rng = np.random.default_rng(0)
    t = 0.0
    for _ in range(80):
        inst.notes.append(pretty_midi.Note(64, int(rng.integers(40, 80)), t, t + 0.3))
        t += float(rng.uniform(0.05, 0.4))  # rubato: off any grid
    pm.instruments.append(inst)
    pm.write(str(tmp_path / "perf.mid"))
    name, why = choose_model(band, ["piano", "pop"])
    assert name == "pop" and "tracks named Melody, Piano" in why  # as the file names them
    tune = pretty_midi.PrettyMIDI()
    tune.instruments.append(pretty_midi.Instrument(0))
    tune.instruments[0].notes += [pretty_midi.Note(80, 60 + k % 5, 0.25 * k, 0.25 * k + 0.2) for k in range(32)]
    tune.write(str(tmp_path / "tune.mid"))
    name, why = choose_model(tmp_path / "tune.mid", ["piano", "pop"])
    assert name == "pop" and "16th-note grid, 1 pitched track(s)" in why  # one track on the beat grid
    loop = pretty_midi.PrettyMIDI()
    loop.instruments.append(pretty_midi.Instrument(0, is_drum=True))
    loop.instruments[0].notes += [pretty_midi.Note(100, 36 + k % 3, 0.25 * k, 0.25 * k + 0.1) for k in range(32)]
    loop.write(str(tmp_path / "loop.mid"))
    assert "0 pitched track(s) and 1 of drums" in choose_model(tmp_path / "loop.mid", ["piano", "pop"])[1]
    assert choose_model(tmp_path / "perf.mid", ["piano", "pop"])[0] == "piano"
    assert choose_model(band, ["piano"]) == ("piano", "the only shipped model")
    # a melody to accompany goes to pop, played in time or not (the accompaniment is written on bars)
    assert choose_model(tmp_path / "perf.mid", ["piano", "pop"], task="accompany")[0] == "pop"
    # a seed that cannot be continued is refused as its reader says it, before any model is named for it
    (tmp_path / "broken.mid").write_bytes(b"MThd\x00\x00\x00\x06\x00\x01\x00\x01\x01\xe0MTrk\x00\xff\x00\x3b")
    pretty_midi.PrettyMIDI().write(str(tmp_path / "empty.mid"))
    with pytest.raises(GenerateError, match=r"broken.mid: unreadable MIDI \(cut short or damaged"):
        choose_model(tmp_path / "broken.mid", ["piano", "pop"])
    with pytest.raises(GenerateError, match="empty.mid: no notes; nothing to continue"):
        choose_model(tmp_path / "empty.mid", ["piano", "pop"])


def test_scorecard_compares_with_the_real_continuation(remi_checkpoint, remi_dir, band_dir):
    net, tok, _ = load_model(remi_checkpoint)
    opts = {"seed_seconds": 6.0, "seed_from": 2.0, "length_seconds": 8.0, "num_samples": 1,
            "hooks": {"recall_guidance": {"strength": 0.0}}}
    song = band_dir / TokenArrays(remi_dir, "train").files[0]
    result = run_scorecard(net, tok, [song], opts, remi_dir / INDEX_FILE, progress=lambda _: None)
    real, model, chance = result["means"]["real"], result["means"]["model"], result["means"]["chance"]
    assert real["grid_share"] == 1.0 and chance["grid_share"] < 0.5  # the band plays on its eighth grid
    assert real["tracks_kept"] == 1.0 and real["pc_correlation"] == pytest.approx(1.0)
    assert 0 <= model["grid_share"] <= 1 and model["tracks_kept"] in (0.0, 0.5, 1.0)
    assert 0 <= model["memorized"] <= 1 and real["memorized"] == 1.0  # a train song: all of it is in the index
    # the seed's own pitch classes against the real next 8 s: the reference a continuation's harmony is read by
    import pretty_midi

    from musictx.evaluation.scorecard import format_scorecard, real_music
    from musictx.listening import scorecard_metrics as sm
    from musictx.tasks import metrical_seed

    seed = metrical_seed(tok, song, 6.0, 2.0)
    t0 = seed.origin_seconds + seed.seconds
    music = real_music(pretty_midi.PrettyMIDI(str(song)), tok)
    expected = sm.pc_correlation(music.window(seed.origin_seconds, t0), music.window(t0, t0 + 8.0))
    assert result["means"]["seed"]["pc_correlation"] == pytest.approx(expected)
    # and each continuation's own pitch classes against its seed's: the real one's is the same pair
    assert real["seed_pc_correlation"] == pytest.approx(expected) and -1 <= model["seed_pc_correlation"] <= 1
    assert "| pitch-class correlation with the seed |" in format_scorecard(result)
    assert "| pitch-class correlation with the real continuation |" in format_scorecard(result)
    assert format_scorecard(result).splitlines()[1].endswith("| the seed |")


def test_app_continues_with_a_metrical_model(remi_checkpoint, tmp_path):
    from musictx.app.core import Continuer, Settings

    app = Continuer(model=str(remi_checkpoint), workdir=tmp_path / "work")
    seed_path = band_song(tmp_path / "mine.mid", bars=8, bpm=100, beats_per_bar=4, seed=2)
    seen = []
    results = app.continue_file(seed_path, Settings(seed_seconds=4.8, length_seconds=4.8, num_samples=1,
                                                    recall_guidance=0.0), report=lambda f, t: seen.append(f))
    (result,) = results
    assert result.midi.name.startswith("mine_cont_") and result.midi.is_file() and result.png.is_file()
    out = Score(str(result.midi))
    assert [t.name for t in out.tracks] == ["Melody", "Piano"] and abs(out.tempos[0].qpm - 100) < 0.01
    assert "bars new" in result.title and seen and max(seen) == 1.0


def test_recall_windows_repeat_whole_bars(remi_dir):
    from musictx.training.recall_windows import RecallCurriculum

    tok = load_tokenizer(remi_dir)
    ids = np.asarray(TokenArrays(remi_dir, "train").piece(0)[:400], dtype=np.int64)
    curriculum = RecallCurriculum(prob=1.0, min_len=20, max_len=120, transpose_prob=0.0)
    for seed in range(5):
        out = curriculum.apply(ids, 300, tok, np.random.default_rng(seed))
        assert len(out) > len(ids) and tok.errors(out) == 0
        extra = len(out) - len(ids)
        bars = np.flatnonzero(ids == tok.bar_id)
        # ids with whole bars put in at one of its bar lines, the bars heard earlier
        fits = [(at, k) for at in bars for k in bars[bars < at]
                if np.array_equal(out[:at], ids[:at]) and np.array_equal(out[at + extra:], ids[at:])
                and np.array_equal(out[at:at + extra], ids[k:k + extra])]
        assert fits and all(out[at] == tok.bar_id for at, _ in fits)


def test_attention_arcs_of_a_metrical_model(remi_checkpoint, tmp_path):
    from musictx.evaluation.arcs import ArcChoice, arcs_of_midi, plot_arcs

    net, tok, _ = load_model(remi_checkpoint)
    path = band_song(tmp_path / "s.mid", bars=4, bpm=120, beats_per_bar=4, seed=1)
    arcs = arcs_of_midi(net, tok, path, ArcChoice(last_notes=4))
    pitch_ids = tok.ids_of_type("Pitch")
    ids = tok.encode(path)[arcs.span.first:arcs.span.stop]
    assert np.all(np.isin(ids[arcs.on_index], pitch_ids))  # every note's key is its Pitch token
    assert len(arcs.queries) == 4 and np.all(arcs.weights.sum(axis=1) <= 1.0 + 1e-5)
    assert arcs.notes.start.min() >= arcs.span.start_s - 1e-6 and arcs.span.first > 0  # the context's last tokens
    off_grid = np.abs(arcs.notes.start / 0.25 - np.round(arcs.notes.start / 0.25)) * 0.25
    assert off_grid.max() < 0.06  # on the band's eighth grid at 120 bpm (Tempo ids are binned: 120 -> 120.8)
    plot_arcs(arcs, tmp_path / "arcs.png")
    assert (tmp_path / "arcs.png").stat().st_size > 1000


def test_every_way_of_building_the_tokenizer_numbers_ids_alike(tmp_path):
    """MidiTok orders the TimeSig ids by a dict's key order; a saved file (sorted keys) once numbered them
    differently from the tokenizer that wrote the data. Built from settings, from our dict, from a JSON file
    and from MidiTok's own file, the ids must be the same."""
    import miditok

    fresh = MetricalTokenizer()
    tok_file = tmp_path / "tokenizer.json"
    fresh.save(tok_file)
    fresh.save_native(tmp_path / "native.json")
    native = miditok.REMI(params=tmp_path / "native.json")
    for other in (tokenizer_from_dict(fresh.to_dict()), MetricalTokenizer.load(tok_file)):
        assert other._tokens == fresh._tokens
    assert all(native.vocab[t] == i for i, t in enumerate(fresh._tokens))
    assert fresh.id_to_token(int(fresh.encode(band_song(tmp_path / "s.mid", beats_per_bar=4))[1])) == "TimeSig_4/4"


def test_copy_probe_of_a_metrical_model_moves_pitch_ids_to_transpose(remi_checkpoint, remi_dir):
    """mode=recall on REMI tokens: the transposed probe moves the repeat's Pitch ids (and nothing else)."""
    from musictx.evaluation.recall import copy_gain, draw_probes, moved

    net, tok, _ = load_model(remi_checkpoint)
    passage = np.asarray(TokenArrays(remi_dir, "train").piece(0)[:40], dtype=np.int64)
    up = moved(passage, 2, tok)
    pitch = tok.type_of[passage] == "Pitch"
    assert pitch.any() and np.array_equal(up[~pitch], passage[~pitch])
    assert np.array_equal(up[pitch], tok.transpose_ids(passage, 2)[pitch]) and not np.array_equal(up, passage)
    probes = draw_probes(TokenArrays(remi_dir, "train"), n=2, passage=16, filler=16, seed=0)
    row = copy_gain(net, tok, probes, gap=8, skip=4, transpose=2)
    assert row["transpose"] == 2 and np.isfinite(row["gain"]) and "Pitch" in row["by_event"]
