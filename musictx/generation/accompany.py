"""Writing the missing tracks of a song for its melody (``task=accompany``): the infill format with the new
tracks taken out of every bar, filled a few bars at a time from the start, each range with the melody of
its bars and everything already written before it in view.

The given tracks are never rewritten: the output is the input file's own score with the new tracks added
as separate named tracks (its tempo map and meter untouched), their notes on the song's bar lines.
"""

from __future__ import annotations

import os

from symusic import Note, Score, Track

from musictx.generation.infill import SongBars, infill_prompt, middle_notes, read_song, sample_middle
from musictx.generation.sampling_options import SamplingOptions
from musictx.generation.window import context_length
from musictx.io.metrical_tokenizer import ReadScore
from musictx.io.midi_io import MidiReadError
from musictx.io.score_prep import ROLE_PROGRAMS, TrackMap
from musictx.io.score_prep import Track as TrackInfo

MELODY = "MELODY"
ACCOMPANIMENT = ("BRIDGE", "PIANO")  # the tracks the pop model can write, as POP909 names them
CHUNK_BARS = 4  # bars written per pass: the melody of each is at most a few hundred ids back


def melody_song(tok, path: str | os.PathLike) -> SongBars:
    """``path`` read for accompaniment. Its melody is the track whose name says so (melody, vocal, lead ...);
    a file of one unnamed track is taken as the melody; otherwise it is an error naming the file."""
    read = tok.read(path)
    infos = list(read.tracks.tracks)
    if not any(t.program == ROLE_PROGRAMS[MELODY] for t in infos):
        pitched = [k for k, t in enumerate(infos) if not t.is_drum]
        if len(pitched) != 1:
            raise MidiReadError(str(path), f"no melody track among {read.tracks.describe()}: name the melody "
                                           "track 'melody' (or give a file of the melody alone)")
        k = pitched[0]
        read.score.tracks[k].program = ROLE_PROGRAMS[MELODY]
        infos[k] = TrackInfo(ROLE_PROGRAMS[MELODY], infos[k].name, infos[k].real_program)
        read = ReadScore(read.score, TrackMap(tuple(infos)), read.shift_ticks)
    return read_song(tok, path, read)


def roles_to_write(song: SongBars, names) -> list[str]:
    """The accompaniment tracks to write: ``names`` (e.g. "bridge,piano"), default those the file lacks."""
    present = {t.program for t in song.read.tracks.tracks}
    missing = [r for r in ACCOMPANIMENT if ROLE_PROGRAMS[r] not in present]
    if not names:
        if not missing:
            raise MidiReadError(song.path, "already has BRIDGE and PIANO tracks: nothing to accompany "
                                           "(task=infill tracks=... redoes a track)")
        return missing
    wanted = [n.strip().upper() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    unknown = [n for n in wanted if n not in ACCOMPANIMENT]
    if unknown:
        raise MidiReadError(song.path, f"tracks={','.join(unknown).lower()}: the model writes "
                                       f"{' and '.join(r.lower() for r in ACCOMPANIMENT)}")
    there = [n for n in wanted if n not in missing]
    if there:
        raise MidiReadError(song.path, f"already has a {there[0]} track (program {ROLE_PROGRAMS[there[0]]} inside "
                                       "musictx); task=infill tracks=... redoes it")
    return list(dict.fromkeys(wanted))


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


def accompany_song(net, tok, song: SongBars, roles: list[str], s: int, e: int, sampling: SamplingOptions,
                   chunk_bars: int = CHUNK_BARS, max_bar_repeats: int | None = 4) -> tuple[Score, int]:
    """(the input file with the ``roles`` tracks written for bars [s, e), new ids sampled)."""
    work = with_new_tracks(song, roles)
    programs = {ROLE_PROGRAMS[r] for r in roles}
    max_len, new_ids = context_length(net) or 1024, 0
    for first in range(s, e, chunk_bars):
        last = min(first + chunk_bars, e)
        now = read_song(tok, song.path, work)  # the melody and what is written so far, as tokens
        prompt, room = infill_prompt(tok, now, first, last, programs, max_len, use_right=False)
        middle = sample_middle(net, tok, prompt, last - first, sorted(programs), room,
                               sampling, max_bar_repeats)
        new_ids += len(middle)
        add_notes(work.score, middle_notes(tok, middle, now, first, last))
    return file_with_tracks(song, work, roles), new_ids


def file_with_tracks(song: SongBars, work: ReadScore, roles: list[str]) -> Score:
    """The input file's own score, untouched, with the written tracks appended in its ticks."""
    out = Score(song.path)
    shift = song.read.shift_ticks
    for track in work.score.tracks[len(song.read.score.tracks):]:
        new = Track(track.name, 0, False)  # POP909 plays every track on the piano
        for n in track.notes:  # a note in a pickup's bar before the file's start is left out
            if n.time >= shift:
                new.notes.append(Note(n.time - shift, n.duration, n.pitch, n.velocity))
        out.tracks.append(new)
    return out
