"""Harmony in the tokens: a ``Chord_<root>:<quality>`` event in the REMI stream, as in the REMI paper (Huang &
Yang 2020), so that a model writes each bar's chord before its notes and a progression is a short pattern of
ids it can carry on. numpy only.

Where the chords come from: a song's chord file (POP909's ``chord_midi.txt`` beside the MIDI file, the lab
format of `musictx.io.chord_labels`). Where they go: at every bar line the chord sounding there, and where
a chord changes inside a bar, at its position; each right after its ``Position`` id (a ``Position`` is put in
where the bar has no note there), before the tempo and the notes:

    Bar TimeSig_4/4 Position_0 Chord_G:min Program_0 Pitch_55 ... Position_8 Chord_Eb:sus Program_0 ...

The qualities are POP909's fifteen in `CHORD_QUALITIES`' eight families (a sixth is its triad, a
suspension one family, the half-diminished and diminished seventh with the diminished triad). ``Chord_N``: no
chord. The ids are appended after MidiTok's own (`musictx.io.metrical_tokenizer`), so every other id keeps its
meaning, and decoding drops them (they carry no notes).
"""

from __future__ import annotations

import numpy as np

from musictx.io.chord_labels import QUALITIES, chord_quality, chord_root

ROOT_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
# a label's quality -> its family in the tokens (module docstring)
QUALITY_FAMILY = {"maj": "maj", "maj6": "maj", "min": "min", "min6": "min", "minmaj7": "min", "7": "7",
                  "maj7": "maj7", "min7": "min7", "dim": "dim", "hdim7": "dim", "dim7": "dim", "aug": "aug",
                  "sus2": "sus", "sus4": "sus", "sus4(b7)": "sus"}
# each family's chord tones above its root (a sus family is sus4's), for guessing a chord from the notes
TEMPLATES = {family: QUALITIES[quality] for family, quality in (
    ("maj", "maj"), ("min", "min"), ("7", "7"), ("maj7", "maj7"), ("min7", "min7"), ("dim", "dim"), ("aug", "aug"),
    ("sus", "sus4"))}
CHORD_QUALITIES = tuple(TEMPLATES)  # the families, in the order of their ids
NO_CHORD_TOKEN = "Chord_N"
CHORD_TOKENS = (NO_CHORD_TOKEN, *(f"Chord_{r}:{q}" for r in ROOT_NAMES for q in CHORD_QUALITIES))
CHORD_PROBE_TICKS_SHARE = 0.25  # a chord that starts within this share of a position after a bar line is that bar's


def chord_token(label: str) -> str:
    """The token of a chord label (``Eb:sus2`` -> ``Chord_D#:sus``); `NO_CHORD_TOKEN` for ``N`` or a label this
    does not know."""
    root, quality = chord_root(label), chord_quality(label)
    if root < 0 or quality not in QUALITY_FAMILY:
        return NO_CHORD_TOKEN
    return f"Chord_{ROOT_NAMES[root]}:{QUALITY_FAMILY[quality]}"


def moved_chord(token: str, semitones: int) -> str:
    """A chord event's token with its root ``semitones`` up (``Chord_N`` stays)."""
    if token == NO_CHORD_TOKEN:
        return token
    root, quality = token[len("Chord_"):].split(":")
    return f"Chord_{ROOT_NAMES[(ROOT_NAMES.index(root) + semitones) % 12]}:{quality}"


def bar_grid(tok, ids: np.ndarray, tpq: int) -> list[tuple[int, int, float, int]]:
    """(index of the Bar id, its start tick, ticks per position, positions in it) of each bar of ``ids``, in a
    score of ``tpq``
    ticks per quarter whose first bar line is tick 0 (as MidiTok writes it: a bar as long as its TimeSig,
    4/4 until one says otherwise; a position is one ``per_beat``-th of the meter's beat)."""
    per_beat = tok.miditok.config.max_num_pos_per_beat
    signature = {i: tok.id_to_token(int(i)).split("_")[1] for i in tok.ids_of_type("TimeSig")}
    bars, tick, bar_ticks, position_ticks = [], 0, 4 * tpq, tpq / per_beat
    ids = np.asarray(ids, dtype=np.int64)
    for k in np.flatnonzero(ids == tok.bar_id).tolist():
        tick += bar_ticks if bars else 0
        if k + 1 < len(ids) and int(ids[k + 1]) in signature:  # MidiTok writes the meter right after each Bar
            num, den = map(int, signature[int(ids[k + 1])].split("/"))
            bar_ticks, position_ticks = num * tpq * 4 // den, tpq * 4 / den / per_beat
        bars.append((k, tick, position_ticks, round(bar_ticks / position_ticks)))
    return bars


