"""A song read for a song task (infill, accompaniment): its score as the tokenizer reads it, its ids and its
bars (`SongBars`), and what a user's options name in it: a bar range, tracks to redo, roles to write.

This is the first stage of a song task: read the song -> build the prompt (`musictx.tasks.infill`,
`musictx.tasks.accompany`) -> one sampler -> write back (`musictx.tasks.write_back`).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from musictx.decoding.errors import GenerateError
from musictx.io.dynamics import Dynamics, LevelRule, heard_dynamics, scale_score, score_velocities
from musictx.io.infill_format import bar_starts
from musictx.io.metrical_tokenizer import ReadScore
from musictx.io.midi_io import MidiReadError
from musictx.io.score_io import read_score
from musictx.io.score_prep import ROLE_PROGRAMS, TrackMap, part_name, role_of
from musictx.io.score_prep import Track as TrackInfo
from musictx.tasks.metrical_seeds import bar_lines, ticks_to_seconds
from musictx.tasks.played_as import PartPlan, parts_named, play_as_learnt, unlearnt

MELODY = "MELODY"
ACCOMPANIMENT = ("BRIDGE", "PIANO")  # the tracks the pop model can write, as POP909 names them


@dataclass
class SongBars:
    """A file read for infill: the score as tokenized (meter applied), its ids and where its bars are."""

    path: str
    read: ReadScore
    ids: np.ndarray  # (T,) the whole song, EOS dropped
    starts: np.ndarray  # (n_bars,) index of each Bar id
    lines: np.ndarray  # (>= n_bars + 1,) bar-line ticks of the read score
    left_out: tuple[str, ...] = ()  # accompanied anew: the file's own tracks left out (names), written again
    # accompanied anew: those tracks (index in the file, map entry), their notes replaced in the bars written alone
    own: tuple[tuple[int, TrackInfo], ...] = ()
    # accompanied anew: the whole song's ids, its own accompaniment in, bar for bar with ``ids`` (what the model hears
    # before the bars written with accompany_context=song, `musictx.tasks.accompany.heard_before`); None: no such song
    own_ids: np.ndarray | None = None
    joined: tuple[tuple[str, int], ...] = ()  # (role, tracks) of a role two or more tracks play (two named PIANO)
    learnt: tuple[int, ...] | None = None  # the parts (programs) the model learnt; None: it records none
    parts: PartPlan | None = None  # tracks played as a part the model learnt (`musictx.tasks.played_as`)
    strangers: tuple[str, ...] = ()  # accompanied: tracks of parts the model never learnt, kept as they are (described)
    dynamics: Dynamics = field(default_factory=Dynamics)  # a pp (ff, flat) song heard at the model's level

    @property
    def n_bars(self) -> int:
        return len(self.starts)

    def line_seconds(self, bars: list[int]) -> np.ndarray:
        """Seconds (the file's own clock) of the bar lines ``bars`` (0-based; n_bars is the last line)."""
        ticks = np.asarray([int(self.lines[b]) - self.read.shift_ticks for b in bars])
        return ticks_to_seconds(read_score(self.path), np.maximum(ticks, 0))

    def bar_ids(self, b: int) -> np.ndarray:
        end = self.starts[b + 1] if b + 1 < self.n_bars else len(self.ids)
        return self.ids[self.starts[b]:end]

    def end_of(self, b: int) -> int:
        """Token index where bar ``b`` begins (the song's end for ``b == n_bars``)."""
        return int(self.starts[b]) if b < self.n_bars else len(self.ids)


def read_fitted(tok, path: str | os.PathLike, beats="auto", level: LevelRule | None = None
                ) -> tuple[ReadScore, Dynamics]:
    """``path`` read for a song task (``beats``: see `MetricalTokenizer.read`): its tracks moved by octaves into the
    tokens' pitches (`musictx.io.registers`) and, where the rule ``level`` hears the song at the model's level (pp,
    ff, one velocity), every pitched velocity scaled to it (`musictx.io.dynamics.LevelRule`; None: never)."""
    read = tok.fit_registers(tok.read(path, beats))
    dynamics = heard_dynamics(score_velocities(read.score), level)
    scale_score(read.score, dynamics.scale)
    return read, dynamics


def read_song(tok, path: str | os.PathLike, read: ReadScore | None = None, beats="auto",
              learnt: tuple[int, ...] | None = None, level: LevelRule | None = None) -> SongBars:
    """``path`` read as the tokenizer reads it (`read_fitted`: POP909's beat file applied; ``beats``: see
    `MetricalTokenizer.read`, a number for the user's beats per bar); ``read`` to use a score made here.
    ``learnt``: the parts (programs) the model learnt; a track of another part is played as one of them.
    ``level``: when a song is heard at the model's level (`read_fitted`)."""
    dynamics = Dynamics()
    if read is None:
        read, dynamics = read_fitted(tok, path, beats, level)
    plan = None
    if learnt is not None:
        tracks, plan = play_as_learnt(read.score, read.tracks, learnt)
        read = read._replace(tracks=tracks)
    ids = tok.encode_read(read, path)  # a model with chord events: the song's chords, where a chord file is beside
    ids = ids[ids != tok.eos_id]
    return SongBars(str(path), read, ids, bar_starts(ids, tok.bar_id), bar_lines(read.score), learnt=learnt,
                    parts=plan, dynamics=dynamics)


def reading_said(song: SongBars, say_off: bool = True) -> str:
    """What reading the song did that the user should hear of, as clauses ("; ..."), "" for none: its tracks moved
    by octaves into the tokens' pitches (`musictx.io.registers`), and its meter where that makes every bar one
    beat long (POP909's MIDI files say 1/4 and keep their real bars in ``beat_midi.txt``, which was not found
    beside it), so the model writes a bar's music into each beat; and a song heard at the model's level (pp, ff,
    one velocity: `musictx.io.dynamics`; ``say_off``: whether to name the option that stops it)."""
    moved = f"; {line}" if song.read.registers and (line := song.read.registers.line()) else ""
    heard = f"; {line}" if (line := song.dynamics.line(say_off, "the song")) else ""
    return moved + heard + _meter_said(song)


def _meter_said(song: SongBars) -> str:
    if song.read.meter_found:  # its bars found from the music, or its beat file's meter over its own
        return f"; {song.read.meter_found}"
    signatures = song.read.score.time_signatures
    if not signatures or any(t.numerator > 1 for t in signatures):
        return ""
    return (f"; careful: {Path(song.path).name} says {signatures[0].numerator}/{signatures[0].denominator} "
            "throughout, so each of its bars is one beat long and the new music is packed into it: give the "
            "file its real meter (or put POP909's beat_midi.txt beside it)")


def parse_bars(spec, song: SongBars) -> tuple[int, int]:
    """``"9-12"`` (1-based, inclusive; or one bar ``"9"``) as the 0-based range [s, e) of ``song``'s bars."""
    text = str(spec).strip()
    try:
        a, _, b = text.partition("-")
        first, last = int(a), int(b or a)
    except ValueError:
        raise GenerateError(f"bars={spec}: give a bar range as FIRST-LAST, e.g. bars=9-12") from None
    if 1 <= last < first <= song.n_bars:  # both in the song, the wrong way round
        raise GenerateError(f"bars={spec}: the first bar comes after the last (give FIRST-LAST: bars={last}-{first})")
    if not 1 <= first <= last <= song.n_bars:
        raise MidiReadError(song.path, f"bars={spec} is outside the song's bars 1-{song.n_bars}")
    return first - 1, last


def tracks_named(song: SongBars, names) -> list[int] | None:
    """The indices of the file's tracks named in ``names`` (case-insensitive; every track of a name); None: all.
    A track of a part the model never learnt (drums, for `pop`) cannot be redone: MidiReadError naming it."""
    if not names:
        return None
    wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    tracks = song.read.tracks.tracks
    found = {n: [k for k, t in enumerate(tracks) if t.name.strip().lower() == n.lower()] for n in wanted}
    unknown = [n for n, ks in found.items() if not ks]
    if unknown:
        raise MidiReadError(song.path, f"no track named {', '.join(unknown)} (tracks: "
                                       f"{', '.join(t.name or '(unnamed)' for t in tracks)})")
    named = sorted({k for ks in found.values() for k in ks})
    strangers = unlearnt(song.learnt, song.read.tracks, song.read.score)
    if refused := [tracks[k] for k in named if tracks[k] in strangers]:
        raise MidiReadError(song.path, f"{', '.join(t.describe() for t in refused)}: a part the model never learnt "
                                       f"(it learnt {parts_named(song.learnt)}), so it cannot redo it")
    return named


def programs_of_names(song: SongBars, names) -> set[int] | None:
    """The internal programs of the file's tracks named in ``names`` (`tracks_named`, `programs_of`)."""
    return programs_of(song, tracks_named(song, names))


def programs_of(song: SongBars, named: list[int] | None) -> set[int] | None:
    """The internal programs of the file's tracks at ``named`` (their indices); None: every track, or every track
    of a part the model learnt where the file has others (they keep their notes)."""
    if named is None:
        strangers = unlearnt(song.learnt, song.read.tracks, song.read.score)
        if not strangers:
            return None
        learnt = {t.program for t in song.read.tracks.tracks if t.program in song.learnt}
        if not learnt:
            raise MidiReadError(song.path, f"none of its tracks ({song.read.tracks.describe()}) is a part the model "
                                           f"learnt ({parts_named(song.learnt)}), so it has nothing to redo")
        return learnt
    return {song.read.tracks.tracks[k].program for k in named}


def melody_song(tok, path: str | os.PathLike, beats="auto", anew: bool = False,
                learnt: tuple[int, ...] | None = None, level: LevelRule | None = None) -> SongBars:
    """``path`` read for accompaniment. Its melody is the track whose name says so (melody, vocal, lead ...);
    a file of one unnamed track is taken as the melody; otherwise it is an error naming the file. ``anew``: a
    whole song (its melody, BRIDGE and PIANO) is read as its melody alone, to be accompanied again. ``learnt``:
    the parts (programs) the model learnt; a track of another part (a band's bass, its drums) is heard as it is
    (its notes' pitches and times are ids the model knows; the tracks' harmony then sounds in the accompaniment:
    docs/pop.md) and stays in the file as it is, said in one line (`SongBars.strangers`). Two tracks named for one
    role (two PIANO) are heard as that part, said in one line (`SongBars.joined`)."""
    read, dynamics = read_fitted(tok, path, beats, level)  # tracks by octaves into the pitches, a pp song louder
    read = _roles_as_one(read)
    own: tuple[tuple[int, TrackInfo], ...] = ()
    whole: tuple[int, np.ndarray] | None = None  # a whole song's bars and bar lines, before its accompaniment goes
    own_ids = None
    if anew and is_whole_song(read):
        whole = _bar_count(tok, read), bar_lines(read.score)
        own_ids = _song_ids(tok, read, path)
        mine = {ROLE_PROGRAMS[r] for r in ACCOMPANIMENT}  # its own accompaniment, written anew; the rest is heard
        own = tuple((k, t) for k, t in enumerate(read.tracks.tracks) if t.program in mine)
        keep = [k for k, t in enumerate(read.tracks.tracks) if t.program not in mine]
        read.score.tracks = [read.score.tracks[k] for k in keep]
        read = read._replace(tracks=TrackMap(tuple(read.tracks.tracks[k] for k in keep)))
    infos = list(read.tracks.tracks)
    if not any(t.program == ROLE_PROGRAMS[MELODY] for t in infos):
        pitched = [k for k, t in enumerate(infos) if not t.is_drum]
        if len(pitched) != 1:
            raise MidiReadError(str(path), f"no melody track among {read.tracks.describe()}: name the melody "
                                           "track 'melody' (or give a file of the melody alone)")
        k = pitched[0]
        read.score.tracks[k].program = ROLE_PROGRAMS[MELODY]
        infos[k] = TrackInfo(ROLE_PROGRAMS[MELODY], infos[k].name, infos[k].real_program)
        read = read._replace(tracks=TrackMap(tuple(infos)))  # its meter line kept
    strangers = tuple(t.describe() for t in unlearnt(learnt, read.tracks, read.score))
    song = replace(read_song(tok, path, read), left_out=tuple(t.name for _, t in own), own=own, learnt=learnt,
                   strangers=strangers, dynamics=dynamics, joined=_joined(read.tracks), own_ids=own_ids)
    return song if whole is None else _as_long_as(tok, song, *whole)


def _roles_as_one(read: ReadScore) -> ReadScore:
    """``read`` with every track named for a role on that role's program: reading gives each track a program of its
    own, so a second track named PIANO was program 1, a part the model never learnt (the line said so of a PIANO),
    and a second MELODY took BRIDGE's program 81. Tracks of one program are one stream in the tokens."""
    infos = list(read.tracks.tracks)
    for k, t in enumerate(infos):
        role = None if t.is_drum else role_of(t.name)
        if role is not None and t.program != ROLE_PROGRAMS[role]:
            read.score.tracks[k].program = ROLE_PROGRAMS[role]
            infos[k] = replace(t, program=ROLE_PROGRAMS[role])
    return read._replace(tracks=TrackMap(tuple(infos)))


def _joined(tracks: TrackMap) -> tuple[tuple[str, int], ...]:
    """(role, how many) of each role two or more of ``tracks`` play."""
    counts = Counter(part_name(t.program) for t in tracks.tracks if t.program in ROLE_PROGRAMS.values())
    return tuple((role, n) for role, n in counts.items() if n > 1)


def _song_ids(tok, read: ReadScore, path) -> np.ndarray:
    """The ids of ``read`` as it is (every track), EOS dropped; ``read`` is left as it was."""
    ids = tok.encode_read(read._replace(score=read.score.copy()), path)
    return ids[ids != tok.eos_id]


def _bar_count(tok, read: ReadScore) -> int:
    """How many bars the tokenizer writes for ``read`` (up to its last note's)."""
    return int(np.count_nonzero(tok.encode_score(read.score.copy()) == tok.bar_id))


def _as_long_as(tok, song: SongBars, bars: int, lines: np.ndarray) -> SongBars:
    """``song`` (a whole song's melody alone) with empty bars after its melody's last up to ``bars``, the whole song's,
    and that song's bar lines: an outro after the last sung note is accompanied too, where the melody's own bars
    would end the song there (its old accompaniment left out)."""
    missing = bars - song.n_bars
    if missing <= 0:
        return song
    meter = song.ids[tok.type_of[song.ids] == "TimeSig"][-1:]  # an empty bar: its Bar id, then the meter's
    empty = np.concatenate([[tok.bar_id], meter]).astype(song.ids.dtype)
    ids = np.concatenate([song.ids, np.tile(empty, missing)])
    return replace(song, ids=ids, starts=bar_starts(ids, tok.bar_id), lines=lines)


def is_whole_song(read: ReadScore) -> bool:
    """Whether a read file has a melody and every accompaniment track the model writes (BRIDGE, PIANO)."""
    present = {t.program for t in read.tracks.tracks}
    return {ROLE_PROGRAMS[r] for r in (MELODY, *ACCOMPANIMENT)} <= present


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


def left_out_clause(song: SongBars, bars: tuple[int, int] | None = None) -> str:
    """The clause saying a whole song's own accompaniment was written anew in the bars asked (``bars``: [s, e),
    None: not said) and kept in the others, which roles two tracks each play, and which tracks are of parts the
    model never learnt ("" when none)."""
    said = _own_said(song, bars)
    for role, n in song.joined:
        said += f"; its {n} {role} tracks are heard as the one {role} part the model knows, each kept as it is"
    if song.strangers:
        one = len(song.strangers) == 1
        said += (f"; {' and '.join(song.strangers)} {'is a part' if one else 'are parts'} the model never learnt (it "
                 f"learnt {parts_named(song.learnt)}): it hears {'it' if one else 'them'} and plays with "
                 f"{'it' if one else 'them'}; {'it stays as it is' if one else 'they stay as they are'}")
    return said


def _own_said(song: SongBars, bars: tuple[int, int] | None) -> str:
    """" (its own BRIDGE and PIANO replaced ...)" of a whole song accompanied anew; "" for another song."""
    if not song.own:
        return ""
    counts = Counter(part_name(t.program) for _, t in song.own)
    names = " and ".join(role if n == 1 else f"{n} {role} tracks" for role, n in counts.items())
    shared = "".join(f", the new {role} shared among its {n} by register" for role, n in counts.items() if n > 1)
    if bars is not None and bars[0] == 0 and bars[1] >= song.n_bars:
        return f" (its own {names} replaced: written anew for its melody{shared})"
    where = "there" if bars is None else f"in bars {bars[0] + 1}-{bars[1]}"
    return f" (its own {names} replaced {where} by ones written anew for its melody{shared}, kept in its other bars)"
