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

Either synthesiser's audio then passes through `musictx.io.wav_io.finish_wav`: resampled to ``sample_rate``
(midirenderer always renders 48 kHz stereo) with a band-limited filter, scaled so that its peak is ``gain`` of
full scale (midirenderer's renders of TimGM6mb are quiet, about -27 dBFS; FluidSynth's level depends on the
soundfont and the piece), and faded out over the last 20 ms so that the cut does not click; a long piece a
block at a time, and midirenderer's rendered a minute at a time (`musictx.io.audio_chunks`), so memory stays
bounded. The WAV is written under a temporary name and renamed (`musictx.safe_output`); a piece longer than
`MAX_AUDIO_SECONDS` is refused.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from musictx.io.audio_chunks import render_chunked
from musictx.io.midi_timing import MAX_TPQ
from musictx.io.read_errors import unreadable
from musictx.io.wav_io import (  # noqa: F401  (read_wav, resample, write_wav: used through this module)
    FADE_SECONDS,
    MAX_AUDIO_SECONDS,
    AudioRenderError,
    finish_wav_file,
    read_wav,
    resample,
    write_wav,
)
from musictx.safe_output import atomic_path, temp_path

DEFAULT_SOUNDFONT = "/usr/share/sounds/sf2/FluidR3_GM.sf2"
# Looked for, in order, when no soundfont is given: Debian's fluid-soundfont-gm, Debian's default-GM
# alternative (any installed GM soundfont), and the Fedora / Arch locations.
SOUNDFONT_CANDIDATES = (DEFAULT_SOUNDFONT, "/usr/share/sounds/sf2/default-GM.sf2",
                        "/usr/share/soundfonts/default.sf2", "/usr/share/soundfonts/FluidR3_GM.sf2")
ENGINES = ("auto", "fluidsynth", "midirenderer")
RELEASE_TAIL_SECONDS = 1.5  # rendered after the last note ends: a piano's release, and a breath of room
# FluidSynth's own synth gain (its default): dense chords stay below full scale, where a higher one clipped
# them before the peak level could be set; `finish_wav` brings the peak to ``gain`` afterwards.
FLUIDSYNTH_GAIN = 0.2


def find_soundfont(soundfont: str | os.PathLike | None = None) -> Path | None:
    """``soundfont`` if given and present; with None, the first of SOUNDFONT_CANDIDATES that exists."""
    if soundfont is not None:
        return Path(soundfont) if Path(soundfont).is_file() else None
    return next((Path(c) for c in SOUNDFONT_CANDIDATES if Path(c).is_file()), None)


def is_soundfont(path: str | os.PathLike) -> bool:
    """Whether ``path`` starts as a SoundFont 2 file does: a RIFF chunk of form ``sfbk``."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return head[:4] == b"RIFF" and head[8:12] == b"sfbk"


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
    if soundfont is not None and Path(soundfont).is_dir():  # "not found" read wrong for a folder that is there
        raise AudioRenderError(f"soundfont {soundfont} is a folder, not a .sf2 file (pass the .sf2 file itself)")
    if soundfont is not None and find_soundfont(soundfont) is None:
        raise AudioRenderError(f"soundfont {soundfont} not found (pass an existing .sf2 file)")
    if soundfont is not None and not is_soundfont(soundfont):  # said before any music is made, not per WAV
        raise AudioRenderError(f"soundfont {soundfont} is not a SoundFont 2 file (a .sf2 starts RIFF....sfbk)")
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

    ``soundfont`` None: a system GM soundfont for FluidSynth, pretty_midi's for midirenderer. ``gain``: the
    peak level as a fraction of full scale, with either renderer.
    """
    name, font = choose_renderer(soundfont, engine)
    data, seconds = _played_bytes(_load_midi(midi_path), tail)
    if seconds > MAX_AUDIO_SECONDS:
        raise AudioRenderError(f"{Path(midi_path).name} lasts {seconds:.0f} s, longer than the "
                               f"{MAX_AUDIO_SECONDS:g} s of audio rendered at most")
    with atomic_path(wav_path) as tmp:  # a failure or a full disk leaves no truncated WAV
        if name == "fluidsynth":
            _render_fluidsynth(midi_path, data, tmp, font, sample_rate, gain, timeout)
        else:
            _render_midirenderer(midi_path, data, tmp, font, sample_rate, gain, Path(wav_path).name)
    return Path(wav_path)


def _load_midi(midi_path):
    import mido

    try:
        midi = mido.MidiFile(str(midi_path))
    except Exception as err:  # mido raises OSError, EOFError, ValueError, KeyError... on broken files
        raise AudioRenderError(f"cannot render {midi_path}: {unreadable(err)}") from None
    if not 0 < midi.ticks_per_beat <= MAX_TPQ:  # SMPTE-timed files read as a huge count
        raise AudioRenderError(f"cannot render {midi_path}: not timed in ticks per quarter note")
    if midi.type == 2:  # independent sequences: no one clock to play them on
        raise AudioRenderError(f"cannot render {midi_path}: a type 2 MIDI file (independent sequences)")
    return midi


