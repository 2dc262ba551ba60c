"""MIDI -> WAV with the FluidSynth command-line synthesiser and a General MIDI soundfont.

Nothing here is required: `audio_unavailable` says why audio cannot be made (no ``fluidsynth`` binary,
no soundfont) so that callers print one line and skip it. On Debian/Ubuntu:
``apt-get install fluidsynth fluid-soundfont-gm`` (soundfont at /usr/share/sounds/sf2/FluidR3_GM.sf2);
any other GM soundfont works too (``soundfont=<file.sf2>``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

DEFAULT_SOUNDFONT = "/usr/share/sounds/sf2/FluidR3_GM.sf2"
# Looked for, in order, when no soundfont is given: Debian's fluid-soundfont-gm, Debian's default-GM
# alternative (any installed GM soundfont), and the Fedora / Arch locations.
SOUNDFONT_CANDIDATES = (DEFAULT_SOUNDFONT, "/usr/share/sounds/sf2/default-GM.sf2",
                        "/usr/share/soundfonts/default.sf2", "/usr/share/soundfonts/FluidR3_GM.sf2")


class AudioRenderError(RuntimeError):
    """FluidSynth is missing, or ran but did not produce the WAV file."""


def find_soundfont(soundfont: str | os.PathLike | None = None) -> Path | None:
    """``soundfont`` if given and present; with None, the first of SOUNDFONT_CANDIDATES that exists."""
    if soundfont is not None:
        return Path(soundfont) if Path(soundfont).is_file() else None
    return next((Path(c) for c in SOUNDFONT_CANDIDATES if Path(c).is_file()), None)


def audio_unavailable(soundfont: str | os.PathLike | None = None) -> str | None:
    """None when `render_wav` can run; else a one-line reason naming what is missing."""
    if shutil.which("fluidsynth") is None:
        return "no `fluidsynth` binary on PATH (apt-get install fluidsynth fluid-soundfont-gm)"
    if find_soundfont(soundfont) is None:
        where = soundfont if soundfont is not None else " or ".join(SOUNDFONT_CANDIDATES[:2])
        return f"soundfont {where} not found (apt-get install fluid-soundfont-gm, or pass soundfont=<file.sf2>)"
    return None


def render_wav(midi_path: str | os.PathLike, wav_path: str | os.PathLike, soundfont: str | os.PathLike | None = None,
               sample_rate: int = 44100, gain: float = 0.8, timeout: float = 300) -> Path:
    """Render ``midi_path`` to a 16-bit WAV at ``wav_path`` with FluidSynth (no audio device used).
    ``soundfont`` None: the first GM soundfont found (see `find_soundfont`)."""
    reason = audio_unavailable(soundfont)
    if reason is not None:
        raise AudioRenderError(reason)
    cmd = ["fluidsynth", "-ni", "-q", "-g", str(gain), "-r", str(sample_rate), "-F", str(wav_path), "-T", "wav",
           str(find_soundfont(soundfont)), str(midi_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wav = Path(wav_path)
    if done.returncode != 0 or not wav.is_file() or wav.stat().st_size <= 44:  # 44 bytes: a bare WAV header
        raise AudioRenderError(f"fluidsynth failed on {midi_path} (exit {done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-500:]}")
    return wav
