"""Which note-off ends which note-on, on raw MIDI note events (no torch): the rule both readers of
`musictx.io.midi_io` follow, and the grace notes it must first set aside.

Events come in file order, each with a ``key`` (one per track, channel and pitch) and whether it strikes
(a note-on with velocity above 0) or releases (a note-off, or a note-on with velocity 0).

**Grace notes written off before on.** music21 writes a grace note (a note of no written length) as its
note-off followed by its note-on on one tick. Read first in, first out, that note-off finds nothing sounding
and is ignored; the note-on then takes the release of the next note of its key, every later note of that
key takes the one after, and the last is never released and drops out (O'Neill's reel 1176, as music21
writes it: notes of one beat ran on to 10, and its final G went missing). So a note-off that finds its key
silent and is followed on its own tick by a note-on of that key is the note-on's own release: the pair is a
zero-length note, which sounds nothing and is left out, as a note-off on its note-on's tick always is (and
as ``data_prep/folk.py`` leaves grace notes out of the folk tunes it writes). One guard keeps other files as
they were: a DAW may send a note-off twice and then strike the key again on that tick, the new note keeping
a release of its own further on; so the pair is read as a grace note only where the notes after it pair
among themselves, i.e. where its note-on would otherwise take a later note's release (`grace_events`). A
note-off that ends a sounding note before a re-strike on its tick (most DAWs' order) is untouched.
"""

from __future__ import annotations

import numpy as np


def pair_note_events(key: np.ndarray, is_on: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pair note-ons with note-offs first in, first out; events in file order, ``key`` one per
    (track, channel, pitch). Returns the indices of the paired note-ons and of their note-offs.

    Within a key the k-th note-off that finds a note sounding ends the k-th note-on; a note-off that
    finds none is skipped and note-ons left over at the end stay unpaired. Vectorised: no Python loop.
    """
    key, is_on = np.asarray(key, dtype=np.int64), np.asarray(is_on, dtype=bool)
    n = len(key)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(key, kind="stable")  # events grouped by key, file order kept within a key
    k, on = key[order], is_on[order]
    first = np.concatenate([[True], k[1:] != k[:-1]])
    group = np.cumsum(first) - 1
    step = np.where(on, 1, -1)
    balance = np.cumsum(step)
    balance -= (balance - step)[first][group]  # per key: note-ons so far minus note-offs so far
    # Sounding notes = balance minus its lowest value so far (floored at 0): each unmatched note-off
    # lowers that minimum. Offsetting each key by more than any balance keeps the running minimum
    # from reaching across keys.
    offset = group * (2 * n + 1)
    low = np.minimum(np.minimum.accumulate(balance - offset), -offset) + offset
    low_before = np.concatenate([[0], low[:-1]])
    low_before[first] = 0
    paired_off = ~on & (balance >= low_before)  # some note was sounding when this note-off came
    on_pos, off_pos = np.flatnonzero(on), np.flatnonzero(paired_off)
    off_keys = k[off_pos]
    rank = np.arange(len(off_pos)) - np.searchsorted(off_keys, off_keys, side="left")
    partner = on_pos[np.searchsorted(k[on_pos], off_keys, side="left") + rank]
    return order[partner], order[off_pos]


def grace_events(tick: np.ndarray, key: np.ndarray, is_on: np.ndarray) -> np.ndarray:
    """(N,) bool: the note-offs and note-ons of the grace notes written off before on (see the module's
    docstring), to be left out before pairing. Vectorised for the keys no such pair can touch (nearly every
    file has none); the few keys left are walked event by event."""
    tick, key, is_on = (np.asarray(a, dtype=np.int64) for a in (tick, key, is_on))
    is_on = is_on.astype(bool)
    out = np.zeros(len(key), bool)
    silent = ~is_on  # note-offs that find their key silent, read first in, first out
    silent[pair_note_events(key, is_on)[1]] = False
    if not silent.any():
        return out
    # only a silent key's note-off with a note-on of that key on its tick can start a grace note
    code = key * (int(tick.max()) + 1) + tick  # one number a (key, tick): int64 holds any real file's
    hit = np.isin(code[silent], code[is_on])
    for k in np.unique(key[silent][hit]):
        where = np.flatnonzero(key == k)
        out[where[_grace_of_key(tick[where], is_on[where])]] = True
    return out


def _grace_of_key(tick: np.ndarray, is_on: np.ndarray) -> np.ndarray:
    """Indices of one key's events (file order) that are grace notes' note-offs and note-ons."""
    ticks, sounding, silent_offs, pairs = tick.tolist(), 0, [], []
    for i, (t, on) in enumerate(zip(ticks, is_on.tolist(), strict=True)):
        if silent_offs and ticks[silent_offs[0]] != t:
            silent_offs = []  # a note-off with no note-on after it on its tick stays ignored
        if on and silent_offs:
            pairs.append((silent_offs.pop(0), i))
        elif on:
            sounding += 1
        elif sounding:
            sounding -= 1
        else:
            silent_offs.append(i)
    # Last pair first, the later grace notes already out: a pair is a grace note when the notes after it,
    # read with nothing sounding, never release a silent key (its note-on takes no later note's release).
    kept, grace = np.ones(len(tick), bool), []
    for off, on in reversed(pairs):
        after = np.flatnonzero(kept[on + 1:]) + on + 1
        if (np.cumsum(np.where(is_on[after], 1, -1)) >= 0).all():
            kept[[off, on]] = False
            grace += [off, on]
    return np.array(sorted(grace), dtype=np.int64)
