"""The last stage of a song task: the new bars' ids put back into the song's own file. The output is always
the input file's score: infill replaces the chosen tracks' notes inside the bar range (`replace_in_file`),
accompaniment appends the written tracks (`with_new_tracks`, `file_with_tracks`), or, for a whole song written
anew, replaces its own accompaniment's notes inside the bar range; nothing else is touched.
The new notes are placed bar by bar on the song's bar lines and cut at the range's last bar line.
"""

from __future__ import annotations

import numpy as np
from symusic import Note, Score, Track

from musictx.io.metrical_tokenizer import ReadScore
from musictx.io.score_io import note_list, read_score
from musictx.io.score_prep import ROLE_PROGRAMS, TrackMap
from musictx.io.score_prep import Track as TrackInfo
from musictx.tasks.played_as import member_of, owners, shares
from musictx.tasks.song_bars import SongBars


def middle_notes(tok, middle: np.ndarray, song: SongBars, s: int, e: int) -> dict[int, list[Note]]:
    """{internal program: notes in the read score's ticks} of the middle's bars, placed on bars s.. of the
    song and cut at the range's end."""
    tpq, end = song.read.score.ticks_per_quarter, int(song.lines[e])
    at = np.flatnonzero(middle == tok.bar_id)
    out: dict[int, list[Note]] = {}
    for j, first in enumerate(at[: e - s]):
        last = at[j + 1] if j + 1 < len(at) else len(middle)
        bar = tok.decode_score(middle[first:last])  # this bar alone: its line at tick 0
        factor = tpq / bar.ticks_per_quarter
        for track in bar.tracks:
            program = -1 if track.is_drum else int(track.program)
            for n in track.notes:
                start = int(song.lines[s + j]) + round(n.time * factor)
                if start >= end:
                    continue
                duration = max(min(round(n.duration * factor), end - start), 1)
                out.setdefault(program, []).append(Note(start, duration, n.pitch, n.velocity))
    return out


def in_bars(song: SongBars, onsets: np.ndarray, s: int, e: int, positions_per_beat: int) -> np.ndarray:
    """(N,) whether each onset (the file's ticks) falls in bars [s, e) once on the tokens' grid, as the
    tokenizer puts it: a note played a little before a bar line is in that bar, for the model and here."""
    grid = song.read.score.ticks_per_quarter / positions_per_beat
    on_grid = np.floor((np.asarray(onsets) + song.read.shift_ticks) / grid + 0.5) * grid  # read-score ticks
    return (on_grid >= song.lines[s]) & (on_grid < song.lines[e])


def _redone(k: int, program: int, taken: set[int] | None, only: list[int] | None) -> bool:
    """Whether track ``k`` (of internal ``program``) is one whose bars are written anew: its program is taken
    (None: all are) and, where tracks were named (``only``), it is one of them."""
    return (taken is None or program in taken) and (only is None or k in only)


def replace_in_file(song: SongBars, s: int, e: int, taken: set[int] | None,
                    new: dict[int, list[Note]], positions_per_beat: int, only: list[int] | None = None) -> Score:
    """The file's own score (``song.path`` read again, no meter applied) with the taken tracks' notes whose
    onsets fall in bars [s, e) replaced by ``new`` (read-score ticks, moved back by the read's shift). ``only``:
    the indices of the tracks to replace (None: every track of a taken program); tracks that share a part
    (`song.parts`) take its new notes by register."""
    original, shift = read_score(song.path), song.read.shift_ticks
    shared = {p: shares(song.parts, p, notes) for p, notes in new.items()}
    for k, (track, info) in enumerate(zip(original.tracks, song.read.tracks.tracks, strict=True)):
        if not _redone(k, info.program, taken, only):
            continue
        a = track.notes.numpy()
        keep = ~in_bars(song, a["time"], s, e, positions_per_beat)
        mine = new.get(info.program, []) if shared.get(info.program) is None else shared[info.program].get(k, [])
        back = song.read.registers.pitch_back if song.read.registers else lambda _key, pitch: pitch
        key = (info.name, info.real_program)  # its new notes go back to its register (`musictx.io.registers`)
        loud = song.dynamics.back_one  # a song played pp: its new notes as softly (`musictx.io.dynamics`)
        notes = [Note(n.time - shift, n.duration, back(key, n.pitch), loud(n.velocity)) for n in mine
                 if n.time >= shift]  # a note in a pickup's bar before the file's start is left out
        _with_notes(track, keep, notes)
    return original


def _with_notes(track: Track, keep: np.ndarray, notes: list[Note]) -> None:
    """In place: ``track``'s notes where ``keep`` (N,) is true, and ``notes`` (its ticks), in time order."""
    a = track.notes.numpy()
    rows = [(int(t), int(d), int(p), int(v)) for t, d, p, v in
            zip(a["time"][keep], a["duration"][keep], a["pitch"][keep], a["velocity"][keep], strict=True)]
    rows += [(n.time, n.duration, n.pitch, n.velocity) for n in notes]
    rows.sort(key=lambda r: (r[0], r[2]))
    track.notes = note_list(*(zip(*rows, strict=True) if rows else ([],) * 4))


def with_new_tracks(song: SongBars, roles: list[str]) -> ReadScore:
    """The read score with an empty track for each role, and its track map, to fill bar range by range."""
    score = song.read.score.copy()
    infos = list(song.read.tracks.tracks)
    for role in roles:
        score.tracks.append(Track(role, ROLE_PROGRAMS[role], False))
        infos.append(TrackInfo(ROLE_PROGRAMS[role], role, 0))
    return ReadScore(score, TrackMap(tuple(infos)), song.read.shift_ticks)


