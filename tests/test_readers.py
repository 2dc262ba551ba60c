"""The two MIDI readers (symusic, mido) give the same notes and tokens, and pair notes first in, first out.

Fixtures are written event by event with mido (tests/midi_fixtures.py) into tmp_path; real files come from
../shared/data when it is there.
"""

from __future__ import annotations

import random
from collections import deque
from pathlib import Path

import mido
import numpy as np
import pretty_midi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from musictx.io import read_errors
from musictx.io.midi_io import MidiReadError, Notes, pair_note_events, read_notes
from musictx.io.tokenizer import EventTokenizer
from tests import midi_fixtures as mf
from tests.helpers import EDGE_DIR, SHARED_DATA, needs_shared, piano_files

TOK = EventTokenizer()
READERS = ("symusic", "mido")


def read_both(path: Path, sustain: bool = True) -> Notes:
    """The notes of ``path``, after checking that both readers give identical notes and tokens."""
    a, b = (read_notes(path, r, sustain=sustain) for r in READERS)
    for f in Notes.FIELDS:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f"{path}: {f}")
    np.testing.assert_array_equal(TOK.encode(path, reader="symusic"), TOK.encode(path, reader="mido"),
                                  err_msg=str(path))
    return a


def as_rows(notes: Notes) -> list[tuple]:
    return list(zip(*(getattr(notes, f).tolist() for f in Notes.FIELDS), strict=True))


def assert_notes_in_ticks(notes: Notes, expected: list[tuple], seconds_per_tick: float = mf.SECONDS_PER_TICK):
    """``expected``: (start, end, pitch, velocity) in ticks at one constant tempo, in any order."""
    want = sorted(expected, key=lambda n: (n[0], n[2], n[3], n[1]))  # the readers' order
    assert [(p, v) for _, _, p, v in as_rows(notes)] == [(p, v) for _, _, p, v in want]
    np.testing.assert_allclose(notes.start, [s * seconds_per_tick for s, *_ in want], rtol=0, atol=1e-9)
    np.testing.assert_allclose(notes.end, [e * seconds_per_tick for _, e, *_ in want], rtol=0, atol=1e-9)


# ----- the pairing rule ----------------------------------------------------------------------------------
def queue_pairs(keys, is_on) -> set[tuple[int, int]]:
    """Plain first-in-first-out pairing, one event at a time: the rule as the module docstring states it."""
    sounding, pairs = {}, set()
    for i, (k, o) in enumerate(zip(keys, is_on, strict=True)):
        q = sounding.setdefault(k, deque())
        if o:
            q.append(i)
        elif q:
            pairs.add((q.popleft(), i))
    return pairs


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=60))
def test_vectorised_pairing_equals_a_queue(events):
    keys, is_on = [k for k, _ in events], [o for _, o in events]
    ons, offs = pair_note_events(np.array(keys, dtype=np.int64), np.array(is_on, dtype=bool))
    assert set(zip(ons.tolist(), offs.tolist(), strict=True)) == queue_pairs(keys, is_on)


FIXTURES = {
    "overlap depth 2": lambda: mf.overlapping(2),
    "overlap depth 3": lambda: mf.overlapping(3),
    "overlap depth 6": lambda: mf.overlapping(6, gap=7),
    "overlap depth 3, velocity-0 note-ons as note-offs": lambda: mf.overlapping(3, zero_velocity_on=True),
    "interleaved strikes, stray and missing releases": mf.interleaved,
    "release and re-strike on one tick": mf.same_tick_orders,
    "zero-length notes": mf.zero_length,
}


@pytest.mark.parametrize("name", list(FIXTURES))
def test_both_readers_pair_first_in_first_out(tmp_path, name):
    events, expected = FIXTURES[name]()
    path = mf.write_midi(tmp_path / "f.mid", [events])
    assert_notes_in_ticks(read_both(path), expected)


def test_overlaps_on_several_pitches_channels_and_tracks_stay_apart(tmp_path):
    """The same overlapping pattern on two pitches, two channels and two tracks, all at once."""
    tracks, expected = [[], []], []
    for track, channel, pitch in [(0, 0, 60), (0, 0, 61), (0, 1, 60), (1, 0, 60)]:
        events, notes = mf.overlapping(3, pitch=pitch, gap=100 + 10 * track + channel)
        tracks[track] += [(t, msg.copy(channel=channel)) for t, msg in events]
        expected += notes
    tracks = [sorted(t, key=lambda e: e[0]) for t in tracks]
    assert_notes_in_ticks(read_both(mf.write_midi(tmp_path / "f.mid", tracks)), expected)


def test_running_status(tmp_path):
    """All releases as velocity-0 note-ons on one channel: mido writes a single status byte for the track."""
    events, expected = mf.overlapping(4, gap=60, zero_velocity_on=True)
    more, more_expected = mf.overlapping(3, pitch=67, gap=50, zero_velocity_on=True)
    events = sorted(events + [(t + 5, m) for t, m in more], key=lambda e: e[0])
    path = mf.write_midi(tmp_path / "running.mid", [events], midi_type=0)
    track_bytes = path.read_bytes().split(b"MTrk", 1)[1][4:]
    assert track_bytes.count(0x90) == 1  # every delta < 128, so no other byte can be 0x90
    assert_notes_in_ticks(read_both(path), expected + [(s + 5, e + 5, p, v) for s, e, p, v in more_expected])


