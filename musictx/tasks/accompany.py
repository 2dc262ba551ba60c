"""Writing the missing tracks of a song for its melody (``task=accompany``). Two schemes:

- "lead" (the default; any metrical model, the shipped ``pop`` included): the bars are written as a plain
  continuation with the given tracks played into the stream at their onsets (`musictx.decoding.hooks.given_notes`),
  so the model hears each melody note before it picks the accompaniment struck with it;
- "infill": the infill format with the new tracks taken out of every bar, filled a few bars at a time
  (needs a model fine-tuned with ``experiment=pop_infill``). Measured against "lead" in docs/infill.md.

Scheme "lead" is a prompt format (`led_prompt`) around the one sampler (`musictx.tasks.prompt`). The
given tracks are never rewritten: the output is the input file's own score with the new tracks added as
separate named tracks (its tempo map and meter untouched), their notes on the song's bar lines; a whole song
accompanied anew gets them in its own BRIDGE and PIANO, in the bars written alone (`musictx.tasks.write_back`).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import torch
from symusic import Score

from musictx.decoding.hook import HookInputs
from musictx.decoding.hooks.given_notes import given_onsets, half_bar_pitch_classes, sounding_positions
from musictx.decoding.hooks.repeat_echo import repeat_plan
from musictx.decoding.sampling_options import SamplingOptions
from musictx.decoding.window import context_length
from musictx.io.chord_labels import Chords
from musictx.io.infill_format import bar_starts
from musictx.io.score_prep import ROLE_PROGRAMS
from musictx.models.harmonizer import Harmonizer, half_bar_features
from musictx.tasks.continue_metrical import TOKENS_PER_BAR, strip_after_bars
from musictx.tasks.infill import infill_prompt, middle_bars, middle_prompt
from musictx.tasks.prompt import Prompt, new_rows, sample
from musictx.tasks.song_bars import SongBars, read_song
from musictx.tasks.task import ACCOMPANY_CONTEXTS, DEFAULT_ACCOMPANY_CONTEXT
from musictx.tasks.write_back import (
    add_notes,
    file_with_tracks,
    middle_notes,
    with_new_tracks,
    with_written_tracks,
)

CHUNK_BARS = 4  # scheme "infill": bars written per pass; the melody of each is at most a few hundred ids back
REPEAT_MIN_ONSETS = 2  # a bar's melody must strike at least this often to count as a repeat of another bar
PREVIEW_BARS = 16  # scheme "lead": the given tracks' bars heard once before they are accompanied
# POP909's piano under its melody (train split, scripts/fit_accompany_density.py): log(PIANO notes a quarter
# note) = a + b log(MELODY notes a quarter note), within 1.19x either way on the average song (a constant: 1.24x)
TYPICAL_PIANO = (1.121, 0.505)
TYPICAL_MIN_NOTES = 8  # fewer melody notes in the range than this say too little of how busy the song is
SCHEMES = ("lead", "infill")
GIVEN_ROOM = 2  # scheme "lead": the token cap's room for each id of the given tracks (it, and as many new ones)


def accompany_song(net, tok, song: SongBars, roles: list[str], s: int, e: int, sampling: SamplingOptions,
                   scheme: str = "lead", chords: Chords | None = None, context: str = DEFAULT_ACCOMPANY_CONTEXT
                   ) -> tuple[Score, int]:
    """(the input file with the ``roles`` tracks written for bars [s, e), new ids sampled). ``scheme``: "lead"
    (`accompany_led`, any metrical model) or "infill" (`accompany_infilled`, a model with the infill tokens).
    ``chords`` (a lead sheet's, on the file's clock; scheme "lead"): the harmony lean's pitch classes.
    ``context`` (scheme "lead"): what the model hears of the bars before s (`heard_before`)."""
    return accompany_songs(net, tok, song, roles, s, e, sampling, scheme, chords, context=context)[0]


def accompany_songs(net, tok, song: SongBars, roles: list[str], s: int, e: int, sampling: SamplingOptions,
                    scheme: str = "lead", chords: Chords | None = None, samples: int = 1, on_step=None,
                    context: str = DEFAULT_ACCOMPANY_CONTEXT) -> list[tuple[Score, int]]:
    """``samples`` accompaniments (`accompany_song`): scheme "lead" draws them as one batch, over one
    `Accompaniment` (the given notes, the harmony and the harmonizer worked out once); scheme "infill" writes
    each in turn, sample k with seed ``sampling.seed + k`` (each range waits for the bars before it)."""
    if scheme not in SCHEMES:
        raise ValueError(f"accompany scheme {scheme!r}: give one of {', '.join(SCHEMES)}")
    if scheme == "lead":
        return accompany_led(net, tok, song, roles, s, e, sampling, chords, samples, on_step, context)
    if chords is not None:
        raise ValueError('chords are followed by the accompaniment scheme "lead" only')
    if context != DEFAULT_ACCOMPANY_CONTEXT:  # the infill format's prompt is its own (`infill_prompt`)
        raise ValueError(f'accompany context {context!r} is for the accompaniment scheme "lead" only')
    return [accompany_infilled(net, tok, song, roles, s, e, replace(sampling, seed=sampling.seed + k))
            for k in range(samples)]


def accompany_infilled(net, tok, song: SongBars, roles: list[str], s: int, e: int, sampling: SamplingOptions,
                       chunk_bars: int = CHUNK_BARS) -> tuple[Score, int]:
    """Scheme "infill": the new tracks taken out of every bar in the infill format and filled `CHUNK_BARS`
    at a time from the start, each range with its melody and everything written before it in view."""
    work = with_new_tracks(song, roles)
    programs = {ROLE_PROGRAMS[r] for r in roles}
    max_len, new_ids = context_length(net) or 1024, 0
    for first in range(s, e, chunk_bars):
        last = min(first + chunk_bars, e)
        now = read_song(tok, song.path, work)  # the melody and what is written so far, as tokens
        context, room = infill_prompt(tok, now, first, last, programs, max_len, use_right=False)
        prompt = middle_prompt(net, tok, context, last - first, sorted(programs), room, sampling)
        middle = middle_bars(tok, new_rows(sample(net, prompt), prompt), last - first)[0]
        new_ids += len(middle)
        add_notes(work.score, middle_notes(tok, middle, now, first, last))
    return file_with_tracks(song, work, roles, s, e, tok.miditok.config.max_num_pos_per_beat), new_ids


def accompany_led(net, tok, song: SongBars, roles: list[str], s: int, e: int, sampling: SamplingOptions,
                  chords: Chords | None = None, samples: int = 1, on_step=None, context: str = DEFAULT_ACCOMPANY_CONTEXT
                  ) -> list[tuple[Score, int]]:
    """Scheme "lead": (the input file with the ``roles`` tracks written for bars [s, e), new ids sampled) for
    each of ``samples`` drawn as one batch."""
    return [(with_written_tracks(tok, song, roles, s, e, np.concatenate([[tok.bar_id], new])), len(new))
            for new in lead_ids(net, tok, song, roles, s, e, sampling, chords, samples, on_step, context)]


def lead_ids(net, tok, song: SongBars, roles: list[str], s: int, e: int, sampling: SamplingOptions,
             chords: Chords | None = None, samples: int = 1, on_step=None, context: str = DEFAULT_ACCOMPANY_CONTEXT
             ) -> list[np.ndarray]:
    """The ids of bars s..e-1 (the first Bar left out) of ``samples`` accompaniments drawn as one batch
    (`led_prompt`); ``on_step(next_ids, done)``: called after every draw."""
    prompt = led_prompt(net, tok, song, roles, s, e, sampling, chords, samples, context)
    prompt.hooks.on_step = on_step
    out = sample(net, prompt)
    # new bars 2..e-s open with a Bar
    return [strip_after_bars(tok, row, e - s - 1) for row in out[:, prompt.ids.shape[1]:].cpu().numpy()]


def led_prompt(net, tok, song: SongBars, roles: list[str], s: int, e: int, sampling: SamplingOptions,
               chords: Chords | None = None, samples: int = 1, context: str = DEFAULT_ACCOMPANY_CONTEXT) -> Prompt:
    """The prompt of ``samples`` accompaniments of bars s..e-1, each written as a plain continuation of the
    song's bars before s (`heard_before`: with ``context`` "song", a whole song's own BRIDGE and PIANO in them), the
    given tracks played into them at their onsets (`musictx.decoding.hooks.given_notes`). Other songs hear the first
    `PREVIEW_BARS` of the bars written once before them, given tracks alone, so that the model knows the tune and
    its key before it plays a note. Where those bars and the bars before s hold the melody alone (a tune from its
    first bar, the bundled motif, a file of the melody alone) the prompt is the first Bar alone: after bars of the
    melody alone the model carried on alone (docs/infill.md, "A tune alone"). The hooks: the task's
    (`Accompaniment`). It ends with the first Bar."""
    new_programs = {ROLE_PROGRAMS[r] for r in roles}
    acc = Accompaniment(tok, song, {t.program for t in song.read.tracks.tracks} - new_programs, new_programs,
                        s, e, chords)
    before = heard_before(tok, song, s, (context_length(net) or 1024) // 2, context)
    preview = song.ids[song.end_of(s):song.end_of(min(e, s + PREVIEW_BARS))]
    if context == "song" and song.own_ids is not None:
        # the song's own bars go straight on into the new ones, as a seed does: 16 bars of the melody alone between
        # them lifted the register 3 semitones, past the song's, and a repeated bar's accompaniment came back less
        # (docs/infill.md, "The song's own bars before")
        preview = preview[:0]
    if not beyond_melody(tok, np.concatenate([before, preview])):  # the melody alone primes silence (docstring)
        before, preview = before[:0], preview[:0]
    ids = np.concatenate([before, preview, [tok.bar_id]])
    device = next(net.parameters()).device
    ids = torch.as_tensor(ids, dtype=torch.long, device=device)[None].repeat(samples, 1)  # (B, T0)
    hooks = HookInputs("accompany", tok, sampling, programs=sorted(acc.given | new_programs), accompaniment=acc,
                       stop_after_bars=e - s - 1)
    # the given notes are played into the stream and take room beside the new ones, which may run as busy: a dense
    # melody (a Chopin etude) filled a cap of TOKENS_PER_BAR a bar and left its last 4 of 8 bars unaccompanied, unsaid
    given = len(song.ids[song.end_of(s):song.end_of(e)])
    return Prompt(ids, hooks, TOKENS_PER_BAR * (e - s) + GIVEN_ROOM * given)


def heard_before(tok, song: SongBars, s: int, room: int, context: str = DEFAULT_ACCOMPANY_CONTEXT) -> np.ndarray:
    """The ids of the song's bars before bar s that the model hears before it: the last whole bars of at most
    ``room`` ids. ``context`` "melody": the song's given tracks (a whole song accompanied anew: its melody alone);
    "song": a whole song's own BRIDGE and PIANO in them too (`SongBars.own_ids`), as a continuation hears its seed."""
    if context not in ACCOMPANY_CONTEXTS:
        raise ValueError(f"accompany context {context!r}: give one of {', '.join(ACCOMPANY_CONTEXTS)}")
    if context == "song" and song.own_ids is not None:  # the same bars, read from the song's own ids
        song = replace(song, ids=song.own_ids, starts=bar_starts(song.own_ids, tok.bar_id))
    first = min(int(np.searchsorted(song.starts, song.end_of(s) - room)), s)
    return song.ids[song.end_of(first):song.end_of(s)]


