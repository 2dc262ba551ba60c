"""MIDI -> WAV, with FluidSynth when the machine has it and with a pip-installed renderer when it does not.

Two renderers, chosen in this order by `choose_renderer` (``engine="auto"``):

1. **FluidSynth** (the ``fluidsynth`` command and a General MIDI soundfont, e.g. Debian's
   ``apt-get install fluidsynth fluid-soundfont-gm``): the reference synthesiser, used whenever present.
2. **midirenderer** (``pip install 'musictx[audio]'``): a self-contained wheel of `rustysynth`, a Rust
   SoundFont synthesiser, for Linux x86-64, macOS arm64 and Windows, with no system library. It plays the
   small General MIDI soundfont ``TimGM6mb.sf2`` that pretty_midi (already a dependency) ships inside its
   package, so a machine with only Python and PyPI writes WAV files.

Why midirenderer and not the other pip routes:

- ``tinysoundfont`` renders well and needs no system library either, but its wheel declares ``pyaudio``
  as a dependency (used only for live playback), and pyaudio has no Linux wheel: it builds from source
  against the system PortAudio headers, so ``pip install tinysoundfont`` fails on a fresh Linux machine.
  An extra cannot say ``--no-deps``; only a separate hand-written install step could, which users of
  ``pip install musictx[audio]`` would not get.
- ``pyfluidsynth``, ``midi2audio`` and ``pretty_midi.PrettyMIDI.fluidsynth`` all load the system
  libfluidsynth or call the binary: nothing gained over (1).
- A reader of the soundfont's piano samples written here would work, but it would be a second synthesiser
  to maintain (zones, loops, envelopes) for what a maintained one already does.

Both synthesisers stop at the file's last event, which is usually the last note-off: the release of the
last notes would be cut off. So `render_wav` plays a copy of the file with one more event, a sustain-pedal
release ``tail`` seconds (`RELEASE_TAIL_SECONDS`) after the last note event (`with_release_tail`); the WAV
lasts `rendered_seconds`. The MIDI file itself is left as it is.

midirenderer always renders 48 kHz stereo; here its output is resampled to ``sample_rate`` (linear
interpolation), scaled so that its peak is ``gain`` of full scale (its renders of TimGM6mb are quiet, about
-27 dBFS), and faded out over the last 20 ms so that the cut does not click.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
import wave
from pathlib import Path

import numpy as np

from musictx.io.midi_timing import MAX_TPQ, MidiTiming

DEFAULT_SOUNDFONT = "/usr/share/sounds/sf2/FluidR3_GM.sf2"
# Looked for, in order, when no soundfont is given: Debian's fluid-soundfont-gm, Debian's default-GM
# alternative (any installed GM soundfont), and the Fedora / Arch locations.
SOUNDFONT_CANDIDATES = (DEFAULT_SOUNDFONT, "/usr/share/sounds/sf2/default-GM.sf2",
                        "/usr/share/soundfonts/default.sf2", "/usr/share/soundfonts/FluidR3_GM.sf2")
ENGINES = ("auto", "fluidsynth", "midirenderer")
FADE_SECONDS = 0.02
RELEASE_TAIL_SECONDS = 1.5  # rendered after the last note ends: a piano's release, and a breath of room


class AudioRenderError(RuntimeError):
    """No renderer can run, or the one chosen failed to produce the WAV file."""


def find_soundfont(soundfont: str | os.PathLike | None = None) -> Path | None:
    """``soundfont`` if given and present; with None, the first of SOUNDFONT_CANDIDATES that exists."""
    if soundfont is not None:
        return Path(soundfont) if Path(soundfont).is_file() else None
    return next((Path(c) for c in SOUNDFONT_CANDIDATES if Path(c).is_file()), None)


def bundled_soundfont() -> Path | None:
    """pretty_midi's own General MIDI soundfont (``TimGM6mb.sf2`` inside the installed package)."""
    import pretty_midi

    path = Path(pretty_midi.__file__).resolve().parent / "TimGM6mb.sf2"
    return path if path.is_file() else None


def _midirenderer_missing() -> str | None:
    try:
        import midirenderer  # noqa: F401
    except ImportError:
        return "the midirenderer package is not installed (pip install 'musictx[audio]')"
    return None


