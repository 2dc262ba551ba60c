"""Issue 39, case 11: audio in bounded memory. The pip renderer renders a long piece a chunk at a time
(`musictx.io.audio_chunks`); a chunked render sounds like the whole one (their loudness envelopes agree), and
a 20-minute piece renders in a process that stays under 500 MB of resident memory (3.5 GB before)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pretty_midi
import pytest

from musictx.io import audio
from musictx.io.audio_chunks import render_chunked
from musictx.io.wav_io import MAX_AUDIO_SECONDS, AudioRenderError, read_wav

pytestmark = pytest.mark.skipif(audio._midirenderer_missing() is not None,
                                reason="midirenderer not installed (pip install 'musictx[audio]')")


def pedalled_piece(path, seconds: float, seed: int = 0):
    """Three notes every quarter second with the sustain pedal down every other 2 s: long releases cross
    every chunk boundary."""
    rng = np.random.default_rng(seed)
    pm = pretty_midi.PrettyMIDI()
    piano = pretty_midi.Instrument(program=0)
    for t in np.arange(0.0, seconds, 0.25):
        for _ in range(3):
            start = float(t)
            piano.notes.append(pretty_midi.Note(int(rng.integers(40, 100)), int(rng.integers(40, 90)), start,
                                                start + 0.4 + float(rng.random())))
    piano.control_changes += [pretty_midi.ControlChange(64, 127 if k % 2 == 0 else 0, 2.0 * k)
                              for k in range(int(seconds // 2))]
    pm.instruments.append(piano)
    pm.write(str(path))
    return path


def envelope(x: np.ndarray, rate: int) -> np.ndarray:
    """RMS loudness per 100 ms of the left channel."""
    hop = rate // 10
    n = len(x) // hop * hop
    return np.sqrt(np.mean(x[:n, 0].reshape(-1, hop) ** 2, axis=1))


def test_a_chunked_render_sounds_like_the_whole_render(tmp_path):
    piece = pedalled_piece(tmp_path / "p.mid", 130.0)
    data = audio.with_release_tail(piece)
    font = audio.bundled_soundfont().read_bytes()

    def synth(midi_bytes):
        import midirenderer

        return midirenderer.render_wave_from(font, midi_bytes)

    render_chunked(synth, data, tmp_path / "whole.wav", 44100, 0.8, chunk_seconds=1e9)
    render_chunked(synth, data, tmp_path / "chunked.wav", 44100, 0.8, chunk_seconds=50.0)  # cuts at 50 and 100 s
    rate, whole = read_wav(tmp_path / "whole.wav")
    _, chunked = read_wav(tmp_path / "chunked.wav")
    assert rate == 44100 and whole.shape == chunked.shape
    assert np.abs(chunked).max() == pytest.approx(0.8, abs=0.01)  # one peak level over the whole piece
    a, b = envelope(whole, rate), envelope(chunked, rate)
    assert np.corrcoef(a, b)[0, 1] > 0.97
    assert np.abs(a - b).mean() / a.mean() < 0.08
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chunked.wav", "p.mid", "whole.wav"]  # no temporaries


def test_audio_longer_than_the_bound_is_refused(tmp_path):
    pm = pretty_midi.PrettyMIDI()
    pm.instruments.append(pretty_midi.Instrument(program=0))
    pm.instruments[0].notes.append(pretty_midi.Note(80, 60, MAX_AUDIO_SECONDS + 10, MAX_AUDIO_SECONDS + 11))
    pm.write(str(tmp_path / "long.mid"))
    with pytest.raises(AudioRenderError, match=rf"long.mid lasts \d+ s, longer than the {MAX_AUDIO_SECONDS:g} s"):
        audio.render_wav(tmp_path / "long.mid", tmp_path / "long.wav", engine="midirenderer")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.mid"]


@pytest.mark.slow  # about 45 s on one core: a 20-minute render
def test_a_20_minute_piece_renders_under_500_mb(tmp_path):
    piece = pedalled_piece(tmp_path / "long.mid", 1200.0)
    script = textwrap.dedent(f"""
        import resource
        from musictx.io import audio
        wav = audio.render_wav({str(piece)!r}, {str(tmp_path / "long.wav")!r}, engine="midirenderer")
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    peak_mb = int(done.stdout.split()[-1])
    rate, x = audio.read_wav(tmp_path / "long.wav")
    assert len(x) / rate == pytest.approx(audio.rendered_seconds(piece), abs=0.05)
    assert peak_mb < 500, f"peak RSS {peak_mb} MB"
