"""A musician continuing their own scores, exported from notation (music21 here): what the run makes of them.

- a meter the metrical tokens do not hold (a reel in cut time 2/2 after its pickup bar, a hymn in 3/2) is read as
  meters they hold that cover the same bars, said in one line, and the continuation is written in the file's own
  meter: MidiTok dropped it unsaid, so the tokens' bars were not the file's, the seed was cut bars away from where
  its line said and the sample came back mangled ("10 bars (0.0 s) new", the seed's notes gone);
- the lyrics of a chorale's soprano are no fifth voice: symusic reads them as a second "Soprano" track with no notes,
  which took a part of its own (the model wrote a counter-melody into it, and the alto lost its part);
- the piano merges a chorale's voices into one stream: notes two voices strike on one key at once are played once,
  and its line says how many (it said "nothing dropped").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pretty_midi
import pytest

music21 = pytest.importorskip("music21", reason="the scores are made with music21 (the corpus extra)")

from musictx.checkpoints.model_store import load_pretrained  # noqa: E402
from musictx.generation.continue_midi import run  # noqa: E402
from musictx.generation.generate_options import GenerateOptions  # noqa: E402
from musictx.io.held_meters import held_as  # noqa: E402
from musictx.io.seed_tracks import track_merge  # noqa: E402
from musictx.tasks.metrical_score import continuation_score  # noqa: E402
from musictx.tasks.metrical_seeds import metrical_seed  # noqa: E402

REEL_BAR = "b8 g8 f#8 d8 e8 d8 c8 e8 d8 g8 g8 f#8 g8 a8 b8 c'8 "
REEL = "tinyNotation: 1/4 d'8 c'8 2/2 " + REEL_BAR * 4 + "d'8 e'8 d'8 c'8 b8 a8 g8 f#8 g2 g2"  # pickup, 10 bars
HYMN = "tinyNotation: 3/2 f2 a2 c'2 b-2 a2 g2 a2 f2 g2 a1. c'2 b-2 a2 g2 a2 b-2 a2 g2 f2 f1."  # 6 bars of 3/2
HELD = {4: [1, 2, 3, 4, 5, 6, 7], 8: [3, 5, 6, 7, 9, 12]}  # the shipped tokenizers' meters


@pytest.fixture(scope="module")
def pop_tok():
    return load_pretrained("pop")[1]


def _tiny(path: Path, text: str, bpm: float) -> Path:
    score = music21.converter.parse(text)
    score.insert(0, music21.tempo.MetronomeMark(number=bpm))
    score.write("midi", fp=str(path))
    return path


def test_meters_the_tokens_do_not_hold_are_read_as_bars_they_do():
    assert held_as(2, 2, HELD) == [(4, 4)] and held_as(3, 2, HELD) == [(6, 4)]  # the same bars
    assert held_as(4, 8, HELD) == [(2, 4)] and held_as(12, 16, HELD) == [(6, 8)]
    assert held_as(4, 2, HELD) == [(4, 4), (4, 4)] and held_as(9, 4, HELD) == [(5, 4), (4, 4)]  # split
    assert held_as(11, 8, HELD) == [(6, 8), (5, 8)]
    assert held_as(7, 16, HELD) == [(-2, 0), (7, 8)]  # two bars as one
    assert held_as(6, 8, HELD) == [(6, 8)] and held_as(5, 4, HELD) == [(5, 4)]  # held: as they are


@pytest.mark.parametrize("text, bpm, meters, said", [
    (REEL, 200, [(1, 4), (2, 2)], "2/2 read as 4/4, the same bars (written back as 2/2)"),
    (HYMN, 120, [(3, 2)], "3/2 read as 6/4, the same bars (written back as 3/2)"),
])
def test_a_seed_in_a_meter_the_tokens_lack_is_cut_at_its_own_bars(tmp_path, pop_tok, text, bpm, meters, said):
    path = _tiny(tmp_path / "tune.mid", text, bpm)
    given = pretty_midi.PrettyMIDI(str(path))
    notes = sum(len(i.notes) for i in given.instruments)
    seed = metrical_seed(pop_tok, path)
    bars = int(np.sum(given.get_downbeats() < given.get_end_time() - 0.01))  # the file's own bars, as a DAW has them
    assert seed.bars == bars and int((seed.ids == pop_tok.bar_id).sum()) == bars  # the tokens' bars are the file's
    assert seed.seconds == pytest.approx(given.get_end_time(), abs=0.01)  # all of it, not a third or two thirds
    pitches = [i for i in seed.ids.tolist() if pop_tok.id_to_token(i).startswith("Pitch_")]
    assert len(pitches) == notes  # every note of the file in the seed
    assert said in seed.meter_found
    written = continuation_score(pop_tok, seed, np.zeros(0, dtype=np.int64))
    assert [(s.numerator, s.denominator) for s in written.time_signatures] == meters  # the file's own meter


def test_a_reel_in_cut_time_is_continued_on_its_own_bars(tmp_path, capsys):
    path = _tiny(tmp_path / "reel.mid", REEL, 200)
    record = run(GenerateOptions(seed_midi=str(path), output_dir=str(tmp_path / "out"), num_samples=1, best_of=1,
                                 seed=0, length_bars=2, audio=False, progress_every_s=None))
    out = capsys.readouterr().out
    assert "meter: reel.mid: 2/2 read as 4/4, the same bars (written back as 2/2)" in out
    assert "seed: bars 1-11 of" in out  # the pickup and 10 bars of 2/2 (it said bars 1-11 and kept 11 beats)
    sample = pretty_midi.PrettyMIDI(str(tmp_path / "out" / record["samples"][0]["midi"]))
    assert [(s.numerator, s.denominator) for s in sample.time_signature_changes] == [(1, 4), (2, 2)]
    file = pretty_midi.PrettyMIDI(str(path))
    given = sorted((round(n.start, 2), n.pitch) for i in file.instruments for n in i.notes)
    end = file.get_end_time() - 0.01
    kept = sorted((round(n.start, 2), n.pitch) for i in sample.instruments for n in i.notes if n.start < end)
    assert kept == given  # the seed as written
    assert record["samples"][0]["new_seconds"] > 2.0  # two bars of 2/2 at 200 bpm: 2.4 s (it said 0.0 s)


def _chorale(path: Path, lyrics: bool) -> Path:
    """Four named voices, two bars of 4/4; the tenor and bass sing one A3 together on beat 1, the soprano has
    words."""
    voices = {"Soprano": "c'4 b4 a4 g4 a1", "Alto": "e4 e4 e4 d4 e1", "Tenor": "A4 G4 c4 B4 c1",
              "Bass": "A4 E4 AA4 BB4 AA1"}
    score = music21.stream.Score()
    for name, line in voices.items():
        part = music21.converter.parse("tinyNotation: 4/4 " + line)
        part.partName = name
        part.getElementsByClass("Measure")[0].insert(0, music21.instrument.Instrument(name))
        if lyrics and name == "Soprano":
            for note, word in zip(part.recurse().notes, ["Al", "le", "lu", "i", "a"], strict=True):
                note.lyric = word
        score.insert(0, part)
    score.write("midi", fp=str(path))
    return path


def test_a_chorales_lyrics_are_no_fifth_voice(tmp_path, pop_tok):
    path = _chorale(tmp_path / "chorale.mid", lyrics=True)
    seed = metrical_seed(pop_tok, path, learnt=(80, 81, 0))
    assert [t.name for t in seed.tracks.tracks] == ["Soprano", "Alto", "Tenor", "Bass"]  # Soprano came twice
    assert seed.parts.played_as.get("Alto (program 0)") == "BRIDGE"  # as without words (the copy took BRIDGE)
    plain = metrical_seed(pop_tok, _chorale(tmp_path / "plain.mid", lyrics=False), learnt=(80, 81, 0))
    assert np.array_equal(seed.ids, plain.ids)


def test_the_pianos_line_says_the_unisons_it_plays_once(tmp_path):
    path = _chorale(tmp_path / "chorale.mid", lyrics=False)
    piano = load_pretrained("piano")[1]
    merge = track_merge(piano, path)
    assert merge.unisons == 1  # the tenor's and the bass's A3
    assert merge.line() == ("chorale.mid: merged 4 tracks (Soprano, Alto, Tenor, Bass; 20 notes) into one piano "
                            "stream; 1 note struck with another on the same key at once (voices in unison) played once")
    assert track_merge(piano, _tiny(tmp_path / "hymn.mid", HYMN, 120)).line().endswith("; nothing dropped")
