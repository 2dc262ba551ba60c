"""Rolls a musician reads: each track in its own colour with a legend, the bars a model wrote shaded, and a
seed from a POP909 file's start that opens with music, not with the empty bars before its pickup."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import rgb_to_hsv
from matplotlib.image import imread
from symusic import Score

from musictx.io.metrical_tokenizer import MetricalTokenizer
from musictx.io.piano_roll import TRACK_COLOURS, piano_roll_figure, save_figure
from musictx.tasks.metrical_seeds import metrical_seed, pickup_notes
from musictx.tasks.take import score_roll

from .helpers import SHARED_DATA

POP = SHARED_DATA / "pop" / "POP909"
needs_pop = pytest.mark.skipif(not POP.is_dir(), reason=f"POP909 not found at {POP} (CI and dev machines only)")


def _hue_share(png, colour: str) -> float:
    """Share of the picture's saturated pixels whose hue is that of ``colour``."""
    rgb = imread(png)[..., :3]
    hsv = rgb_to_hsv(rgb.reshape(-1, 3))
    target = rgb_to_hsv(np.array([[int(colour[k:k + 2], 16) / 255 for k in (1, 3, 5)]]))[0, 0]
    saturated = hsv[:, 1] > 0.35
    near = np.abs((hsv[:, 0] - target + 0.5) % 1.0 - 0.5) < 0.03
    return float((saturated & near).sum() / max(saturated.sum(), 1))


@needs_pop
def test_a_three_track_song_is_drawn_track_by_track_with_a_legend_and_its_written_bars_shaded(tmp_path):
    notes, counts, end, parts = score_roll(Score(str(POP / "001" / "001.mid")))
    assert [name for name, _ in parts] == ["MELODY", "BRIDGE", "PIANO"]
    assert sum(len(p) for _, p in parts) == len(notes) == sum(counts.values())
    fig = piano_roll_figure(notes, parts=parts, marked=(20.0, 30.0))
    ax = fig.axes[0]
    texts = [t.get_text() for legend in ax.findobj(lambda a: hasattr(a, "get_texts")) for t in legend.get_texts()]
    assert {f"{name} ({len(p)})" for name, p in parts} <= set(texts)
    assert any(t.startswith("written by the model, 20.0-30.0 s") for t in texts)
    assert ax.get_xlim() == (10.0, 40.0)  # the written bars with as much context each side, not the 194 s song
    preview = piano_roll_figure(notes, parts=parts, marked=(20.0, 30.0), marked_as="to be written by the model")
    said = [t.get_text() for t in preview.axes[0].get_legend().get_texts()]  # the app's preview: nothing written yet
    assert "to be written by the model, 20.0-30.0 s" in said and not any(t.startswith("written") for t in said)
    png = save_figure(fig, tmp_path / "roll.png")
    # each track's hue is really on the picture
    for k in range(3):
        assert _hue_share(png, TRACK_COLOURS[k]) > 0.02, k
    one = save_figure(piano_roll_figure(notes), tmp_path / "flat.png")  # without parts: the blues of before
    assert _hue_share(one, TRACK_COLOURS[1]) < 0.01


@needs_pop
@pytest.mark.parametrize("song", ["001", "002"])
def test_a_seed_from_the_start_of_a_pop909_file_opens_on_a_downbeat_with_music(song):
    tok = MetricalTokenizer()
    seed = metrical_seed(tok, POP / song / f"{song}.mid", seed_seconds=10)
    assert seed.origin_seconds >= 0  # no bar line before the file's start, no negative time to report
    onsets = np.array([n.time for t in seed.score.tracks for n in t.notes])
    bar = seed.lines[seed.first_bar + 1] - seed.lines[seed.first_bar]
    first = onsets[onsets >= seed.start_tick].min() - seed.start_tick
    assert first < bar / 2  # at most half a bar of silence before the seed's first note
    assert pickup_notes(seed) > 0  # these songs have a pickup, and the seed's line says it was left out
    later = metrical_seed(tok, POP / song / f"{song}.mid", seed_seconds=10, seed_from=20)
    # seed_from still picks the bar line nearest it
    assert later.origin_seconds == pytest.approx(20, abs=later.bar_seconds() / 2 + 0.01)


@needs_pop
def test_a_pop909_file_without_its_beat_file_gets_its_bars_from_the_music(tmp_path, capsys):
    from musictx.generation.continue_midi import run
    from musictx.generation.generate_options import GenerateOptions
    from musictx.io.score_prep import read_meter

    alone = tmp_path / "014.mid"  # says 1/4 throughout: read literally, each bar is one beat
    alone.write_bytes((POP / "014" / "014.mid").read_bytes())
    tok = MetricalTokenizer()
    read = tok.read(alone)
    truth = read_meter(POP / "014" / "beat_midi.txt", Score(str(alone)))
    sig = read.score.time_signatures[0]
    assert (sig.numerator, sig.denominator) == (truth.beats_per_bar, 4) and "found from the music" in read.meter_found
    assert abs(read.shift_ticks - tok.read(POP / "014" / "014.mid").shift_ticks) < read.score.ticks_per_quarter / 4
    opts = dict(seed_seconds=10, length_bars=4, num_samples=1, audio=False, seed=5)
    counts = []
    for k, path in enumerate((alone, POP / "014" / "014.mid")):  # the model is chosen: a band's tracks -> pop
        record = run(GenerateOptions(seed_midi=str(path), output_dir=str(tmp_path / f"out{k}"), **opts))
        counts.append(record["samples"][0]["notes"])
    out = capsys.readouterr().out
    assert "model: pop (a multi-track song" in out and "meter: 014.mid: its meter says one beat a bar" in out
    assert abs(counts[0] - counts[1]) <= 0.2 * counts[1]  # as dense as with the annotated bars, not 3x


@needs_pop
def test_seed_from_end_continues_a_file_from_where_it_stops(tmp_path, capsys):
    from musictx.decoding.errors import GenerateError
    from musictx.generation.continue_midi import run
    from musictx.generation.generate_options import GenerateOptions

    song = POP / "014" / "014.mid"
    record = run(GenerateOptions(seed_midi=str(song), seed_from="end", length_bars=2, num_samples=1, audio=False,
                                 output_dir=str(tmp_path / "out")))
    out = capsys.readouterr().out
    assert "seed_from=end: the last 10.0 s of" in out and "seed: bars 96-99" in out  # the song's last bars
    assert record["settings"]["seed_from"] == pytest.approx(178.9, abs=0.1)
    with pytest.raises(GenerateError, match="seed_from must be seconds into the seed file or end, got 'start'"):
        GenerateOptions(seed_midi=str(song), seed_from="start", output_dir=str(tmp_path / "o")).check()


@needs_pop
def test_beats_per_bar_reads_a_files_bars_as_asked_with_the_downbeat_from_the_music(tmp_path, capsys):
    from musictx.generation.continue_midi import run
    from musictx.generation.generate_options import GenerateOptions

    alone = tmp_path / "014.mid"  # says 1/4: without beats_per_bar its bars are found as 4/4 (above)
    alone.write_bytes((POP / "014" / "014.mid").read_bytes())
    record = run(GenerateOptions(seed_midi=str(alone), seed_seconds=8, length_bars=2, num_samples=1, audio=False,
                                 beats_per_bar=3, output_dir=str(tmp_path / "out")))
    assert "meter: 014.mid: 3 beats a bar, as asked; the first downbeat" in capsys.readouterr().out
    made = Score(str(tmp_path / "out" / record["samples"][0]["midi"]))
    assert [(t.numerator, t.denominator) for t in made.time_signatures] == [(3, 4)]
