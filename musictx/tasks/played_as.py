"""A seed's tracks played as the parts a model learnt, and the new notes handed back to them.

`pop` learnt POP909's three parts (MELODY, BRIDGE, PIANO: programs 80, 81 and 0 inside musictx); a user's band has
others: a bass, a guitar, strings, an unnamed flute. A track of a part the model never learnt would get no new note
(`unlearnt`), so before the seed is encoded each such pitched track is
given a learnt part to be played as (`play_as_learnt`):

- a melodic line (one note at a time at least ``MONOPHONIC`` of its onsets, above the bass's register) takes
  MELODY where the seed has no melody, then BRIDGE where it has no counter-melody: the highest line first. In a
  seed of two or more tracks an unnamed line on a learnt part's program (a melody played on the piano's program
  0, which the tokenizer reads as the PIANO part) is such a line too;
- every other one (a bass, chords, a pad) joins PIANO, beside the seed's own piano if there is one: POP909's
  piano plays the bass line with its left hand and the chords with its right.

Tracks that share a part are one stream in the tokens (MidiTok keys a note's track by its program), so the model
reads them as the part it knows. Written back (`hand_back`), each seed note goes to the track it came from (matched
by its onset on the token grid and its pitch), and each new note to the track whose register it falls in: the
nearest median pitch, a track that plays one note at a time taking at most one of each onset. Drums have no part
in `pop` and keep their seed notes (said in one line: `parts_said`).

Filling bars (``task=infill``) plays a song's tracks the same way: the part a track shares is redone, and each
track asked for takes the new notes of its register (`owners`); the others keep their own.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np
from symusic import Score

from musictx.io.score_prep import BASS_CEILING, ROLE_PROGRAMS, Track, TrackMap, part_name, role_of
from musictx.listed import listed

MONOPHONIC = 0.8  # the least share of a track's onsets that strike one note for it to be read as a melodic line
MELODIC_ROLES = ("MELODY", "BRIDGE")  # the parts a melodic line may take, in this order
CHORDS_ROLE = "PIANO"  # the part every other track joins


@dataclass
class Member:
    """A seed track that shares its part with others: its map entry and what its seed notes tell."""

    index: int  # its place among the seed's tracks (two tracks may share a name and a program)
    track: Track
    median: float  # of its notes' pitches: the register its new notes come from
    one_at_a_time: bool  # a line (a bass): at most one new note of each onset
    keys: Counter = field(default_factory=Counter)  # (grid onset from the seed's first bar, pitch) of its notes


@dataclass
class PartPlan:
    """Which seed tracks are played as which learnt part; ``shared``: internal program -> its tracks (two or
    more), whose notes `hand_back` shares out."""

    played_as: dict[str, str]  # track description -> the part it is played as
    shared: dict[int, list[Member]]
    order: list[tuple[str, int]]  # (name, real program) of the seed's tracks in the file's order
    # (name, real program) a shared part's stream is decoded with (its map's last track: `TrackMap.by_program`)
    streams: dict[tuple[str, int], int] = field(default_factory=dict)


def _stats(notes: dict[str, np.ndarray]) -> tuple[float, float]:
    """(median pitch, share of onsets that strike one note) of a track's notes (symusic's numpy columns)."""
    if len(notes["pitch"]) == 0:
        return 0.0, 0.0
    per_onset = np.unique(notes["time"], return_counts=True)[1]
    return float(np.median(notes["pitch"])), float(np.mean(per_onset == 1))


def play_as_learnt(score: Score, tracks: TrackMap, learnt: tuple[int, ...]) -> tuple[TrackMap, PartPlan | None]:
    """Give each pitched track of a part outside ``learnt`` a learnt part (module docstring), in ``score`` (in
    place) and in the map returned; None for the plan where every track is one the model knows already."""
    taken = {t.program for t in tracks.tracks}
    sounding = [k for k, t in enumerate(tracks.tracks)  # a track with no notes has no register to hand back by
                if not t.is_drum and len(score.tracks[k].notes)]
    strangers = [k for k in sounding if tracks.tracks[k].program not in learnt]
    # in a band, an unnamed track on a learnt part's program by chance (a melody on program 0, the piano's) may be
    # the melodic line the model should hear as one; a file of one track keeps its part (the bundled motif)
    unnamed = [k for k in sounding if k not in strangers and role_of(tracks.tracks[k].name) is None] \
        if len(sounding) > 1 else []
    if not strangers and not unnamed:
        return tracks, None
    stats = {k: _stats(score.tracks[k].notes.numpy()) for k in range(len(tracks.tracks))}
    lines = sorted((k for k in strangers + unnamed if stats[k][1] >= MONOPHONIC and stats[k][0] > BASS_CEILING),
                   key=lambda k: -stats[k][0])  # melodic lines, the highest first
    given: dict[int, int] = {}
    for role in MELODIC_ROLES:
        if ROLE_PROGRAMS[role] in learnt and ROLE_PROGRAMS[role] not in taken and lines:
            given[lines.pop(0)] = ROLE_PROGRAMS[role]
    if not strangers and not given:
        return tracks, None
    if ROLE_PROGRAMS[CHORDS_ROLE] in learnt:
        given |= {k: ROLE_PROGRAMS[CHORDS_ROLE] for k in strangers if k not in given}
    rows = list(tracks.tracks)
    for k, program in given.items():
        score.tracks[k].program = program
        rows[k] = replace(rows[k], program=program)
    new_map = TrackMap(tuple(rows))
    groups: dict[int, list[int]] = {}
    for k, t in enumerate(rows):
        if not t.is_drum:
            groups.setdefault(t.program, []).append(k)
    shared = {p: [Member(k, rows[k], stats[k][0], stats[k][1] >= MONOPHONIC) for k in ks if len(score.tracks[k].notes)]
              for p, ks in groups.items() if len(ks) > 1 and any(k in given for k in ks)}
    names = described(tracks)  # two tracks of one name (a quartet's violins) are told apart
    played_as = {names[k]: part_name(p) for k, p in sorted(given.items())}
    streams = {(t.name, t.real_program): p for p, t in new_map.by_program().items() if p in shared}
    return new_map, PartPlan(played_as, shared, [(t.name, t.real_program) for t in rows], streams)


def member_of(index: int, track: Track, notes: dict[str, np.ndarray]) -> Member:
    """The `Member` of a track that shares its part: ``notes`` its symusic numpy columns."""
    median, once = _stats(notes)
    return Member(index, track, median, once >= MONOPHONIC)


def remember_seed_notes(plan: PartPlan | None, score: Score, start_tick: int, grid: float) -> None:
    """Note down where each shared track's notes sit from ``start_tick`` (the seed's first bar line, in
    ``score``'s ticks), on a grid of ``grid`` ticks: what `hand_back` sends each seed note home by."""
    if plan is None:
        return
    for member in (m for ms in plan.shared.values() for m in ms):
        notes = score.tracks[member.index].notes.numpy()
        onsets = np.rint((notes["time"] - start_tick) / grid).astype(np.int64)
        member.keys.update(zip(onsets.tolist(), notes["pitch"].tolist(), strict=True))


