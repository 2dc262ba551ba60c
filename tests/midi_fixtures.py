"""MIDI files written event by event with mido, for the reader tests.

A track is a list of ``(tick, message)`` pairs in file order, ticks absolute and non-decreasing; the order
of events on one tick is kept as given, which is what the same-tick fixtures need. mido writes running
status by itself (a channel message with the same status byte as the one before it omits that byte).
"""

from __future__ import annotations

from pathlib import Path

import mido

TPQ = 480  # ticks per quarter note of every fixture
SECONDS_PER_TICK = 0.5 / TPQ  # at MIDI's default 120 bpm


def on(tick: int, pitch: int, velocity: int = 80, channel: int = 0):
    return tick, mido.Message("note_on", note=pitch, velocity=velocity, channel=channel)


def off(tick: int, pitch: int, channel: int = 0, zero_velocity_on: bool = False):
    """A note-off, or a note-on with velocity 0 (the form most files use, for running status)."""
    if zero_velocity_on:
        return tick, mido.Message("note_on", note=pitch, velocity=0, channel=channel)
    return tick, mido.Message("note_off", note=pitch, velocity=64, channel=channel)


def tempo(tick: int, bpm: float):
    return tick, mido.MetaMessage("set_tempo", tempo=mido.bpm2tempo(bpm))


def pedal(tick: int, value: int, channel: int = 0):
    return tick, mido.Message("control_change", control=64, value=value, channel=channel)


def program(tick: int, number: int, channel: int = 0):
    return tick, mido.Message("program_change", program=number, channel=channel)


def write_midi(path: Path, tracks: list[list], midi_type: int = 1, tpq: int = TPQ) -> Path:
    """Write ``tracks`` (lists of ``(tick, message)``) as a standard MIDI file."""
    midi = mido.MidiFile(type=midi_type, ticks_per_beat=tpq)
    for events in tracks:
        track, last = mido.MidiTrack(), 0
        for tick, msg in events:
            if tick < last:
                raise ValueError(f"ticks must not decrease within a track ({tick} after {last})")
            track.append(msg.copy(time=tick - last))
            last = tick
        midi.tracks.append(track)
    path.parent.mkdir(parents=True, exist_ok=True)
    midi.save(str(path))
    return path


def overlapping(depth: int, pitch: int = 60, gap: int = 240, zero_velocity_on: bool = False) -> tuple[list, list]:
    """``depth`` strikes of one pitch, each before any release, then ``depth`` releases.

    Returns the events and the notes first-in-first-out pairing gives: (start, end, pitch, velocity) in
    ticks; strike i has velocity 40 + 10 i, so the velocities show which release went with which strike.
    """
    events = [on(i * gap, pitch, 40 + 10 * i) for i in range(depth)]
    events += [off((depth + i) * gap, pitch, zero_velocity_on=zero_velocity_on) for i in range(depth)]
    expected = [(i * gap, (depth + i) * gap, pitch, 40 + 10 * i) for i in range(depth)]
    return events, expected


def interleaved() -> tuple[list, list]:
    """Strikes and releases of one pitch interleaved, with a stray release and a never-released strike."""
    events = [off(0, 62),  # nothing sounding: ignored
              on(100, 62, 50), on(200, 62, 60), off(300, 62), on(400, 62, 70), off(500, 62), off(600, 62),
              off(700, 62),  # nothing sounding any more: ignored
              on(800, 62, 90), on(900, 62, 100), off(1000, 62)]  # the 900 strike is never released
    expected = [(100, 300, 62, 50), (200, 500, 62, 60), (400, 600, 62, 70), (800, 1000, 62, 90)]
    return events, expected


def same_tick_orders() -> tuple[list, list]:
    """Release and re-strike on one tick, in both orders, with and without an earlier note sounding."""
    events = [on(0, 60, 50), off(480, 60), on(480, 60, 60), off(960, 60),  # off first: ends the old note
              on(0, 62, 50), on(480, 62, 60), off(480, 62), off(960, 62),  # on first: still ends the old one
              off(480, 64), on(480, 64, 70), off(960, 64),  # off first, nothing sounding: ignored
              on(480, 65, 70), off(480, 65), off(960, 65)]  # on first, nothing sounding: zero length, dropped
    events.sort(key=lambda e: e[0])  # stable: keeps the order of events within a tick
    expected = [(0, 480, 60, 50), (480, 960, 60, 60), (0, 480, 62, 50), (480, 960, 62, 60), (480, 960, 64, 70)]
    return events, expected


def zero_length() -> tuple[list, list]:
    """Notes whose release falls on their own strike's tick: alone, and first of two strikes on one tick."""
    events = [on(0, 70), off(0, 70),  # alone: sounds nothing
              on(100, 72, 50), off(200, 72), on(200, 72, 60), on(200, 72, 70), off(200, 72), off(300, 72),
              on(400, 74, 90), off(600, 74)]
    events.sort(key=lambda e: e[0])  # stable: keeps the order of events within a tick
    # At tick 200 the first release ends the 100 strike, the second the 60 strike (zero length: dropped).
    expected = [(100, 200, 72, 50), (200, 300, 72, 70), (400, 600, 74, 90)]
    return events, expected
