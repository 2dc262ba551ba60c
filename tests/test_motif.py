"""The motif-memory evaluation: the forgetting-curve metric on hand-made note sequences whose answer is
known, the seed picker on a hand-made split, and one end-to-end run of ``mode=motif`` on a tiny checkpoint."""

from __future__ import annotations

import json
import re

import numpy as np
import pretty_midi
import pytest

from musictx.checkpoints.model_store import load_model
from musictx.commands.motif_curves import main
from musictx.evaluation.motif import (
    is_trivial,
    motif_score,
    near_share,
    ngrams,
    pick_motif_seeds,
    read_line,
    seed_from_file,
    seed_motif,
    summarise,
    window_curve,
    window_edges,
)
from musictx.evaluation.run import evaluation_options, format_table, run_evaluation, write_result
from musictx.io.midi_io import Notes
from musictx.io.token_store import TokenArrays, write_split
from musictx.io.tokenizer import EventTokenizer
from musictx.tasks.continue_seed import piece_notes

from .gen_fixtures import fixture_tiny_checkpoint  # noqa: F401  (fixture)

MOTIF = [60, 62, 64, 60, 67, 65]  # intervals 2 2 -4 7 -2, then -5 back to the start
IOIS = [0.25, 0.25, 0.5, 0.25, 0.25, 0.5]  # one cycle lasts 2 s
OTHER = [60, 61, 64, 63, 69]  # intervals 1 3 -1 6 -9: none of the motif's
WINDOWS = window_edges(20.0, 4.0)  # two cycles per window


def line(pitches, iois, cycles: int, transpose: int = 0, t0: float = 0.0) -> Notes:
    """``pitches`` played ``cycles`` times with inter-onset intervals ``iois`` (cycled), from ``t0``."""
    pitch = np.tile(np.asarray(pitches), cycles) + transpose
    gaps = np.resize(np.asarray(iois, dtype=float), len(pitch))
    start = t0 + np.concatenate([[0.0], np.cumsum(gaps)[:-1]])
    return Notes(start, start + 0.2, pitch.astype(np.int64), np.full(len(pitch), 80, dtype=np.int64))


def random_notes(rng: np.random.Generator, seconds: float, t0: float = 0.0) -> Notes:
    """Random pitches and onsets from ``t0`` for ``seconds``: no motif to speak of."""
    start = t0 + np.cumsum(rng.choice([0.1, 0.2, 0.3, 0.45], size=int(seconds * 4)))
    start = start[start < t0 + seconds]
    return Notes(start, start + 0.15, rng.integers(40, 90, len(start)), np.full(len(start), 70))


SEED = line(MOTIF, IOIS, cycles=4)  # 8 s, the motif four times


@pytest.mark.parametrize("after, reuse, reuse_rhythm, same_pitch_classes", [
    (line(MOTIF, IOIS, 10), 1.0, 1.0, True),  # repeated exactly
    (line(MOTIF, IOIS, 10, transpose=5), 1.0, 1.0, False),  # transposed: same intervals, other keys
    (line(OTHER, IOIS, 12), 0.0, 0.0, False),  # never
    (line(MOTIF, [0.3], 12), 1.0, 0.0, True),  # same pitches, other rhythm
], ids=["exact", "transposed", "never", "rhythm-changed"])
def test_curve_of_known_continuations(after, reuse, reuse_rhythm, same_pitch_classes):
    curve = window_curve(SEED, after, WINDOWS)
    assert curve["motif_reuse"] == [reuse] * len(WINDOWS)
    assert curve["motif_reuse_rhythm"] == [reuse_rhythm] * len(WINDOWS)
    assert curve["motif_reuse_near"] == [reuse] * len(WINDOWS)  # +-1 semitone adds nothing to these
    pc = np.asarray(curve["pitch_class_tv"])
    assert (pc < 0.1).all() if same_pitch_classes else (pc > 0.2).all()
    assert all(n > 0 for n in curve["notes_per_s"])


