"""POP909's extra arrangements (``NNN/versions/NNN-vK.mid``) made ready for the metrical tokenizer, and the
line that tells a user of the performance tokenizer why it needs none of this (`one_stream_note`).

Each song of POP909 has one main file (``NNN/NNN.mid``: tracks MELODY, BRIDGE, PIANO, a ``beat_midi.txt``
beside it) and, in ``versions/``, 0-7 arrangements by other arrangers: the same song, length and (mostly)
tempo, usually the same melody, another accompaniment. ``musictx-prep ... pop_versions=train`` puts them in
the train split of their song (a version's split key is its main file's, `data_prep.sources.piece_key`, and
versions of validation and test songs are left out), each made ready here:

- **Roles by name, then by order.** Track names vary (``MELODY``/``CAU``/``PIANO``, ``Melody``/``Cau``/
  ``Piano``, ``Grandeur 1``, ``PIANO`` twice, stray spaces...). A name with ``melod`` is the melody, ``cau``
  or ``bridge`` the secondary melody (BRIDGE in the main files), a name that is only ``piano`` the
  accompaniment; any other track takes its role from its place (first: melody, second: bridge, later:
  piano). Tracks of one role are merged into one track named as in the main files, so the tokens give them
  the main files' programs (`musictx.io.score_prep.ROLE_PROGRAMS`).
- **The melody must be the song's.** Over half of the main file's melody notes (onset within 1/6 of a
  quarter note, same pitch, an octave up or down allowed for the whole melody) must be in the version's
  melody track; else the version is skipped with a one-line reason. This also checks the timing in quarter
  notes, so the main file's bars (its ``beat_midi.txt``: meter and pickup) fit the version and are used.

The performance tokenizer (the default) reads a version as it reads every file: each track's pedal
sustains that track's notes, then all tracks become one piano stream in seconds. Track names change no
token (renaming them gives the same ids), so no roles are needed; and a melody moved by a few beats or a
semitone fails the check above but is still the song (52 of the 57 versions of train songs it fails on
all 800 songs), and seconds have no bars to misplace, so versions are not checked there. The run says so
in one line, as it merges their tracks.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from symusic import Score, Track

from data_prep.sources import SourceFile, main_of
from musictx.io.chord_labels import Chords
from musictx.io.midi_timing import read_timing
from musictx.io.score_prep import Meter, apply_meter, beats_file_of, chord_file_of, read_meter

ROLES = ("MELODY", "BRIDGE", "PIANO")
MIN_MELODY_SHARE = 0.5  # of the main file's melody notes found in the version's melody
ONSET_TOLERANCE_Q = 1 / 6  # quarter notes
_BY_NAME = [("MELODY", re.compile(r"melod", re.I)), ("BRIDGE", re.compile(r"cau|bridge", re.I)),
            ("PIANO", re.compile(r"^\W*piano\W*$", re.I))]


# skipped.tsv's reasons for versions left out by choice (not unusable: `choose_versions`)
NOT_USED = "version not used: "
OFF = f"{NOT_USED}pop_versions=skip (pop_versions=train puts the versions of train songs in train)"
_LEAK = "in train it would leak its held-out song into training"


class VersionSkipped(ValueError):
    """A version that is not used; the message is the one-line reason for skipped.tsv."""


def main_path(path: str | Path) -> Path | None:
    """The main file of a version's path (``.../NNN/versions/NNN-vK.mid`` -> ``.../NNN/NNN.mid``), or None
    when ``path`` is not a version or its main file is missing."""
    main = main_of(Path(path).as_posix())
    return Path(main) if main is not None and Path(main).is_file() else None


def versions_of(files: list[SourceFile]) -> set[str]:
    """The relative names of the POP909 versions among ``files`` whose song's main file is listed too (a
    ``versions/`` file without it is an ordinary file)."""
    listed = {f.rel for f in files}
    return {f.rel for f in files if main_of(f.rel) in listed}


def held_out(split: str, moved: bool = False) -> str:
    """skipped.tsv's reason for a version of a song in ``split`` (validation or test; ``moved``: moved there
    from train to fill it, `data_prep.splits`)."""
    where = f"was moved to the empty {split} split" if moved else f"is in {split}"
    return f"{NOT_USED}its song {where} ({_LEAK})"


def choose_versions(files: list[SourceFile], mode: str) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """(``files`` with POP909's versions left out (``skip``) or kept in the train split only (``train``: a
    version's split is its song's), (name, reason) of each version left out). The versions of validation and
    test songs stay out, so those splits are as without versions and no held-out song is trained on."""
    versions = versions_of(files)
    kept, left_out = [], []
    for f in files:
        if f.rel not in versions or (mode == "train" and f.split == "train"):
            kept.append(f)
        else:
            left_out.append((f.rel, OFF if mode != "train" else held_out(f.split)))
    return kept, left_out


def summary(left_out: list[tuple[str, str]]) -> str:
    """The versions of ``left_out`` (rows of `choose_versions` and moved songs) in a few words, by cause:
    "13 version(s) of 6 song(s) not used (pop_versions=skip)"; one line, however many there are."""
    off = [rel for rel, why in left_out if why == OFF]
    held = [rel for rel, why in left_out if why != OFF]
    causes = ((off, "", "pop_versions=skip"),
              (held, "validation/test ", "in train they would leak held-out songs into training"))
    parts = [f"{len(rels)} version(s) of {len({main_of(r) for r in rels})} {kind}song(s) not used ({why})"
             for rels, kind, why in causes if rels]
    return ", ".join(parts)


def one_stream_note(used: list[str]) -> list[str]:
    """The line a performance-tokenizer run prints about the POP909 versions ``used`` (relative names in
    train), none without any: their tracks were merged, and a user who read of roles must hear why."""
    if not used:
        return []
    songs = len({main_of(rel) for rel in used})
    return [f"pop_versions=train: {len(used)} version(s) of {songs} POP909 song(s) in train, their tracks merged "
            "into one piano stream as in every file (the performance tokenizer has no roles, so their track names "
            "need no mapping and their melodies no check; tokenizer=remi does both)"]


def roles_of(names: list[str]) -> list[str]:
    """The role of each track name: by name when it says one, else by its place."""
    out = []
    for k, name in enumerate(names):
        role = next((r for r, pattern in _BY_NAME if pattern.search(name or "")), None)
        out.append(role or ROLES[min(k, 2)])
    return out


def with_roles(score: Score) -> Score:
    """A copy of ``score`` with one track per role present (MELODY, BRIDGE, PIANO, in that order), each the
    merge of the tracks of that role, program 0 as in the main files. Drum tracks are dropped."""
    tracks = [t for t in score.tracks if not t.is_drum]
    roles = roles_of([t.name for t in tracks])
    out = Score(score.ticks_per_quarter)
    out.tempos, out.time_signatures, out.key_signatures = score.tempos, score.time_signatures, score.key_signatures
    for role in ROLES:
        mine = [t for t, r in zip(tracks, roles, strict=True) if r == role and t.note_num()]
        if not mine:
            continue
        merged = Track(role, 0, False)
        for t in mine:
            merged.notes.extend(t.notes)
        merged.notes.sort(key=lambda n: (n.time, n.pitch))
        out.tracks.append(merged)
    return out


def _melody_notes(score: Score) -> np.ndarray:
    """(onset in quarters, pitch) rows of the MELODY track of a score whose tracks are named by role."""
    tpq = score.ticks_per_quarter
    rows = [(n.time / tpq, n.pitch) for t in score.tracks if t.name.strip().upper() == "MELODY" for n in t.notes]
    return np.array(rows, dtype=np.float64).reshape(-1, 2)


def melody_share(main: Score, version: Score) -> float:
    """Share of the main file's melody notes found in the version's melody: the same pitch (the whole melody
    may sit an octave higher or lower) with the onset within 1/6 of a quarter note, the best of the three
    octaves. Compared in quarter notes, as the tokens count time: a version whose tempo differs a little
    still counts, and one shifted by a beat does not."""
    want, got = _melody_notes(main), _melody_notes(version)
    if len(want) == 0:
        return 0.0
    have = {(int(p), int(b)) for q, p in got for b in (np.round(q / ONSET_TOLERANCE_Q),)}
    best = 0
    for shift in (0, -12, 12):
        found = sum(any((int(p) + shift, int(np.round(q / ONSET_TOLERANCE_Q)) + d) in have for d in (-1, 0, 1))
                    for q, p in want)
        best = max(best, found)
    return best / len(want)


def version_meter(main: Score, beats: Path, version: Score) -> Meter:
    """The main file's meter (from its beat file) in the version's ticks: its bars fall on the same quarter
    notes, since the melody check found the version's notes there."""
    meter = read_meter(beats, main)
    scale = version.ticks_per_quarter / main.ticks_per_quarter
    return Meter(meter.beats_per_bar, int(round(meter.first_downbeat_tick * scale)),
                 int(round(meter.beat_ticks * scale)))