def beyond_melody(tok, ids: np.ndarray) -> bool:
    """Whether the REMI ``ids`` strike a note of a track other than the melody."""
    others = tok.ids_of_type("Program")
    return bool(np.isin(ids, others[others != tok.vocab[f"Program_{ROLE_PROGRAMS['MELODY']}"]]).any())


class Accompaniment:
    """What the accompaniment's hooks read of the song (`musictx.decoding.hooks.given_notes`, the repeat echo):
    the given tracks over bars s..e-1, and the harmony, repeats and rests found in them, each worked out once
    and only when a hook asks for it."""

    def __init__(self, tok, song: SongBars, given: set[int], new_programs: set[int], s: int, e: int,
                 chords: Chords | None):
        self.tok, self.song, self.given, self.s, self.e, self.chords = tok, song, given, s, e, chords
        self.new_programs = new_programs
        self.counter_program = ROLE_PROGRAMS["BRIDGE"] if ROLE_PROGRAMS["BRIDGE"] in new_programs else None

    @functools.cached_property
    def given_bars(self) -> list:
        """Each bar's given onsets (`given_onsets`)."""
        return [given_onsets(self.tok, self.song.bar_ids(b), self.given) for b in range(self.s, self.e)]

    @functools.cached_property
    def lengths(self) -> list[int]:
        return bar_positions(self.tok, self.song, self.s, self.e)

    @functools.cached_property
    def repeat_plan(self) -> dict[int, int]:
        return repeat_plan(melody_keys(self.tok, self.song, self.given, self.s, self.e))

    @functools.cached_property
    def notes(self) -> dict[str, np.ndarray]:
        return given_notes(self.song, self.given)

    @functools.cached_property
    def given_sounding(self) -> list[np.ndarray]:
        return given_sounding(self.song, self.given, self.s, self.e, self.lengths, self.notes)

    def typical_density(self) -> dict[int, float]:
        """{PIANO's program: notes per bar} where PIANO is written: what POP909's piano plays under a melody as busy
        as this one over bars s..e-1 (`TYPICAL_PIANO`); {} where it is given or the melody says too little."""
        piano = ROLE_PROGRAMS["PIANO"]
        onsets = given_notes(self.song, {ROLE_PROGRAMS["MELODY"]})["time"]  # (N,) ticks
        a, z = (int(x) for x in self.song.lines[[self.s, self.e]])
        notes = int(((onsets >= a) & (onsets < z)).sum())
        if piano not in self.new_programs or notes < TYPICAL_MIN_NOTES:
            return {}
        quarters = (z - a) / self.song.read.score.ticks_per_quarter
        per_quarter = np.exp(TYPICAL_PIANO[0] + TYPICAL_PIANO[1] * np.log(notes / quarters))
        return {piano: float(per_quarter * quarters / (self.e - self.s))}

    def harmony_target(self, lean) -> tuple[list, float, float | None]:
        """(each half bar's target, strength, strength at the strong beats or None: the same), by the harmony
        lean's options ``lean``: a lead sheet's chords (``strength``), else the chord tones the harmonizer
        guesses from the melody (``guess``, ``guess_strong``), else the melody's own pitch classes (``strength``)."""
        song, given, s, e = self.song, self.given, self.s, self.e
        if self.chords is not None:
            fallback = given_harmony(song, given, s, e, self.notes)
            return chord_halves(song, self.chords, s, e, fallback), lean.strength, None
        if lean.guess:
            guess = guessed_harmony(song, given, s, e, notes=self.notes)
            return guess, lean.guess, lean.guess_strong
        return given_harmony(song, given, s, e, self.notes), lean.strength, None


