"""The meter a song is read in, said where it is not the file's own: POP909's beat file over a file's 2/4 (songs
001-010), and a triple meter found from the music read as POP909's beat files mark it (6/4), on real songs."""

from __future__ import annotations

import shutil

from symusic import Score

from musictx.io.metrical_tokenizer import MetricalTokenizer
from musictx.io.score_prep import read_meter

from .test_metrical import POP, needs_pop


def _meter(read) -> tuple[int, int]:
    sig = read.score.time_signatures[0]
    return sig.numerator, sig.denominator


@needs_pop
def test_a_beat_file_over_a_files_own_meter_is_said():
    """003.mid says 2/4, its beat_midi.txt 4/4: read as 4/4, said in one line; 014 says 1/4 (no meter) and 032 says
    4/4 as its beat file does: nothing to say."""
    tok = MetricalTokenizer()
    read = tok.read(POP / "003" / "003.mid")
    assert _meter(read) == (4, 4)
    assert read.meter_found.startswith("003.mid says 2/4, but the beat_midi.txt beside it marks a downbeat every 4 "
                                       "beats: its bars are read as 4/4")
    assert tok.read(POP / "043" / "043.mid").meter_found.startswith("043.mid says 4/4 and 2/4, but")
    for song in ("014", "032"):
        assert tok.read(POP / song / f"{song}.mid").meter_found is None


@needs_pop
def test_a_continuation_of_a_2_4_file_says_why_it_is_written_in_4_4(tmp_path, capsys):
    from musictx.generation.continue_midi import run
    from musictx.generation.generate_options import GenerateOptions

    record = run(GenerateOptions(seed_midi=str(POP / "003" / "003.mid"), seed_seconds=8, length_bars=1, num_samples=1,
                                 audio=False, best_of=1, output_dir=str(tmp_path / "out")))
    out = capsys.readouterr().out
    assert "meter: 003.mid says 2/4, but the beat_midi.txt beside it marks a downbeat every 4 beats" in out
    made = Score(str(tmp_path / "out" / record["samples"][0]["midi"]))
    assert [(t.numerator, t.denominator) for t in made.time_signatures] == [(4, 4)]


@needs_pop
def test_a_triple_meter_found_from_the_music_is_read_as_the_beat_file_has_it(tmp_path):
    """034 without its beat file read as 3/4 (a bar the model never learnt); its beat file says 6/4: now 6/4, the
    downbeat where the beat file has it, said in the meter line."""
    tok = MetricalTokenizer()
    alone = tmp_path / "034.mid"
    shutil.copy(POP / "034" / "034.mid", alone)
    read = tok.read(alone)
    truth = read_meter(POP / "034" / "beat_midi.txt", Score(str(alone)))
    assert _meter(read) == (truth.beats_per_bar, 4) == (6, 4)
    assert abs(read.shift_ticks - tok.read(POP / "034" / "034.mid").shift_ticks) < read.score.ticks_per_quarter / 4
    assert "found from the music: 6/4 (its 3-beat bars paired" in read.meter_found
    assert _meter(tok.read(alone, 3)) == (3, 4)  # asked for: as asked