def chord_events(tok, ids: np.ndarray, tpq: int, starts_ticks: np.ndarray, labels: list[str]
                 ) -> dict[int, list[tuple[int, int]]]:
    """{bar number: [(position, chord id)]}: the chord sounding at each bar line of ``ids``, and each chord
    that starts inside a bar at its position (rounded to the grid), one chord a position (the last wins),
    where it differs from the chord before it."""
    bars = bar_grid(tok, ids, tpq)
    if not bars:
        return {}
    ids_of = tok.vocab
    tokens = [ids_of[chord_token(label)] for label in labels]
    order = np.argsort(starts_ticks, kind="stable")
    starts, tokens = np.asarray(starts_ticks)[order], [tokens[k] for k in order]
    events: dict[int, dict[int, int]] = {}
    lines = [line for _, line, _, _ in bars]
    for b, (_, line, position_ticks, _) in enumerate(bars):
        at = int(np.searchsorted(starts, line + CHORD_PROBE_TICKS_SHARE * position_ticks, side="right")) - 1
        events.setdefault(b, {})[0] = tokens[at] if at >= 0 else ids_of[NO_CHORD_TOKEN]
    for start, token in zip(starts.tolist(), tokens, strict=True):
        b = max(int(np.searchsorted(lines, start, side="right")) - 1, 0)
        position = round((start - lines[b]) / bars[b][2])
        if 0 < position < bars[b][3]:  # at a bar line (or rounded onto the next): that bar's own chord
            events[b][position] = token
    out = {}
    for b, chords in events.items():  # a change to the chord already sounding is no change
        kept = sorted(chords.items())
        out[b] = [e for k, e in enumerate(kept) if k == 0 or e[1] != kept[k - 1][1]]
    return out


def insert_chords(tok, ids: np.ndarray, events: dict[int, list[tuple[int, int]]]) -> np.ndarray:
    """``ids`` with each bar's chord events (`chord_events`) in place: after the bar's ``Position`` id of the
    same position, or after a ``Position`` put in before the first later one (or the next Bar, or the end)."""
    position_of = tok.numbers_of("Position")
    position_id = {int(position_of[i]): int(i) for i in tok.ids_of_type("Position")}
    out: list[int] = []
    pending: list[tuple[int, int]] = []
    bar = -1

    def flush(before: int | None) -> None:  # the pending chords earlier than position ``before`` (None: all)
        while pending and (before is None or pending[0][0] < before):
            position, chord = pending.pop(0)
            out.extend((position_id[position], chord))

    for i in np.asarray(ids, dtype=np.int64).tolist():
        if i == tok.bar_id:
            flush(None)
            bar += 1
            pending = [e for e in events.get(bar, []) if e[0] in position_id]
            out.append(i)
            continue
        if position_of[i] >= 0:
            flush(int(position_of[i]))
            out.append(i)
            if pending and pending[0][0] == position_of[i]:
                out.append(pending.pop(0)[1])
            continue
        out.append(i)
    flush(None)
    return np.asarray(out, dtype=np.int64)


MIN_SOUNDING_BEATS = 0.5  # a half bar with less sounding time than this (all notes together) gets no chord
ROOT_WEIGHT = 1.15  # a template's root counts this much more than its other tones: of equal fits, root position wins


def _template_matrix() -> tuple[np.ndarray, list[str]]:
    """(12 * 8, 12) unit vectors of each root's chord of each family (its root weighing `ROOT_WEIGHT`), and
    their labels (``C:maj`` ...)."""
    rows, labels = [], []
    for root in range(12):
        for quality, tones in TEMPLATES.items():
            v = np.zeros(12)
            v[[(root + t) % 12 for t in tones]] = 1.0
            v[root] = ROOT_WEIGHT
            rows.append(v / np.linalg.norm(v))
            labels.append(f"{ROOT_NAMES[root]}:{quality}")
    return np.asarray(rows), labels


def guess_chords(tok, ids: np.ndarray, score) -> tuple[np.ndarray, list[str]]:
    """(start ticks, labels) of a chord guessed for each half bar of ``ids`` from ``score``'s pitched notes (the
    read score ``ids`` encode): the template (`TEMPLATES`, 12 roots) closest to the half bar's pitch classes
    weighted by sounding time, ``N`` where little sounds. For a song without a chord file (a user's seed)."""
    tpq = score.ticks_per_quarter
    notes = [t.notes.numpy() for t in score.tracks if not t.is_drum]
    on = np.concatenate([n["time"] for n in notes]) if notes else np.zeros(0, np.int64)
    off = on + (np.concatenate([n["duration"] for n in notes]) if notes else 0)
    pc = np.concatenate([n["pitch"] for n in notes]) % 12 if notes else np.zeros(0, np.int64)
    templates, labels = _template_matrix()
    starts, out = [], []
    for _, line, position_ticks, positions in bar_grid(tok, ids, tpq):
        half = positions // 2 * position_ticks
        for a, z in ((line, line + half), (line + half, line + positions * position_ticks)):
            weight = np.clip(np.minimum(off, z) - np.maximum(on, a), 0, None)  # (N,) ticks sounding in [a, z)
            profile = np.bincount(pc, weights=weight, minlength=12)[:12] / tpq  # (12,) beats
            starts.append(int(round(a)))
            if profile.sum() < MIN_SOUNDING_BEATS:
                out.append("N")
                continue
            out.append(labels[int(np.argmax(templates @ (profile / np.linalg.norm(profile))))])
    return np.asarray(starts, dtype=np.int64), out