# ----- tempo maps ---------------------------------------------------------------------------------------
def seconds_at(tick: int, tempo_events: list[tuple[int, int]]) -> float:
    """Reference tick -> seconds: walk the tempo events (tick, microseconds per quarter) in order."""
    sec, last_tick, mspq = 0.0, 0, 500000
    for t, new in sorted(tempo_events, key=lambda e: e[0]):
        if t >= tick:
            break
        sec += mido.tick2second(t - last_tick, mf.TPQ, mspq)
        last_tick, mspq = t, new
    return sec + mido.tick2second(tick - last_tick, mf.TPQ, mspq)


def test_hundreds_of_tempo_changes(tmp_path):
    rng = random.Random(0)
    ticks = sorted(rng.sample(range(1, 200_000), 400))
    ticks[10] = ticks[11]  # two tempo events on one tick: the last one wins
    tempos = [(t, mido.bpm2tempo(rng.uniform(20, 300))) for t in ticks]
    conductor = [(t, mido.MetaMessage("set_tempo", tempo=m)) for t, m in tempos]
    starts = sorted(rng.sample(range(0, 200_000), 300))
    notes = [(s, s + rng.randrange(1, 2000), rng.randrange(40, 90), rng.randrange(1, 128)) for s in starts]
    events = sorted([mf.on(s, p, v) for s, _, p, v in notes] + [mf.off(e, p) for _, e, p, _ in notes],
                    key=lambda e: e[0])
    got = read_both(mf.write_midi(tmp_path / "tempi.mid", [conductor, events]), sustain=False)
    effective = [e for i, e in enumerate(tempos) if i != 10]  # the overridden event changes nothing
    # Which note-off ends which note may differ from the list above when a pitch repeats; times may not.
    np.testing.assert_allclose(np.sort(got.start), [seconds_at(s, effective) for s, *_ in notes], rtol=1e-12)
    np.testing.assert_allclose(np.sort(got.end), sorted(seconds_at(e, effective) for _, e, *_ in notes),
                               rtol=1e-12)


def test_tempo_events_of_every_track_form_one_map(tmp_path):
    """Format 1 with tempo events in the first and in two note tracks: all of them count."""
    conductor = [mf.tempo(0, 100), mf.tempo(4000, 140)]
    piano = [mf.on(0, 60), mf.tempo(1000, 60), mf.off(1500, 60), mf.on(5000, 62), mf.off(6000, 62)]
    strings = [mf.on(200, 48), mf.tempo(2500, 200), mf.off(3000, 48), mf.on(4000, 50), mf.off(7000, 50)]
    path = mf.write_midi(tmp_path / "tempo_tracks.mid", [conductor, piano, strings])
    tempos = [(t, m.tempo) for track in (conductor, piano, strings) for t, m in track if m.type == "set_tempo"]
    got = as_rows(read_both(path))
    want = sorted([(seconds_at(s, tempos), seconds_at(e, tempos), p, 80)
                   for s, e, p in [(0, 1500, 60), (5000, 6000, 62), (200, 3000, 48), (4000, 7000, 50)]])
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12)


# ----- groups: channels, programs, sustain, drums ------------------------------------------------------
def test_sustain_stays_per_channel_and_drums_are_dropped(tmp_path):
    events = [mf.program(0, 0), mf.on(0, 60), mf.on(0, 64, channel=1), mf.pedal(100, 127, channel=1),
              mf.on(100, 36, channel=9), mf.off(200, 60), mf.off(200, 64, channel=1), mf.off(200, 36, channel=9),
              mf.program(300, 40), mf.pedal(300, 127), mf.on(400, 67), mf.off(500, 67),
              mf.pedal(960, 0, channel=1), mf.pedal(1200, 0)]
    got = read_both(mf.write_midi(tmp_path / "groups.mid", [events], midi_type=0))
    # Channel 1's pedal holds its own note to 960, not channel 0's; channel 0's pedal holds the 67 to 1200.
    assert_notes_in_ticks(got, [(0, 200, 60, 80), (0, 960, 64, 80), (400, 1200, 67, 80)])


def test_a_file_of_drums_only_is_refused_by_both_readers(tmp_path):
    path = mf.write_midi(tmp_path / "drums.mid", [[mf.on(0, 36, channel=9), mf.off(100, 36, channel=9)]])
    for reader in READERS:
        with pytest.raises(MidiReadError, match="only drum notes"):
            read_notes(path, reader)


def random_event(kind: str, tick: int, pitch: int, channel: int, value: int):
    if kind == "on":
        return mf.on(tick, pitch, value, channel)
    if kind in ("off", "off0"):
        return mf.off(tick, pitch, channel, zero_velocity_on=kind == "off0")
    return mf.pedal(tick, value, channel) if kind == "pedal" else mf.tempo(tick, 30 + value)


