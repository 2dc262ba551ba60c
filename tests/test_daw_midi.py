"""DAW-ready output MIDI: a seed's tempo map and time signature are written into what is generated from it
(read back with both mido and pretty_midi), its notes keep their seconds and land on the same beats, the cut,
the dropped leading silence and ``seed_from`` move the map with the notes, the track is named; unconditional output is
120 bpm in 4/4. The model is a tiny random net saved as a model folder (nothing is trained)."""

from __future__ import annotations

from pathlib import Path

import mido
import numpy as np
import pretty_midi
import pytest

from musictx.checkpoints.model_store import save_model_folder
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.midi_timing import MidiTiming, read_timing
from musictx.io.tokenizer import EventTokenizer

from . import midi_fixtures as mf
from .gen_fixtures import tiny_net

TPQ = mf.TPQ
BAR = 3 * TPQ  # ticks of a 3/4 bar
# The waltz's tempo map: 90 bpm, 120 from bar 3 (4.0 s), 60 from bar 5 (7.0 s).
TEMPI = [(0, 90.0), (2 * BAR, 120.0), (4 * BAR, 60.0)]
TEMPO_SECONDS = [0.0, 4.0, 7.0]


@pytest.fixture(name="model_dir", scope="module")
def fixture_model_dir(tmp_path_factory) -> Path:
    net = tiny_net("music_transformer", max_seq_len=64)
    return save_model_folder(net, EventTokenizer(), tmp_path_factory.mktemp("tiny_model"), dtype="float32")


def waltz(path: Path, lead_bars: int = 0) -> Path:
    """A 3/4 seed whose notes all sit on the tokenizer's 10 ms grid: every 0.5 s (0.75 of a beat at 90 bpm,
    a beat at 120, half a beat at 60) from 0 to 7.5 s, after ``lead_bars`` bars of silence (2 s each)."""
    lead = lead_bars * BAR
    conductor = [(0, mido.MetaMessage("time_signature", numerator=3, denominator=4))]
    conductor += [mf.tempo(lead * (tick > 0) + tick, bpm) for tick, bpm in TEMPI]
    note_ticks = [360 * k for k in range(8)] + [2 * BAR + 480 * k for k in range(6)] + [4 * BAR, 4 * BAR + 240]
    piano = []
    for i, tick in enumerate(note_ticks):
        piano += [mf.on(lead + tick, 60 + i % 12, 90), mf.off(lead + tick + 120, 60 + i % 12)]
    piano.sort(key=lambda e: e[0])
    return mf.write_midi(path, [conductor, piano])


def generate(model_dir: Path, out: Path, **kwargs) -> Path:
    base = dict(checkpoint=str(model_dir), output_dir=str(out), num_samples=1, length_seconds=2.0, seed=3,
                audio=False, threads=1)
    run(GenerateOptions(**{**base, **kwargs}))
    return out / "sample_00.mid"


def mido_timing(path: Path) -> tuple[list, list, list]:
    """([(beat, bpm)] of the tempo changes, [(beat, numerator, denominator)] of the time signatures,
    [(beat, track name)]) of a file, read with mido."""
    midi = mido.MidiFile(str(path))
    tempos, meters, names = [], [], []
    for track in midi.tracks:
        tick = 0
        for msg in track:
            tick += msg.time
            beat = tick / midi.ticks_per_beat
            if msg.type == "set_tempo":
                tempos.append((beat, round(mido.tempo2bpm(msg.tempo), 3)))
            elif msg.type == "time_signature":
                meters.append((beat, msg.numerator, msg.denominator))
            elif msg.type == "track_name":
                names.append(msg.name)
    return tempos, meters, names


def note_beats(path: Path) -> np.ndarray:
    """The beats (quarter notes) where the notes of a file start, read with mido."""
    midi = mido.MidiFile(str(path))
    ticks = []
    for track in midi.tracks:
        tick = 0
        for msg in track:
            tick += msg.time
            if msg.type == "note_on" and msg.velocity > 0:
                ticks.append(tick)
    return np.sort(np.array(ticks)) / midi.ticks_per_beat


@pytest.mark.parametrize("lead_bars", [0, 1])
def test_seed_tempo_map_metre_and_note_times_are_kept(model_dir, tmp_path, lead_bars):
    seed = waltz(tmp_path / "waltz.mid", lead_bars)
    out = generate(model_dir, tmp_path / "out", seed_midi=str(seed))
    lead = 2.0 * lead_bars  # seconds of silence before the first note, left out of the output

    tempos, meters, names = mido_timing(out)
    assert tempos == [(tick / TPQ, bpm) for tick, bpm in TEMPI]  # on the same beats as in the seed
    assert meters == [(0.0, 3, 4)]
    assert names == ["musictx continuation of waltz.mid"]

    pm, pm_seed = pretty_midi.PrettyMIDI(str(out)), pretty_midi.PrettyMIDI(str(seed))
    times, bpm = pm.get_tempo_changes()
    np.testing.assert_allclose(times, TEMPO_SECONDS, atol=1e-3)
    np.testing.assert_allclose(bpm, [b for _, b in TEMPI], atol=1e-3)
    assert [(s.numerator, s.denominator, s.time) for s in pm.time_signature_changes] == [(3, 4, 0.0)]
    assert len(pm.instruments) == 1 and pm.instruments[0].program == 0
    assert pm.instruments[0].name == "musictx continuation of waltz.mid"

    seed_starts = np.array([n.start for n in pm_seed.instruments[0].notes]) - lead
    starts = np.sort([n.start for n in pm.instruments[0].notes])
    seed_end = pm_seed.get_end_time() - lead
    np.testing.assert_allclose(starts[starts < seed_end - 1e-3], np.sort(seed_starts), atol=1e-3)
    seed_beats = note_beats(seed) - 3 * lead_bars
    np.testing.assert_allclose(note_beats(out)[: len(seed_beats)], seed_beats, atol=1e-3)