def read_version(path: str | Path) -> tuple[Score, int]:
    """The version's score with its tracks named by role and its song's bars (the main file's
    ``beat_midi.txt``, when there is one), and how far that moved it (ticks). Raises VersionSkipped with the
    reason when it has no melody track, or its melody is not the main file's."""
    main = main_path(path)
    if main is None:
        raise VersionSkipped(f"version without its main file ({main_of(Path(path).as_posix())})")
    raw = Score(str(path))
    score = with_roles(raw)
    names = ", ".join(repr(t.name) for t in raw.tracks) or "none"
    if not any(t.name == "MELODY" for t in score.tracks):
        raise VersionSkipped(f"version: no melody track (tracks {names})")
    main_score = Score(str(main))
    share = melody_share(main_score, score)
    if share <= MIN_MELODY_SHARE:
        raise VersionSkipped(f"version: melody differs from {main.name}'s ({share:.0%} of its melody notes "
                             f"shared, needs > {MIN_MELODY_SHARE:.0%}; tracks {names})")
    beats = beats_file_of(main)
    shift = apply_meter(score, version_meter(main_score, beats, score)) if beats is not None else 0
    return score, shift


def version_chords(path: str | Path, version_tpq: int, shift: int) -> tuple[np.ndarray, list[str]] | None:
    """(each chord's start in the version's read ticks, its label) from its main file's chord file (POP909's
    ``chord_midi.txt``), or None without one: the version keeps its song's quarter notes (the melody check),
    so the main file's chords, in its quarter notes, are the version's."""
    main = main_path(path)
    found = chord_file_of(main) if main is not None else None
    if found is None:
        return None
    chords = Chords.read(found, strict=False)
    timing = read_timing(main)
    starts = np.rint(timing.ticks(chords.starts) * (version_tpq / timing.tpq)).astype(np.int64) + shift
    return starts, list(chords.labels)