def choose_renderer(soundfont: str | os.PathLike | None = None, engine: str = "auto") -> tuple[str, Path]:
    """(engine name, soundfont path) that `render_wav` will use; AudioRenderError names what is missing.

    ``auto``: FluidSynth when its binary and a soundfont (``soundfont`` or a system GM one) are present,
    else midirenderer with ``soundfont`` or pretty_midi's bundled one.
    """
    if engine not in ENGINES:
        raise AudioRenderError(f"audio engine must be one of {ENGINES}, got {engine!r}")
    if soundfont is not None and find_soundfont(soundfont) is None:
        raise AudioRenderError(f"soundfont {soundfont} not found (pass an existing .sf2 file)")
    reasons = []
    if engine in ("auto", "fluidsynth"):
        font = find_soundfont(soundfont)
        if shutil.which("fluidsynth") is None:
            reasons.append("no `fluidsynth` binary on PATH (apt-get install fluidsynth fluid-soundfont-gm)")
        elif font is None:
            reasons.append(f"no system GM soundfont ({' or '.join(SOUNDFONT_CANDIDATES[:2])}; "
                           "apt-get install fluid-soundfont-gm, or pass soundfont=<file.sf2>)")
        else:
            return "fluidsynth", font
    if engine in ("auto", "midirenderer"):
        font = find_soundfont(soundfont) if soundfont is not None else bundled_soundfont()
        missing = _midirenderer_missing()
        if missing is not None:
            reasons.append(missing)
        elif font is None:
            reasons.append("pretty_midi's TimGM6mb.sf2 is missing from its package (pass soundfont=<file.sf2>)")
        else:
            return "midirenderer", font
    raise AudioRenderError("; ".join(reasons))


def audio_unavailable(soundfont: str | os.PathLike | None = None, engine: str = "auto") -> str | None:
    """None when `render_wav` can run; else a one-line reason naming what is missing."""
    try:
        choose_renderer(soundfont, engine)
    except AudioRenderError as err:
        return str(err)
    return None


def render_wav(midi_path: str | os.PathLike, wav_path: str | os.PathLike, soundfont: str | os.PathLike | None = None,
               sample_rate: int = 44100, gain: float = 0.8, timeout: float = 300, engine: str = "auto",
               tail: float = RELEASE_TAIL_SECONDS) -> Path:
    """Render ``midi_path`` to a 16-bit stereo WAV at ``wav_path`` (no audio device used), ``tail`` seconds
    past the last note (`rendered_seconds`).

    ``soundfont`` None: a system GM soundfont for FluidSynth, pretty_midi's for midirenderer. ``gain``:
    FluidSynth's synth gain; for midirenderer the peak level as a fraction of full scale.
    """
    name, font = choose_renderer(soundfont, engine)
    data = with_release_tail(midi_path, tail)
    if name == "fluidsynth":
        return _render_fluidsynth(midi_path, data, wav_path, font, sample_rate, gain, timeout)
    return _render_midirenderer(midi_path, data, wav_path, font, sample_rate, gain)


def _load_midi(midi_path):
    import mido

    try:
        midi = mido.MidiFile(str(midi_path))
    except Exception as err:  # mido raises OSError, EOFError, ValueError, KeyError... on broken files
        raise AudioRenderError(f"cannot render {midi_path}: unreadable MIDI ({type(err).__name__}: {err})") from None
    if not 0 < midi.ticks_per_beat <= MAX_TPQ:  # SMPTE-timed files read as a huge count
        raise AudioRenderError(f"cannot render {midi_path}: not timed in ticks per quarter note")
    return midi


def _tail_end(midi, tail: float) -> tuple[int, float]:
    """(tick, seconds) where the render of ``midi`` (a mido.MidiFile) ends: ``tail`` seconds after its last
    note event, or at its last event if that comes later (a synthesiser plays up to its last event)."""
    tempos, note_tick, last_tick = [], 0, 0
    for track in midi.tracks:
        tick = 0
        for msg in track:
            tick += msg.time
            if msg.type == "set_tempo":
                tempos.append((tick, msg.tempo))
            elif msg.type in ("note_on", "note_off"):
                note_tick = max(note_tick, tick)
        last_tick = max(last_tick, tick)
    timing = MidiTiming.from_events(midi.ticks_per_beat, tempos)
    end = max(int(timing.ticks(timing.seconds(note_tick) + tail)), last_tick)
    return end, float(timing.seconds(end))


def rendered_seconds(midi_path: str | os.PathLike, tail: float = RELEASE_TAIL_SECONDS) -> float:
    """How long `render_wav`'s WAV of ``midi_path`` lasts: until ``tail`` seconds after the last note ends
    (or until the file's last event, if later)."""
    return _tail_end(_load_midi(midi_path), tail)[1]