def _tail_end(midi, tail: float) -> int:
    """The tick where the render of ``midi`` (a mido.MidiFile) ends: ``tail`` seconds after its last note event
    (at the tempo in force there), or its last event if that comes later (a synthesiser plays up to it)."""
    from mido import second2tick

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
    set_at, tempo = -1, 500_000  # MIDI starts at 120 bpm
    for at, value in tempos:  # the last set at or before the last note (of two on one tick, the later track's)
        if set_at <= at <= note_tick:
            set_at, tempo = at, value
    return max(note_tick + round(second2tick(tail, midi.ticks_per_beat, tempo)), last_tick)


def _played_bytes(midi, tail: float) -> tuple[bytes, float]:
    """(the bytes a synthesiser plays, how many seconds it plays them): ``midi`` (a mido.MidiFile, changed
    here) with a track whose sustain-pedal release, a no-op once every note has ended, comes at `_tail_end`."""
    import mido

    end = _tail_end(midi, tail)
    midi.tracks.append(mido.MidiTrack([mido.Message("control_change", control=64, value=0, time=end),
                                       mido.MetaMessage("end_of_track", time=0)]))
    midi.type = max(midi.type, 1)  # a type-0 file holds one track
    out = io.BytesIO()
    midi.save(file=out)
    return out.getvalue(), float(midi.length)  # mido's own clock: the played length, tempo changes included


def rendered_seconds(midi_path: str | os.PathLike, tail: float = RELEASE_TAIL_SECONDS) -> float:
    """How long `render_wav`'s WAV of ``midi_path`` lasts: until ``tail`` seconds after the last note ends
    (or until the file's last event, if later)."""
    return _played_bytes(_load_midi(midi_path), tail)[1]


def with_release_tail(midi_path: str | os.PathLike, tail: float = RELEASE_TAIL_SECONDS) -> bytes:
    """The bytes of ``midi_path`` with a track added that holds one sustain-pedal release (a no-op once
    every note has ended) at the end of the tail: the event that keeps a synthesiser playing until then."""
    return _played_bytes(_load_midi(midi_path), tail)[0]


def _render_fluidsynth(midi_path, data: bytes, wav_path, soundfont: Path, sample_rate: int, gain: float,
                       timeout: float) -> Path:
    # FluidSynth's own WAV: beside the output (its disk has room for it), under a hidden name that the next run
    # there sweeps away if this one is killed (`musictx.safe_output.sweep_leftovers`)
    synthesised = temp_path(Path(wav_path))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            played = Path(tmp) / "tail.mid"
            played.write_bytes(data)
            cmd = ["fluidsynth", "-ni", "-q", "-g", str(FLUIDSYNTH_GAIN), "-r", str(sample_rate), "-F",
                   str(synthesised), "-T", "wav", str(soundfont), str(played)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0 or not synthesised.is_file() or synthesised.stat().st_size <= 44:  # a bare header
            raise AudioRenderError(f"fluidsynth failed on {midi_path} with {soundfont} (exit {done.returncode}): "
                                   f"{(done.stderr or done.stdout).strip()[-500:]}")
        finish_wav_file(synthesised, wav_path, sample_rate, gain)
    finally:
        synthesised.unlink(missing_ok=True)
    return Path(wav_path)


def _render_midirenderer(midi_path, data: bytes, wav_path, soundfont: Path, sample_rate: int, gain: float,
                         name: str | None = None) -> Path:
    import midirenderer

    font = soundfont.read_bytes()

    def render(midi_bytes: bytes) -> bytes:
        try:
            return midirenderer.render_wave_from(font, midi_bytes)
        except (RuntimeError, ValueError, OSError) as err:
            raise AudioRenderError(f"midirenderer failed on {midi_path} with {soundfont}: {err}") from None
        except BaseException as err:  # a Rust panic arrives as pyo3's PanicException, a BaseException
            if type(err).__name__ != "PanicException":
                raise
            raise AudioRenderError(f"midirenderer failed on {midi_path} with {soundfont}: {err}") from None

    # a minute at a time: bounded memory; the progress bar names the WAV being made, not its temporary file
    return render_chunked(render, data, wav_path, sample_rate, gain, name=name)


def wav_beside(midi: Path, soundfont: str | None) -> str | None:
    """Render ``midi`` to the .wav beside it; its name, or None (said in one line) when rendering fails."""
    try:
        return render_wav(midi, midi.with_suffix(".wav"), soundfont).name
    except AudioRenderError as err:
        print(f"audio skipped for {midi.stem}: {err}")
        return None
