"""Grace notes as music21 writes them (a note-off before its own note-on on one tick) are left out by every MIDI
reader, said once, and no other file reads otherwise (musictx.io.note_pairing, musictx.io.grace_notes).

The tunes are written into tmp_path by music21 from its own corpus (O'Neill's 1850, on disk with the package).
"""

from __future__ import annotations

from collections import Counter

import mido
import numpy as np
import pytest
import symusic

from musictx.io.grace_notes import note_events, read_symusic
from musictx.io.midi_io import read_notes
from musictx.io.note_pairing import grace_events
from musictx.io.score_io import read_score
from tests import midi_fixtures as mf
from tests.helpers import SHARED_DATA, needs_shared

music21 = pytest.importorskip("music21", reason="the tunes are written with music21 (the corpus extra)")


def oneills(number: int, book: str, path):
    """O'Neill's tune ``number`` written to ``path`` by music21, and its sounding notes as music21 lists them:
    Counter of (onset, pitch, length) in eighths of a quarter note, repeats played out as music21 writes them."""
    score = music21.corpus.parse(f"oneills1850/{book}.abc", number=number).expandRepeats()
    score.write("midi", fp=str(path))
    flat = score.stripTies().flatten()
    notes = [n for n in flat.notes if not n.duration.isGrace]
    assert len(notes) < len(flat.notes)  # the tune has grace notes
    return Counter((round(float(n.getOffsetInHierarchy(flat)) * 8), p.midi, round(float(n.quarterLength) * 8))
                   for n in notes for p in n.pitches)


def in_eighths(start, end, pitch, per_quarter: float) -> Counter:
    return Counter((round(s / per_quarter * 8), int(p), round((e - s) / per_quarter * 8))
                   for s, e, p in zip(start, end, pitch, strict=True))


def test_reel_1176_reads_as_music21_wrote_it_with_every_reader(tmp_path, capsys):
    """Read first in, first out, the grace notes' silent note-offs were ignored: 119 notes, one-beat notes
    running on to 10.5 beats, the final G (67) never released and missing. Now 116 notes, as music21 lists."""
    path = tmp_path / "1176.mid"
    want = oneills(1176, "1176-1275", path)
    assert sum(want.values()) == 116
    for reader in ("symusic", "mido"):
        notes = read_notes(path, reader)  # music21's 120 bpm: half a second a quarter note
        assert in_eighths(notes.start, notes.end, notes.pitch, 0.5) == want, reader
        assert notes.pitch[np.argmax(notes.start)] == 67 and (notes.end - notes.start).max() == pytest.approx(0.75)
    score = read_score(path)  # the REMI path's score, in ticks
    columns = score.tracks[0].notes.numpy()
    start = columns["time"]
    assert in_eighths(start, start + columns["duration"], columns["pitch"], score.ticks_per_quarter) == want
    line = (f"warning: {path}: 5 grace note(s) written as a note-off before its note-on on one tick (music21's way) "
            "left out: they sound nothing")
    assert capsys.readouterr().err.splitlines() == [line]  # three readings, one line


def test_other_grace_note_tunes_read_as_music21_lists_them(tmp_path):
    for number in (15, 24, 36):  # grace notes on pitches played again later, and repeats
        path = tmp_path / f"{number}.mid"
        want = oneills(number, "0001-0050", path)
        assert in_eighths(*(getattr(read_notes(path), f) for f in ("start", "end", "pitch")), 0.5) == want, number