def melody_keys(tok, song: SongBars, given: set[int], s: int, e: int) -> list:
    """For each of bars s..e-1, its given tracks' onsets (position and pitches: the same tune sung louder or
    more detached is the same tune) as one hashable key; None for a bar with fewer than `REPEAT_MIN_ONSETS`
    of them (too little to call a repeat)."""
    is_pitch = tok.type_of == "Pitch"
    keys = []
    for b in range(s, e):
        onsets = tuple((pos, tuple(int(i) for i in ids if is_pitch[int(i)]))
                       for pos, ids in given_onsets(tok, song.bar_ids(b), given))
        keys.append(onsets if len(onsets) >= REPEAT_MIN_ONSETS else None)
    return keys


def given_notes(song: SongBars, given: set[int]) -> dict[str, np.ndarray]:
    """The given tracks' notes together: {"time", "duration", "pitch"} (N,) each, in the read score's ticks."""
    tracks = [t.notes.numpy() for t in song.read.score.tracks if t.program in given]
    return {k: np.concatenate([t[k] for t in tracks]) if tracks else np.zeros(0, np.int64)
            for k in ("time", "duration", "pitch")}


def given_harmony(song: SongBars, given: set[int], s: int, e: int, notes: dict | None = None
                  ) -> list[tuple[set[int], set[int]]]:
    """The pitch classes the given tracks sound in each half of bars s..e-1 (``notes``: their `given_notes`)."""
    notes = given_notes(song, given) if notes is None else notes
    return half_bar_pitch_classes(notes["time"], notes["time"] + notes["duration"], notes["pitch"],
                                  song.lines[s:e + 1].astype(np.int64))