def test_a_motif_sequenced_inside_the_key_is_near_not_exact():
    """C D E C G F moved up a step in C major is D E F D A G: intervals 2 1 -3 7 -2 -5 for 2 2 -4 7 -2 -5.
    Of the motif's six 4-grams only (7, -2, -5, 2) survives exactly; all six come back within a semitone."""
    sequenced = line([62, 64, 65, 62, 69, 67], IOIS, 10)
    curve = window_curve(SEED, sequenced, WINDOWS)
    assert curve["motif_reuse"] == [1 / 6] * len(WINDOWS)
    assert curve["motif_reuse_near"] == [1.0] * len(WINDOWS)
    assert near_share({(2, 2, -4, 7)}, {(2, 1, -3, 7)}, tolerance=0) == 0.0
    assert near_share({(2, 2, -4, 7), (0, 5, 0, 5)}, {(3, 1, -3, 6)}) == 0.5
    assert near_share(set(), {(1, 1, 1, 1)}) == near_share({(1, 1, 1, 1)}, set()) == 0.0


def test_the_figure_on_other_intervals_is_figure_reuse_only_with_its_rhythm_and_direction():
    """C D E C G F (up, up, down, up, down) with wider leaps, C E G C C' A, is the same figure to a listener:
    no interval is within a semitone of the motif's, every direction and inter-onset bin is."""
    wider = [60, 64, 67, 60, 72, 69]  # intervals 4 3 -7 12 -3, then -9: the motif's directions
    curve = window_curve(SEED, line(wider, IOIS, 10), WINDOWS)
    assert curve["figure_reuse"] == [1.0] * len(WINDOWS) and curve["motif_reuse_near"] == [0.0] * len(WINDOWS)
    assert window_curve(SEED, line(wider, [0.3], 12), WINDOWS)["figure_reuse"] == [0.0] * len(WINDOWS)
    upside_down = [72 - (p - 60) for p in wider]  # every direction reversed
    assert window_curve(SEED, line(upside_down, IOIS, 10), WINDOWS)["figure_reuse"] == [0.0] * len(WINDOWS)


def test_curve_falls_when_the_motif_is_dropped_and_when_the_music_stops():
    after = Notes.concat([line(MOTIF, IOIS, 4), line(OTHER, IOIS, 4, t0=8.0)])  # motif 0-8 s, other 8-15 s
    curve = window_curve(SEED, after, WINDOWS)
    assert curve["motif_reuse"][:2] == [1.0, 1.0] and curve["motif_reuse"][2:] == [0.0, 0.0, 0.0]
    assert curve["notes_per_s"][-1] == 0 and curve["pitch_class_tv"][-1] == 1.0  # silence: nothing kept


def test_ngram_straddling_a_window_edge_counts_for_the_window_of_its_first_note():
    keys, starts = ngrams(line(MOTIF, IOIS, 2), size=4)
    assert len(keys) == 12 - 4 and list(starts[:3]) == [0.0, 0.25, 0.5]
    curve = window_curve(SEED, line(MOTIF, IOIS, 1, t0=1.0), [(0.0, 1.5), (1.5, 4.0)], size=4)
    assert curve["motif_reuse"][0] > 0  # the 4-gram from 1.0 s ends at 2.25 s, past the window's end


def test_chords_are_read_low_to_high_whatever_their_spread():
    spread = Notes(np.array([0.02, 0.0, 0.01, 0.5]), np.array([1.0, 1.0, 1.0, 1.0]),
                   np.array([60, 67, 64, 72]), np.full(4, 80))
    pitch, onset = read_line(spread)
    assert pitch.tolist() == [60, 64, 67, 72] and onset.tolist() == [0.0, 0.0, 0.0, 0.5]


def test_motif_score_and_trivial_patterns():
    rng = np.random.default_rng(0)
    assert motif_score(SEED) == 1.0
    assert motif_score(random_notes(rng, 8.0)) < 0.2
    trill = line([60, 62], [0.125], 16)
    assert is_trivial((2, -2, 2, -2)) and is_trivial((0, 0, 0, 0)) and not is_trivial((2, 2, -4, 7))
    assert motif_score(trill) == 0.0
    assert seed_motif(SEED) == {(2, 2, -4, 7), (2, -4, 7, -2), (-4, 7, -2, -5), (7, -2, -5, 2), (-2, -5, 2, 2),
                                (-5, 2, 2, -4)}
    no_repeat = line(OTHER, IOIS, 1)
    assert seed_motif(no_repeat, size=3) == {(1, 3, -1), (3, -1, 6)}  # no repeat: every n-gram stands in