def add_notes(score: Score, new: dict[int, list[Note]]) -> None:
    for track in score.tracks:
        for note in new.get(int(track.program), []):
            track.notes.append(note)
        track.notes.sort()


def file_with_tracks(song: SongBars, work: ReadScore, roles: list[str], s: int, e: int,
                     positions_per_beat: int) -> Score:
    """The input file's own score with the written tracks' notes (bars [s, e)) in its ticks: each role a track of its
    own, appended; a whole song accompanied anew (`SongBars.own`) takes them into its own tracks of the role in
    place of their notes in bars [s, e), their notes in its other bars kept (a musician asking for bars 5-6 gets the
    song back whole: its own BRIDGE and PIANO had gone from every bar). Every other track is untouched."""
    out, shift = read_score(song.path), song.read.shift_ticks
    written = {}  # internal program -> (name, notes in the file's ticks)
    for track in work.score.tracks[len(song.read.score.tracks):]:
        # a note in a pickup's bar before the file's start is left out
        written[int(track.program)] = track.name, [Note(n.time - shift, n.duration, n.pitch,
                                                        song.dynamics.back_one(n.velocity))
                                                   for n in track.notes if n.time >= shift]
    own: dict[int, list[tuple[int, TrackInfo]]] = {}
    for k, info in song.own:
        own.setdefault(info.program, []).append((k, info))
    registers = song.read.registers  # a track read by octaves (`musictx.io.registers`): its new notes moved back
    moves, back = (registers.moves, registers.pitch_back) if registers else ({}, lambda _key, pitch: pitch)
    for program, members in own.items():
        notes = written.pop(program, ("", []))[1]
        for (k, info), mine in zip(members, _by_register(out, members, notes, moves), strict=True):
            moved = [Note(n.time, n.duration, back((info.name, info.real_program), n.pitch), n.velocity) for n in mine]
            _with_notes(out.tracks[k], ~in_bars(song, out.tracks[k].notes.numpy()["time"], s, e, positions_per_beat),
                        moved)
    for name, notes in written.values():
        new = Track(name, 0, False)  # POP909 plays every track on the piano
        for n in notes:
            new.notes.append(n)
        out.tracks.append(new)
    return out


def _by_register(score: Score, members: list[tuple[int, TrackInfo]], notes: list[Note],
                 moves: dict[tuple[str, int], int]) -> list[list[Note]]:
    """``notes`` (the model's pitches) shared among the ``members`` tracks of one part (their index in ``score``) by
    register as the model heard them (``moves``: semitones each was read moved by), `musictx.tasks.played_as.owners`;
    all to the one where it is one."""
    if len(members) == 1:
        return [notes]
    parts = []
    for k, info in members:
        heard = dict(score.tracks[k].notes.numpy())
        heard["pitch"] = heard["pitch"] + moves.get((info.name, info.real_program), 0)
        parts.append(member_of(k, info, heard))
    columns = {"time": np.array([n.time for n in notes], dtype=np.int64),
               "pitch": np.array([n.pitch for n in notes], dtype=np.int64)}
    owner = owners(columns, parts)
    return [[n for n, o in zip(notes, owner, strict=True) if o == j] for j in range(len(members))]


def filled_file(tok, song: SongBars, s: int, e: int, taken: set[int] | None, middle: np.ndarray,
                only: list[int] | None = None) -> Score:
    """The file with bars [s, e) of the ``taken`` tracks (None: all; ``only``: those tracks alone) replaced by
    ``middle``'s notes (its ids from its first Bar)."""
    per_beat = tok.miditok.config.max_num_pos_per_beat
    return replace_in_file(song, s, e, taken, middle_notes(tok, middle, song, s, e), per_beat, only)


def with_written_tracks(tok, song: SongBars, roles: list[str], s: int, e: int, new: np.ndarray) -> Score:
    """The input file with the ``roles`` tracks written for bars [s, e) from ``new`` (ids from the first new
    Bar); the notes of the given tracks that the ids also hold are not written again."""
    programs = {ROLE_PROGRAMS[r] for r in roles}
    notes = middle_notes(tok, new, song, s, e)
    work = with_new_tracks(song, roles)
    add_notes(work.score, {p: n for p, n in notes.items() if p in programs})
    return file_with_tracks(song, work, roles, s, e, tok.miditok.config.max_num_pos_per_beat)


def share_as_written(tok, song: SongBars, s: int, e: int, taken: set[int] | None, only: list[int] | None,
                     score: Score) -> float:
    """The share of the notes ``score`` (the file with bars [s, e) of the ``taken`` tracks, or ``only`` those,
    filled) has there that the file has too: the same track, onset and pitch. 0 where nothing was written."""
    def notes(sc: Score) -> set[tuple[int, int, int]]:
        out = set()
        for k, (track, info) in enumerate(zip(sc.tracks, song.read.tracks.tracks, strict=True)):
            if not _redone(k, info.program, taken, only):
                continue
            a = track.notes.numpy()
            inside = in_bars(song, a["time"], s, e, tok.miditok.config.max_num_pos_per_beat)
            out |= {(k, int(t), int(p)) for t, p in zip(a["time"][inside], a["pitch"][inside], strict=True)}
        return out

    written = notes(score)
    return len(written & notes(read_score(song.path))) / len(written) if written else 0.0
