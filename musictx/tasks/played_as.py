"""A seed's tracks played as the parts a model learnt, and the new notes handed back to them.

`pop` learnt POP909's three parts (MELODY, BRIDGE, PIANO: programs 80, 81 and 0 inside musictx); a user's band has
others: a bass, a guitar, strings, an unnamed flute. A track of a part the model never learnt would get no new note
(`musictx.tasks.continue_metrical.unlearnt_tracks`), so before the seed is encoded each such pitched track is
given a learnt part to be played as (`play_as_learnt`):

- a melodic line (one note at a time at least ``MONOPHONIC`` of its onsets, above the bass's register) takes
  MELODY where the seed has no melody, then BRIDGE where it has no counter-melody: the highest line first;
- every other one (a bass, chords, a pad) joins PIANO, beside the seed's own piano if there is one: POP909's
  piano plays the bass line with its left hand and the chords with its right.

Tracks that share a part are one stream in the tokens (MidiTok keys a note's track by its program), so the model
reads them as the part it knows. Written back (`hand_back`), each seed note goes to the track it came from (matched
by its onset on the token grid and its pitch), and each new note to the track whose register it falls in: the
nearest median pitch, a track that plays one note at a time taking at most one of each onset. Drums have no part
in `pop` and stay silent (said in one line).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np
from symusic import Score

from musictx.io.score_prep import BASS_CEILING, ROLE_PROGRAMS, Track, TrackMap, part_name

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
    strangers = [k for k, t in enumerate(tracks.tracks)  # a track with no notes has no register to hand back by
                 if not t.is_drum and t.program not in learnt and len(score.tracks[k].notes)]
    if not strangers:
        return tracks, None
    stats = {k: _stats(score.tracks[k].notes.numpy()) for k in range(len(tracks.tracks))}
    lines = sorted((k for k in strangers if stats[k][1] >= MONOPHONIC and stats[k][0] > BASS_CEILING),
                   key=lambda k: -stats[k][0])  # melodic lines, the highest first
    given: dict[int, int] = {}
    for role in MELODIC_ROLES:
        if ROLE_PROGRAMS[role] in learnt and ROLE_PROGRAMS[role] not in taken and lines:
            given[lines.pop(0)] = ROLE_PROGRAMS[role]
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
    played_as = {tracks.tracks[k].describe(): part_name(p) for k, p in given.items()}
    streams = {(t.name, t.real_program): p for p, t in new_map.by_program().items() if p in shared}
    return new_map, PartPlan(played_as, shared, [(t.name, t.real_program) for t in rows], streams)


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
    split = []
    for j, member in enumerate(members):
        part = track.copy()
        part.name, part.program = member.track.name, member.track.real_program
        part.notes = [n for n, o in zip(track.notes, owner, strict=True) if o == j]
        split.append(part)
    return split


def _one_at_a_time(notes: dict, owner: np.ndarray, members: list[Member], seed_end: float) -> None:
    """In place: a line's new notes at one onset beyond the first (the nearest its median) go to the nearest
    member that plays chords, where there is one."""
    chords = [j for j, m in enumerate(members) if not m.one_at_a_time]
    if not chords:
        return
    medians = np.array([m.median for m in members])
    for j, member in enumerate(members):
        if not member.one_at_a_time:
            continue
        for time in np.unique(notes["time"][(owner == j) & (notes["time"] >= seed_end)]):
            at = np.flatnonzero((owner == j) & (notes["time"] == time))
            keep = at[np.argmin(np.abs(notes["pitch"][at] - member.median))]
            for i in at[at != keep]:
                owner[i] = min(chords, key=lambda c: abs(medians[c] - notes["pitch"][i]))