def test_summary_band():
    s = summarise([{"m": [0.0, 1.0]}, {"m": [1.0, 1.0]}])["m"]
    assert s["mean"] == [0.5, 1.0] and s["hi"][1] == s["lo"][1] == 1.0
    assert s["hi"][0] - s["mean"][0] == pytest.approx(1.96 * np.sqrt(0.5) / np.sqrt(2))
    assert window_edges(12.0, 5.0) == [(0.0, 5.0), (5.0, 10.0), (10.0, 12.0)]


@pytest.fixture(name="motif_split")
def fixture_motif_split(tmp_path):
    """Four pieces of 20 s or more: random music; the motif at the opening (two performances of one work,
    the second transposed); the motif only from 10 s on."""
    tok, rng = EventTokenizer(), np.random.default_rng(1)
    pieces = {"w1/random.mid": random_notes(rng, 21.0),
              "w2/perf_a.mid": Notes.concat([SEED, random_notes(rng, 13.0, t0=8.0)]),
              "w2/perf_b.mid": Notes.concat([line(MOTIF, IOIS, 4, transpose=2), random_notes(rng, 13.0, t0=8.0)]),
              "late.mid": Notes.concat([random_notes(rng, 9.5), line(MOTIF, IOIS, 6, t0=10.0)])}
    ids = [np.append(tok.encode_notes(n), tok.eos_id) for n in pieces.values()]
    write_split(tmp_path, "test", ids, list(pieces))
    return TokenArrays(tmp_path, "test"), tok


def test_seed_picker_prefers_a_repeating_motif(motif_split):
    arrays, tok = motif_split
    picked = pick_motif_seeds(arrays, tok, 4, seed_seconds=8.0, length_seconds=10.0)
    assert [m.name for m in picked[:2]] == ["w2/perf_a.mid", "w2/perf_b.mid"]
    assert picked[0].score == picked[1].score == 1.0 and picked[-1].score < 0.3
    assert len(picked[0].seed.ids) < len(picked[0].ids)  # the real continuation follows the seed
    capped = pick_motif_seeds(arrays, tok, 2, 8.0, 10.0, max_per_group=1)
    assert capped[0].name == "w2/perf_a.mid" and capped[1].name != "w2/perf_b.mid"
    strided = pick_motif_seeds(arrays, tok, 2, 8.0, 2.0, stride_seconds=5.0, max_per_group=1)
    assert [m.name for m in strided] == ["w2/perf_a.mid", "late.mid@10s"] and strided[1].score == 1.0
    late = strided[1]
    assert motif_score(tok.decode_notes(late.seed.ids)) == 1.0  # re-encoded from 10 s: starts on the motif
    real = late.real_after(tok, 2.0)  # 18-20 s of the piece: the motif's fifth cycle
    assert real.pitch.tolist() == MOTIF and real.start[0] == 0.0


def motif_config(checkpoint, data_dir, **motif):
    return evaluation_options(checkpoint=str(checkpoint), data={"dir": str(data_dir)}, progress=False, mode="motif",
                             motif={"max_tokens": 120, "min_score": 0.0, **motif})  # tiny pieces, few repeats


def check_curves(res: dict, windows: int, sources: tuple[str, ...]) -> None:
    assert set(res["curves"]) == set(sources)
    for curves in res["curves"].values():
        for key in ("motif_reuse", "motif_reuse_rhythm", "motif_reuse_near", "pitch_class_tv", "ioi_tv"):
            c = curves[key]
            assert len(c["mean"]) == len(c["lo"]) == len(c["hi"]) == windows
            assert all(0 <= m <= 1 for m in c["mean"]) and all(np.less_equal(c["lo"], c["hi"]))