def test_a_re_strike_after_a_release_on_one_tick_is_read_as_before(tmp_path):
    """Most DAWs end a sounding note and strike the key again on one tick, note-off first; a DAW may also send a
    note-off twice and then strike again on that tick, the new note released later: both keep their notes."""
    events = [mf.on(0, 60, 50), mf.off(480, 60), mf.on(480, 60, 60), mf.off(960, 60),
              mf.on(0, 64, 50), mf.off(480, 64), mf.off(480, 64), mf.on(480, 64, 70), mf.off(960, 64),
              mf.off(240, 67), mf.on(240, 67, 80), mf.off(720, 67)]  # a silent note-off, its key struck later on
    events.sort(key=lambda e: e[0])
    path = mf.write_midi(tmp_path / "daw.mid", [events])
    want = [(0, 480, 60), (480, 960, 60), (0, 480, 64), (480, 960, 64), (240, 720, 67)]
    for reader in ("symusic", "mido"):
        notes = read_notes(path, reader)
        got = [(round(s / mf.SECONDS_PER_TICK), round(e / mf.SECONDS_PER_TICK), int(p))
               for s, e, p in zip(notes.start, notes.end, notes.pitch, strict=True)]
        assert sorted(got) == sorted(want), reader
    assert read_symusic(path).dumps_midi() == symusic.Score(str(path)).dumps_midi()


def test_a_grace_note_on_a_silent_key_between_notes_of_other_keys(tmp_path):
    """The pattern by hand (velocity-0 note-ons as note-offs, running status): the grace note on 62 is left out,
    the later 62 keeps its own release, and the note before it on 60 is untouched."""
    events = [mf.on(0, 60), mf.off(480, 60, zero_velocity_on=True), mf.off(480, 62, zero_velocity_on=True),
              mf.on(480, 62), mf.on(480, 64), mf.off(960, 64, zero_velocity_on=True),
              mf.on(960, 62), mf.off(1440, 62, zero_velocity_on=True)]
    path = mf.write_midi(tmp_path / "grace.mid", [events])
    for reader in ("symusic", "mido"):
        notes = read_notes(path, reader)
        assert [(round(s / mf.SECONDS_PER_TICK), round(e / mf.SECONDS_PER_TICK), int(p)) for s, e, p
                in zip(notes.start, notes.end, notes.pitch, strict=True)] == [(0, 480, 60), (480, 960, 64),
                                                                            (960, 1440, 62)], reader


def test_grace_events_marks_only_the_pairs_whose_note_on_would_take_a_later_release():
    # key 1: silent off + on on tick 5 (grace), then a note of its own; key 2: the same but released twice
    # later (the on at 5 is a real note whose release comes at 9); key 3: off first while sounding (a re-strike)
    tick = [0, 5, 5, 6, 8, 5, 5, 9, 0, 5, 5, 7]
    key = [9, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    is_on = [1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0]
    assert np.flatnonzero(grace_events(tick, key, is_on)).tolist() == [1, 2]


def test_the_event_walk_reads_what_mido_reads(tmp_path):
    events, _ = mf.overlapping(4, gap=60, zero_velocity_on=True)
    tracks = [events, [mf.tempo(0, 90), mf.program(0, 5, channel=3), mf.on(10, 70, channel=3),
                       (20, mido.Message("control_change", control=64, value=100, channel=3)),
                       (20, mido.Message("pitchwheel", pitch=100, channel=3)), mf.off(30, 70, channel=3)]]
    path = mf.write_midi(tmp_path / "walk.mid", tracks)
    rows = []
    for index, track in enumerate(mido.MidiFile(str(path)).tracks):
        tick = 0
        for msg in track:
            tick += msg.time
            if msg.type in ("note_on", "note_off"):
                key = (index * 16 + msg.channel) * 128 + msg.note
                rows.append((tick, key, msg.type == "note_on" and msg.velocity > 0))
    assert [tuple(int(x) for x in row) for row in zip(*note_events(path.read_bytes()), strict=True)] == rows


@needs_shared
def test_ordinary_files_are_read_from_their_bytes_as_before(capsys):
    """No POP909 song nor piano performance holds such grace notes: their scores are symusic's, byte for byte."""
    files = [SHARED_DATA / "pop" / "POP909" / "003" / "003.mid", *sorted((SHARED_DATA / "piano").rglob("*.mid"))[:5]]
    for f in files:
        assert read_symusic(f).dumps_midi() == symusic.Score(str(f)).dumps_midi(), f
    assert capsys.readouterr().err == ""