def bar_positions(tok, song: SongBars, s: int, e: int) -> list[int]:
    """Each of bars s..e-1's length in the tokenizer's positions."""
    lines = song.lines[s:e + 1].astype(np.int64)
    per_position = song.read.score.ticks_per_quarter / tok.miditok.config.max_num_pos_per_beat
    return [max(round(int(z - a) / per_position), 1) for a, z in zip(lines[:-1], lines[1:], strict=True)]


def guessed_harmony(song: SongBars, given: set[int], s: int, e: int, harmonizer: Harmonizer | None = None,
                    notes: dict | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each half of bars s..e-1, (12,) the probability that its chord holds each pitch class, guessed from
    the given tracks' notes over the whole song (`musictx.models.harmonizer`)."""
    probs = (harmonizer or Harmonizer.load()).chord_tone_probs(harmony_features(song, given, notes))  # (H, 12)
    return [(probs[2 * b], probs[2 * b + 1]) for b in range(s, e)]


def harmony_features(song: SongBars, given: set[int], notes: dict | None = None) -> np.ndarray:
    """(H, 12, F) the harmonizer's features of every half bar of the song, from the given tracks' notes."""
    notes = given_notes(song, given) if notes is None else notes
    return half_bar_features(notes["time"], notes["time"] + notes["duration"], notes["pitch"],
                             song.lines[:song.n_bars + 1].astype(np.int64))


def given_sounding(song: SongBars, given: set[int], s: int, e: int, lengths: list[int], notes: dict | None = None):
    """(positions,) bool for each of bars s..e-1: a given track's note sounds there."""
    notes = given_notes(song, given) if notes is None else notes
    return sounding_positions(notes["time"], notes["time"] + notes["duration"], song.lines[s:e + 1].astype(np.int64),
                              lengths)


CHORD_PROBE_S = 0.05  # a half bar's chord is the one sounding just after its start (lab files round to ~10 ms)


def chord_halves(song: SongBars, chords: Chords, s: int, e: int, fallback: list[tuple[set[int], set[int]]]
                 ) -> list[tuple[set[int], set[int]]]:
    """The chord's pitch classes at the start of each half of bars s..e-1; ``fallback``'s (the melody's)
    where the chord file says no chord."""
    lines = song.line_seconds(list(range(s, e + 1)))
    out = []
    for (a, z), pair in zip(zip(lines[:-1], lines[1:], strict=True), fallback, strict=True):
        starts = (a, (a + z) / 2)
        out.append(tuple(set(chords.at(t + CHORD_PROBE_S)) or set(mine) for t, mine in zip(starts, pair, strict=True)))
    return out