def with_release_tail(midi_path: str | os.PathLike, tail: float = RELEASE_TAIL_SECONDS) -> bytes:
    """The bytes of ``midi_path`` with a track added that holds one sustain-pedal release (a no-op once
    every note has ended) at the end of the tail: the event that keeps a synthesiser playing until then."""
    import mido

    midi = _load_midi(midi_path)
    end, _ = _tail_end(midi, tail)
    midi.tracks.append(mido.MidiTrack([mido.Message("control_change", control=64, value=0, time=end),
                                       mido.MetaMessage("end_of_track", time=0)]))
    midi.type = max(midi.type, 1)  # a type-0 file holds one track
    out = io.BytesIO()
    midi.save(file=out)
    return out.getvalue()


def _render_fluidsynth(midi_path, data: bytes, wav_path, soundfont: Path, sample_rate: int, gain: float,
                       timeout: float) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        played = Path(tmp) / "tail.mid"
        played.write_bytes(data)
        cmd = ["fluidsynth", "-ni", "-q", "-g", str(gain), "-r", str(sample_rate), "-F", str(wav_path), "-T", "wav",
               str(soundfont), str(played)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wav = Path(wav_path)
    if done.returncode != 0 or not wav.is_file() or wav.stat().st_size <= 44:  # 44 bytes: a bare WAV header
        raise AudioRenderError(f"fluidsynth failed on {midi_path} (exit {done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-500:]}")
    return wav


def _render_midirenderer(midi_path, data: bytes, wav_path, soundfont: Path, sample_rate: int, gain: float) -> Path:
    import midirenderer

    try:
        data = midirenderer.render_wave_from(soundfont.read_bytes(), data)
    except (RuntimeError, ValueError, OSError) as err:
        raise AudioRenderError(f"midirenderer failed on {midi_path}: {err}") from None
    except BaseException as err:  # a Rust panic arrives as pyo3's PanicException, a BaseException
        if type(err).__name__ != "PanicException":
            raise
        raise AudioRenderError(f"midirenderer failed on {midi_path}: {err}") from None
    rate, audio = read_wav(io.BytesIO(data))
    audio = _finish(resample(audio, rate, sample_rate), sample_rate, gain)
    write_wav(wav_path, audio, sample_rate)
    return Path(wav_path)


def _finish(audio: np.ndarray, sample_rate: int, peak: float) -> np.ndarray:
    """Scale to ``peak`` of full scale (silence stays silent) and fade out the last FADE_SECONDS."""
    top = float(np.abs(audio).max()) if audio.size else 0.0
    if top > 0:
        audio = audio * (peak / top)
    n = min(len(audio), int(FADE_SECONDS * sample_rate))
    if n:
        audio[-n:] *= np.linspace(1.0, 0.0, n, dtype=audio.dtype)[:, None]
    return audio


def resample(audio: np.ndarray, rate: int, new_rate: int) -> np.ndarray:
    """(N, C) float audio at ``rate`` -> at ``new_rate``, by linear interpolation per channel."""
    if rate == new_rate or len(audio) == 0:
        return audio
    n_out = max(1, round(len(audio) * new_rate / rate))
    t_in = np.arange(len(audio)) / rate
    t_out = np.arange(n_out) / new_rate
    return np.stack([np.interp(t_out, t_in, audio[:, c]) for c in range(audio.shape[1])], axis=1).astype(np.float32)


def read_wav(source) -> tuple[int, np.ndarray]:
    """(sample rate, (N, C) float32 in [-1, 1]) of a 16-bit PCM WAV file (a path or a binary file object)."""
    with wave.open(source if not isinstance(source, (str, os.PathLike)) else str(source), "rb") as w:
        if w.getsampwidth() != 2:
            raise AudioRenderError(f"expected 16-bit PCM WAV, got {8 * w.getsampwidth()}-bit")
        frames = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return w.getframerate(), frames.reshape(-1, w.getnchannels()).astype(np.float32) / 32768.0


def write_wav(path: str | os.PathLike, audio: np.ndarray, sample_rate: int) -> Path:
    """Write (N, C) float audio in [-1, 1] as a 16-bit PCM WAV file."""
    pcm = (np.clip(audio, -1.0, 1.0) * 32767).round().astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(pcm.shape[1])
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())
    return Path(path)


def wav_beside(midi: Path, soundfont: str | None) -> str | None:
    """Render ``midi`` to the .wav beside it; its name, or None (said in one line) when rendering fails."""
    try:
        return render_wav(midi, midi.with_suffix(".wav"), soundfont).name
    except AudioRenderError as err:
        print(f"audio skipped for {midi.stem}: {err}")
        return None