@st.composite
def random_tracks(draw):
    """Up to three tracks of strikes and releases (both kinds) of three pitches on two channels, pedals and
    tempo events: enough collisions to exercise overlaps and same-tick orders."""
    tracks = []
    for _ in range(draw(st.integers(1, 3))):
        tick, events = 0, []
        for kind, dt, pitch, channel, value in draw(st.lists(st.tuples(
                st.sampled_from(["on", "on", "off", "off0", "pedal", "tempo"]), st.sampled_from([0, 0, 1, 7, 120]),
                st.integers(60, 62), st.integers(0, 1), st.integers(1, 127)), max_size=40)):
            tick += dt
            events.append(random_event(kind, tick, pitch, channel, value))
        tracks.append(events)
    return tracks


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(random_tracks())
def test_readers_agree_on_random_event_sequences(tmp_path, tracks):
    path = mf.write_midi(tmp_path / "random.mid", tracks)
    outcomes = []
    for reader in READERS:
        try:
            outcomes.append(read_notes(path, reader))
        except MidiReadError as err:
            outcomes.append(err.reason)
    if isinstance(outcomes[0], str) or isinstance(outcomes[1], str):
        assert outcomes[0] == outcomes[1]  # both "no notes"
        return
    read_both(path)
    read_both(path, sustain=False)


# ----- real files ---------------------------------------------------------------------------------------
def midi_files_below(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in (".mid", ".midi"))


def check_readers_agree(files: list[Path]) -> int:
    """Identical tokens from both readers for every file both accept; returns how many that was."""
    both = 0
    for f in files:
        try:
            ids = [TOK.encode(f, reader=r) for r in READERS]
        except MidiReadError:
            continue  # a file one reader refuses is the other's to read (the prep's fallback)
        np.testing.assert_array_equal(ids[0], ids[1], err_msg=str(f))
        both += 1
    return both


@needs_shared
def test_readers_agree_on_a_sample_of_real_files_and_every_edge_file():
    sample = random.Random(0).sample(piano_files(), 40)
    assert check_readers_agree(sample) == 40
    assert check_readers_agree(midi_files_below(EDGE_DIR)) > 80


@pytest.mark.slow
@needs_shared
def test_readers_agree_on_every_shared_file():
    assert check_readers_agree(midi_files_below(SHARED_DATA)) > 600


@needs_shared
def test_where_the_rules_coincide_reading_matches_pretty_midi():
    """The real piano performances hardly ever re-strike a sounding key and keep their tempo in the first
    track, so pretty_midi's own reading (the one Magenta uses) gives the same tokens."""
    for f in random.Random(1).sample(piano_files(), 6):
        np.testing.assert_array_equal(TOK.encode(pretty_midi.PrettyMIDI(str(f))), TOK.encode(f), err_msg=str(f))


LIBRARY_WORDS = ("MiniMidi", "iostream", "Invaild", "RuntimeError")


@needs_shared
def test_a_broken_edge_file_is_refused_in_plain_words_naming_it():
    """What the readers fail on is said as a reader would say it, not in the library's words (symusic's MiniMidi:
    "Invaild midi file! File header is not MThd!: iostream error")."""
    said = {}
    for f in midi_files_below(EDGE_DIR):
        try:
            read_notes(f)
        except MidiReadError as err:
            if "unreadable MIDI" in str(err):
                said[f.name] = str(err)
    assert len(said) >= 15
    for name, text in said.items():
        assert name in text and not any(word in text for word in LIBRARY_WORDS), text
    assert said["test-illegal-message-f4.mid"].endswith("unreadable MIDI (an illegal MIDI message, status byte 0xf4)")
    assert "not a MIDI file" in said["MIDIBadHeaderChunk.mid"] and "cut short" in said["MIDIBadTrackLength.mid"]


def test_a_reader_error_no_entry_knows_is_quoted_as_it_came():
    library = RuntimeError("MiniMidi: Invaild midi file! File header is not MThd!: iostream error")
    assert read_errors.unreadable(library) == "unreadable MIDI (not a MIDI file: it does not start with a MIDI header)"
    assert read_errors.unreadable(ValueError("  something\n new ")) == "unreadable MIDI (something new)"
    assert read_errors.unreadable(EOFError()) == "unreadable MIDI (EOFError)"


def test_a_file_too_short_for_a_midi_header_is_said_so(tmp_path):
    """symusic's own words for a file under 14 bytes ("Invaild midi file! File size is less than 14!") in plain ones."""
    from symusic import Score

    from musictx.io import read_errors

    for name, data in (("empty.mid", b""), ("mthd.mid", b"MThd"), ("text.mid", b"not midi!")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(Exception) as raised:
            Score(str(tmp_path / name))
        said = read_errors.unreadable(raised.value)
        assert said == "unreadable MIDI (too short to be a MIDI file: a MIDI header alone takes 14 bytes)", name