def hand_back(score: Score, plan: PartPlan | None, grid: float, seed_end: float) -> Score:
    """``score`` (decoded from the seed's first bar line, ``grid`` ticks a token position) with each shared part's
    track split into its members' tracks: the notes before ``seed_end`` to the track they came from, the new ones
    by register (module docstring)."""
    if plan is None or not plan.shared:
        return score
    out = []
    for track in score.tracks:
        program = None if track.is_drum else plan.streams.get((track.name, int(track.program)))
        out += [track] if program is None else _split(track, plan.shared[program], grid, seed_end)
    rank = {key: k for k, key in enumerate(plan.order)}
    score.tracks = sorted(out, key=lambda t: rank.get((t.name, int(t.program)), len(rank)))  # the file's order
    return score


def _split(track, members: list[Member], grid: float, seed_end: float) -> list:
    """The members' tracks of one shared part's decoded ``track``."""
    notes = track.notes.numpy()
    owner = owners(notes, members, grid, seed_end)
    split = []
    for j, member in enumerate(members):
        part = track.copy()
        part.name, part.program = member.track.name, member.track.real_program
        part.notes = [n for n, o in zip(track.notes, owner, strict=True) if o == j]
        split.append(part)
    return split


def owners(notes: dict, members: list[Member], grid: float = 1.0, seed_end: float = float("-inf")) -> np.ndarray:
    """(N,) which of ``members`` each of one shared part's ``notes`` (numpy columns "time", "pitch") goes to:
    a note before ``seed_end`` to the track it came from, on a grid of ``grid`` ticks; every other by register
    (module docstring). The default ``seed_end``: every note is new (bars filled anew)."""
    owner = np.empty(len(notes["pitch"]), dtype=np.int64)
    keys = [m.keys.copy() for m in members]
    medians = np.array([m.median for m in members])
    for i, (time, pitch) in enumerate(zip(notes["time"].tolist(), notes["pitch"].tolist(), strict=True)):
        home = next((j for j, k in enumerate(keys) if k[(round(time / grid), pitch)] > 0), None) \
            if time < seed_end else None
        if home is not None:
            keys[home][(round(time / grid), pitch)] -= 1
        owner[i] = home if home is not None else int(np.argmin(np.abs(medians - pitch)))
    _one_at_a_time(notes, owner, members, seed_end)
    return owner


def _one_at_a_time(notes: dict, owner: np.ndarray, members: list[Member], seed_end: float) -> None:
    """In place: a line's new notes at one onset beyond the first (the nearest its median) go to the nearest
    member that plays chords, where there is one; else (a part shared by lines alone: a string quartet's viola and
    cello) to the nearest other line that strikes nothing there, where there is one; else they stay."""
    chords = [j for j, m in enumerate(members) if not m.one_at_a_time]
    medians = np.array([m.median for m in members])
    for j, member in enumerate(members):
        if not member.one_at_a_time:
            continue
        for time in np.unique(notes["time"][(owner == j) & (notes["time"] >= seed_end)]):
            at = np.flatnonzero((owner == j) & (notes["time"] == time))
            keep = at[np.argmin(np.abs(notes["pitch"][at] - member.median))]
            for i in at[at != keep]:
                free = chords or [m for m in range(len(members)) if m != j and members[m].one_at_a_time
                                  and not ((owner == m) & (notes["time"] == time)).any()]
                if free:
                    owner[i] = min(free, key=lambda c: abs(medians[c] - notes["pitch"][i]))