def test_cut_seed_keeps_the_tempo_before_the_cut(model_dir, tmp_path):
    seed = waltz(tmp_path / "waltz.mid", lead_bars=1)
    out = generate(model_dir, tmp_path / "cut", seed_midi=str(seed), seed_seconds=5.0, length_seconds=3.0)
    tempos, meters, _ = mido_timing(out)
    # the 60 bpm of the seed's 9 s (7 s from its first note) is past the cut: the continuation goes on at 120
    assert tempos == [(0.0, 90.0), (6.0, 120.0)] and meters == [(0.0, 3, 4)]

    alone = generate(model_dir, tmp_path / "alone", seed_midi=str(seed), seed_seconds=5.0, include_seed=False)
    tempos, meters, names = mido_timing(alone)
    assert tempos == [(0.0, 120.0)] and meters == [(0.0, 3, 4)] and names == ["musictx continuation of waltz.mid"]


def test_seed_from_takes_the_tempo_map_from_where_the_seed_starts(model_dir, tmp_path, capsys):
    seed = waltz(tmp_path / "waltz.mid")
    out = generate(model_dir, tmp_path / "out", seed_midi=str(seed), seed_from=3.8)
    # the first note from 3.8 s is bar 3's, at 4.0 s where 120 bpm starts; 60 bpm follows 3 s (6 beats) later
    assert "seed: starts at 4.00 s of the file, its first note at or after seed_from=3.8 s; 3.75 s of it kept" in \
        capsys.readouterr().out.splitlines()
    tempos, meters, _ = mido_timing(out)
    assert tempos == [(0.0, 120.0), (6.0, 60.0)] and meters == [(0.0, 3, 4)]
    pm_seed = pretty_midi.PrettyMIDI(str(seed))
    seed_starts = np.array([n.start for n in pm_seed.instruments[0].notes if n.start >= 3.8]) - 4.0
    starts = np.sort([n.start for n in pretty_midi.PrettyMIDI(str(out)).instruments[0].notes])
    np.testing.assert_allclose(starts[: len(seed_starts)], np.sort(seed_starts), atol=1e-3)
    np.testing.assert_allclose(note_beats(out)[: len(seed_starts)], note_beats(seed)[-len(seed_starts):] - 6.0,
                               atol=1e-3)


def test_unconditional_output_is_120_bpm_in_4_4(model_dir, tmp_path):
    out = generate(model_dir, tmp_path / "out")
    tempos, meters, names = mido_timing(out)
    assert tempos == [(0.0, 120.0)] and meters == [(0.0, 4, 4)] and names == ["musictx piano"]
    pm = pretty_midi.PrettyMIDI(str(out))
    times, bpm = pm.get_tempo_changes()
    assert times.tolist() == [0.0] and bpm.tolist() == [120.0]
    assert [(s.numerator, s.denominator, s.time) for s in pm.time_signature_changes] == [(4, 4, 0.0)]
    assert pm.instruments[0].name == "musictx piano" and pm.instruments[0].program == 0


def test_window_moves_the_map_to_the_first_note(tmp_path):
    timing = read_timing(waltz(tmp_path / "waltz.mid"))
    assert [(t.tick, round(t.bpm, 3)) for t in timing.tempos] == [(tick, bpm) for tick, bpm in TEMPI]
    at = timing.seconds([t.tick for t in timing.tempos])
    np.testing.assert_allclose(at, TEMPO_SECONDS, atol=1e-5)  # 90 bpm is 666667 us a beat: 4.000002 s
    pickup = timing.window(1.0, 6.0)  # from 1.5 beats into bar 1 (a pickup) to before the 60 bpm change
    assert pickup.tpq == 960 and [(t.tick, round(t.bpm, 3)) for t in pickup.tempos] == [(0, 90.0), (4320, 120.0)]
    assert pickup.meters == ((0, 3, 4),)
    seconds = np.array([0.0, 0.5, 2.99, 3.0, 4.25])  # the output's seconds are kept, through both tempi,
    np.testing.assert_allclose(pickup.seconds(pickup.ticks(seconds)), seconds, atol=0.35e-3)  # to half a tick
    assert MidiTiming().window(3.0).tempos == MidiTiming().tempos