def test_motif_mode_end_to_end(tiny_checkpoint, prepared_dir, tmp_path):
    cfg = motif_config(tiny_checkpoint, prepared_dir, num_seeds=2, seed_seconds=1.5, length_seconds=1.5,
                       window_seconds=0.5, ngram=3)
    result = run_evaluation(cfg)
    res = result["motif"]
    assert res["samples"] == len(res["seeds"]) == len(res["motif_scores"]) >= 1
    assert res["windows"] == [[0.0, 0.5], [0.5, 1.0], [1.0, 1.5]]
    check_curves(res, 3, ("continuation", "real", "unconditioned"))
    assert res["context"] == 32 and res["share_past_context"] == 1.0  # the seed alone overflows 32 tokens
    write_result(result, tmp_path)
    assert (tmp_path / "forgetting_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "metrics.json").read_text())["motif"]["ngram"] == 3
    table = format_table(result)
    assert "Motif memory" in table and "| 1-1.5 |" in table


def test_motif_mode_with_a_seed_file_and_a_multi_model_plot(tiny_checkpoint, prepared_dir, tmp_path, capsys):
    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(program=0)
    notes = line(MOTIF, IOIS, 5)  # 10 s: 4 s of seed, 4 s of ceiling, 2 s more
    inst.notes = [pretty_midi.Note(velocity=80, pitch=int(p), start=float(s), end=float(e))
                  for s, e, p in zip(notes.start, notes.end, notes.pitch, strict=True)]
    pm.instruments.append(inst)
    pm.write(str(tmp_path / "motif.mid"))
    cfg = motif_config(tiny_checkpoint, prepared_dir, seed_midi=str(tmp_path / "motif.mid"), num_seeds=2,
                       seed_seconds=4.0, length_seconds=4.0, window_seconds=2.0)
    result = run_evaluation(cfg)
    res = result["motif"]
    assert res["seeds"] == ["motif.mid"] and res["samples"] == 2 and res["motif_scores"] == [1.0]
    check_curves(res, 2, ("continuation", "real", "unconditioned"))
    assert res["curves"]["real"]["motif_reuse"]["mean"] == [1.0, 1.0]  # the file goes on with the motif
    # the stored ids are what was measured: the curve comes back from them without sampling again
    net, tok, _ = load_model(str(tiny_checkpoint))
    seed = seed_from_file(tok, str(tmp_path / "motif.mid"), 4.0, 4.0)
    rows = [window_curve(tok.decode_notes(seed.seed.ids), piece_notes(tok, seed.seed, np.asarray(ids), False),
                         [tuple(w) for w in res["windows"]], res["ngram"])
            for ids in res["sample_ids"]["continuation"]]
    assert len(rows) == 2 and summarise(rows)["pitch_class_tv"]["mean"] == res["curves"]["continuation"][
        "pitch_class_tv"]["mean"]
    for name in ("a", "b"):
        write_result(result, tmp_path / name)
    main([str(tmp_path / "both.png"), str(tmp_path / "a" / "metrics.json"), str(tmp_path / "b" / "metrics.json"),
          "--labels", "A", "B"])
    assert (tmp_path / "both.png").read_bytes()[:4] == b"\x89PNG"
    drawn = (tmp_path / "both.png").read_bytes()
    a, b = (str(tmp_path / n / "metrics.json") for n in ("a", "b"))
    # the figure there is refused naming --overwrite (it had advised overwrite=true, which the command lacks)
    for argv, said in (([str(tmp_path / "both.png"), a, b], "pass --overwrite to replace it"),
                       ([str(tmp_path / "c.png"), a, b, "--labels", "A"], r"--labels gives 1 name\(s\) for 2"),
                       ([str(tmp_path / "c.txt"), a], r"c\.txt: not a figure's name \(give it \.png"),
                       ([str(tmp_path / "no" / "c.png"), a], r"c\.png: its folder .*no does not exist")):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 1 and re.search(said, capsys.readouterr().err), argv
    assert (tmp_path / "both.png").read_bytes() == drawn and not (tmp_path / "c.png").exists()
    main([str(tmp_path / "both.png"), a, "--overwrite"])
    assert (tmp_path / "both.png").read_bytes() != drawn
