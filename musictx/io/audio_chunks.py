"""The pip renderer (midirenderer) in bounded memory: a long piece is rendered a minute at a time.

midirenderer returns a whole render as WAV bytes, and the Rust synthesiser holds it as floats before that:
a 20-minute seed took 3.5 GB. Here the piece is cut into `CHUNK_SECONDS` spans, each rendered on its own
from a small MIDI file that starts a few seconds earlier (`lead_in`: the notes still sounding, a held pedal,
the reverb), with the controller and program state of everything before it. Only the span itself is kept,
as 16-bit frames appended to a temporary file beside the output; `musictx.io.wav_io.finish_wav` then reads
that file a block at a time, resamples, scales to the peak level and fades out, as it does FluidSynth's WAV.

A piece of one chunk is rendered from its own bytes, exactly as before. Longer ones sound the same (the test
compares loudness envelopes); a note held longer than `MAX_LEAD_SECONDS` across a cut would start silent.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np
from tqdm import tqdm

from musictx.io.read_errors import unreadable
from musictx.io.wav_io import AudioRenderError, finish_wav

CHUNK_SECONDS = 120.0
# Rendered before each chunk and dropped: the synthesiser's voices still sounding at its start (releases
# under the pedal ring for many seconds). From 20 s on, renders of a pedalled piano piece matched the whole
# render sample for sample at the cut; 15 s left a few percent of its loudness different.
LEAD_SECONDS = 20.0
MAX_LEAD_SECONDS = 40.0  # a note or pedal held longer than this across a cut starts over
MS_TPQ = 1000  # chunk files: 1000 ticks a beat at 1 s a beat, so one tick is one millisecond


def render_chunked(render, data: bytes, wav_path: str | os.PathLike, sample_rate: int, peak: float,
                   chunk_seconds: float = CHUNK_SECONDS, name: str | None = None) -> Path:
    """Write the WAV of the MIDI ``data`` at ``wav_path``, ``chunk_seconds`` of it per render.
    ``render(midi_bytes) -> wav_bytes`` is the synthesiser (midirenderer with its soundfont); ``name``: what
    the progress bar calls the WAV (default: ``wav_path``'s name)."""
    events, end = _timed_events(data)
    spans = [(t, min(t + chunk_seconds, end)) for t in np.arange(0.0, end, chunk_seconds)] or [(0.0, end)]
    with tempfile.TemporaryFile(dir=Path(wav_path).parent) as raw:
        rate, channels = 0, 2
        # a long piece takes minutes: a bar per piece (none for one chunk)
        for t0, t1 in tqdm(spans, desc=f"audio {name or Path(wav_path).name}", unit=" chunk", disable=len(spans) < 2,
                           leave=False, file=sys.stdout):
            if len(spans) == 1:
                frames, rate = _wav_frames(render(data))
                keep = frames
            else:
                lead = _lead_from(events, t0)
                frames, rate = _wav_frames(render(_chunk_file(events, lead, t1 + 0.1)))
                a, b = round((t0 - lead) * rate), round((t1 - lead) * rate)
                keep = frames[a:b]
                if len(keep) < b - a:  # the synthesiser stopped early: silence
                    keep = np.concatenate([keep, np.zeros((b - a - len(keep), frames.shape[1]), "<i2")])
            channels = frames.shape[1]
            raw.write(np.ascontiguousarray(keep, dtype="<i2").tobytes())
            del frames, keep
        finish_wav(_reader(raw, channels), raw.tell() // (2 * channels), rate, channels, wav_path, sample_rate, peak)
    return Path(wav_path)


def _reader(raw, channels: int):
    """``read(i0, i1)``: frames i0 .. i1 of the raw 16-bit file ``raw`` as (N, C) floats in [-1, 1]."""
    def read(i0: int, i1: int) -> np.ndarray:
        raw.seek(i0 * 2 * channels)
        return np.frombuffer(raw.read((i1 - i0) * 2 * channels), dtype="<i2").reshape(-1, channels) / np.float32(32768)
    return read


def _wav_frames(wav_bytes: bytes) -> tuple[np.ndarray, int]:
    """((N, C) int16 frames, sample rate) of a 16-bit WAV file's bytes."""
    with wave.open(io.BytesIO(wav_bytes), "rb") as w:
        if w.getsampwidth() != 2:
            raise AudioRenderError(f"expected 16-bit PCM WAV, got {8 * w.getsampwidth()}-bit")
        frames = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, w.getnchannels())
        return frames, w.getframerate()


def _timed_events(data: bytes) -> tuple[list[tuple[float, object]], float]:
    """(the channel messages of the MIDI ``data`` with their times in seconds, tempo map applied; the time of
    its last event, where a synthesiser stops)."""
    import mido

    try:
        midi = mido.MidiFile(file=io.BytesIO(data))
    except Exception as err:  # mido raises OSError, EOFError, ValueError, KeyError... on broken files
        raise AudioRenderError(unreadable(err)) from None
    t, events = 0.0, []
    for msg in midi:  # all tracks merged, msg.time: seconds since the previous message
        t += msg.time
        if not msg.is_meta and msg.type != "sysex":
            events.append((t, msg))
    return events, t


def _lead_from(events, t0: float) -> float:
    """Where the chunk that keeps audio from ``t0`` starts rendering: `LEAD_SECONDS` earlier, or earlier still
    for a note or a sustain pedal held since then (at most `MAX_LEAD_SECONDS`)."""
    held: dict[tuple[int, int], float] = {}
    pedal: dict[int, float] = {}
    for t, msg in events:
        if t >= t0:
            break
        if msg.type == "note_on" and msg.velocity > 0:
            held[(msg.channel, msg.note)] = t
        elif msg.type in ("note_on", "note_off"):
            held.pop((msg.channel, msg.note), None)
        elif msg.type == "control_change" and msg.control == 64:
            if msg.value >= 64:
                pedal.setdefault(msg.channel, t)
            else:
                pedal.pop(msg.channel, None)
    earliest = min([t0 - LEAD_SECONDS, *held.values(), *pedal.values()])
    return max(0.0, earliest, t0 - MAX_LEAD_SECONDS)


def _chunk_file(events, start: float, stop: float) -> bytes:
    """A one-track MIDI file (1 ms ticks) of ``events`` from ``start`` to ``stop``, shifted to begin at 0,
    led by the last program, controller and pitch-bend state of each channel before ``start``; an unused
    controller at ``stop`` makes the synthesiser render until then."""
    import mido

    state: dict[tuple, object] = {}
    inside = []
    for t, msg in events:
        if t >= stop:
            break
        if t >= start:
            inside.append((t - start, msg))
        elif msg.type == "program_change":
            state[("program", msg.channel)] = msg
        elif msg.type == "control_change":
            state[("cc", msg.channel, msg.control)] = msg
        elif msg.type == "pitchwheel":
            state[("bend", msg.channel)] = msg
    timed = [(0.0, m) for m in state.values()] + inside + [(stop - start, mido.Message("control_change", control=3))]
    track, last = mido.MidiTrack([mido.MetaMessage("set_tempo", tempo=1_000_000, time=0)]), 0
    for t, msg in timed:
        tick = round(t * MS_TPQ)
        track.append(msg.copy(time=tick - last))
        last = tick
    midi = mido.MidiFile(type=0, ticks_per_beat=MS_TPQ)
    midi.tracks.append(track)
    out = io.BytesIO()
    midi.save(file=out)
    return out.getvalue()