def described(tracks: TrackMap) -> list[str]:
    """How a message names each track (`Track.describe`); two that it names alike (a quartet's violins) numbered
    from the second, as a sample's summary numbers them: ``Violin (program 40)``, ``Violin (2) (program 40)``."""
    seen: Counter = Counter()
    out = []
    for t in tracks.tracks:
        seen[t.describe()] += 1
        out.append(t.describe(seen[t.describe()]))
    return out


def parts_named(learnt: tuple[int, ...]) -> str:
    """The parts a model learnt, as a message says them: ``MELODY, BRIDGE and PIANO`` (pop's roles by name,
    other programs by number)."""
    parts = [part_name(p) for p in learnt]
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


def unlearnt(learnt: tuple[int, ...] | None, tracks: TrackMap, score: Score) -> list[Track]:
    """The tracks (of ``tracks``, the map of ``score``) of parts outside ``learnt``: the model writes no note on
    them; none where a model records no parts (``learnt`` None). A track without notes (a lyrics or tempo track)
    is no part: nothing of it goes silent."""
    if learnt is None:
        return []
    return [t for t, notes in zip(tracks.tracks, score.tracks, strict=True)
            if t.program not in learnt and len(notes.notes)]


def parts_said(learnt: tuple[int, ...] | None, tracks: TrackMap, score: Score, plan: PartPlan | None,
               keeps: str = "seed notes", drums: str = "") -> str | None:
    """The one line that says which tracks are played as a part the model learnt (``plan``) and which keep
    their own notes (their ``keeps``) and get no new ones; None where every track is a part it knows. ``drums``:
    what the drums among the latter do instead ("play{s} ..."; `musictx.tasks.drum_loop.loop_words`)."""
    played = plan.played_as if plan is not None else {}
    silent = unlearnt(learnt, tracks, score)
    if not played and not silent:
        return None
    # the tracks played as a part are counted past a handful; what the drums and the silent tracks do is always
    # said (a band of 15 tracks had its drum loop cut from the line as "and 6 more")
    said = [listed((f"{track} as {part}" for track, part in played.items()), "; ")] if played else []
    looped = [t for t in silent if t.is_drum] if drums else []
    silent = [t for t in silent if t not in looped]
    if looped:
        said.append(f"{listed(t.describe() for t in looped)} {drums.format(s='s' if len(looped) == 1 else '')}")
    if silent:
        keep = f"keeps its {keeps} and gets" if len(silent) == 1 else f"keep their {keeps} and get"
        said.append(f"{listed(t.describe() for t in silent)} {keep} no new ones")
    shared = " (tracks that share a part get its new notes by register)" if plan and plan.shared else ""
    return f"the model learnt {parts_named(learnt)} only: {'; '.join(said)}{shared}"


def fill_parts_said(learnt: tuple[int, ...] | None, read, plan: PartPlan | None,
                    only: list[int] | None) -> str | None:
    """The line `parts_said` gives for bars filled anew (``read``: the song as read; ``only``: the indices of
    the tracks named, None: all), and where a track named shares its part with one not named, that the other
    keeps its own notes; None where there is nothing to say."""
    if only is not None:  # what concerns the tracks asked for: how each is played, and who keeps what
        names = described(read.tracks)
        asked = {names[k] for k in only}
        played = {d: p for d, p in (plan.played_as if plan else {}).items() if d in asked}
        keeping = [m.index for ms in (plan.shared.values() if plan else ()) for m in ms
                   if m.index not in only and any(o.index in only for o in ms)]
        if not played and not keeping:
            return None
        said = [f"{track} as {part}" for track, part in played.items()]
        if keeping:
            said.append(f"{', '.join(names[k] for k in keeping)} shares its part and keeps its own notes; the "
                        "tracks asked for take the part's new notes of their register")
        return f"the model learnt {parts_named(learnt)} only: {'; '.join(said)}"
    return parts_said(learnt, read.tracks, read.score, plan, keeps="notes there")


def shares(plan: PartPlan | None, program: int, notes: list) -> dict[int, list] | None:
    """{track index: its notes} of one part's new ``notes`` (symusic notes, all new) where the part is shared by
    several tracks (`owners`, by register); None where it is one track's."""
    if plan is None or program not in plan.shared:
        return None
    members = plan.shared[program]
    columns = {"time": np.array([n.time for n in notes], dtype=np.int64),
               "pitch": np.array([n.pitch for n in notes], dtype=np.int64)}
    owner = owners(columns, members)
    return {m.index: [n for n, o in zip(notes, owner, strict=True) if o == j] for j, m in enumerate(members)}
