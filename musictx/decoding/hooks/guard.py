"""A sampling guard for Performance-event ids: the sampler refuses events the grammar forbids.

Five rules; the first two as in Magenta's Performance RNN decoding (which caps note durations):
  - a NOTE_OFF for a pitch that is not sounding is never drawn (it would be a no-op id, wasted context);
  - a note that has sounded for ``max_note_seconds`` must end: while any note is overdue, only the
    NOTE_OFFs of overdue notes may be drawn. Notes of the seed that sound at the cut count too, so a
    note held over the cut cannot hang to the end of the continuation;
  - the texture stays near the seed's: while ``polyphony_ratio`` times the seed's most notes at once
    (at least ``min_polyphony``) sound, a sounding note must end (the model picks which) before a new note
    starts or time moves on. A piano model continuing a sparse score otherwise piles up walls of held notes,
    several times as many as the seed ever sounds together; forbidding new notes alone let time pass over
    the wall, and its notes hung on to the note cap (docs/generation.md);
  - a pedal release takes the older notes with it: once ``pedal_release`` notes have ended at one step (the
    pedal coming up), every note still sounding that was struck before the oldest of them must end before
    time moves on. In real pedalled piano no such note outlives the release (0 in 65 releases of 4 held-out
    performances); the model forgot them, and they sounded on to the note cap, "stuck" (docs/generation.md);
  - a note outlasted by ``overtaken`` notes struck after it must end: in a fast run the model forgot a note
    while a hundred later ones came and went. In real performances 1 note in 2,300 is outlasted by 20.

A sampling hook (`musictx.decoding.hook`): `generate` calls ``guard.start(prompt)``, then per step
``guard(logits)`` before the draw and ``guard.update(next_ids, done)`` after; the cached and uncached paths
see exactly the same masks.

`start` reads the prompt with torch, vectorised. The state it leaves (which notes sound, since when) is
kept in numpy on the CPU: a step's bookkeeping is a dozen ops on arrays of a few hundred entries, which
numpy does in about a microsecond each where a torch op takes several, and the guard then cost as much
as a third of a decoding step (`python -m bench realtime`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from musictx.decoding.hook import HookInputs, HookSpec, LogitsHook
from musictx.decoding.hooks.final_chord import chord_step
from musictx.decoding.option_fields import option
from musictx.lazy import torch  # imported on first use: --help reads this module

if TYPE_CHECKING:
    from torch import Tensor

MIN_POLYPHONY = 10  # the polyphony cap never goes below this: a pedalled piano chord sounds 8-10 notes
_OTHER, _ON, _OFF, _SHIFT = 0, 1, 2, 3  # what an id is to the guard (`NoteGrammarGuard._classify`)
NEVER = np.iinfo(np.int64).max  # the oldest released onset while nothing has been released at this step


class NoteGrammarGuard(LogitsHook):
    """Masks the logits (B, V) of Performance ids laid out as NOTE_ON (n_pitches), NOTE_OFF (n_pitches),
    TIME_SHIFT (n_shifts, 1..n_shifts steps), then the rest (VELOCITY, PAD, EOS)."""

    def __init__(self, note_on: int, note_off: int, time_shift: int, n_shifts: int, max_note_steps: int | None,
                 polyphony_ratio: float | None = None, min_polyphony: int = MIN_POLYPHONY,
                 pedal_release: int | None = None, release_at_cap: bool = True, overtaken: int | None = None):
        self.overtaken_limit = overtaken  # later-struck notes ended over a sounding one that end it; None: off
        self.overtaken: np.ndarray | None = None  # (B, n_pitches) such notes so far, per sounding note
        self.release_at_cap = release_at_cap  # False: the cap only forbids new notes (the rule before 2026-11-26)
        self.note_on, self.note_off, self.time_shift, self.n_shifts = note_on, note_off, time_shift, n_shifts
        self.n_pitches = note_off - note_on
        self.offs = slice(note_off, note_off + self.n_pitches)  # the NOTE_OFF ids, which every rule unmasks
        self.max_note_steps = max_note_steps
        self.ring_after: int | None = None  # new steps after which a note struck may ring past the cap (a final chord)
        self.ring_from: np.ndarray | None = None  # (B,) that step, counted from the prompt's start
        self.polyphony_ratio, self.min_polyphony = polyphony_ratio, min_polyphony
        self.onset: np.ndarray | None = None  # (B, n_pitches) step of the sounding note's onset, -1 if silent
        self.now: np.ndarray | None = None  # (B,) steps so far
        self.cap: np.ndarray | None = None  # (B,) most notes at once before no new note starts; None: no cap
        self.pedal_release = pedal_release  # notes ending at one step that release the older ones; None: off
        self.released: np.ndarray | None = None  # (B,) notes ended at the current step
        self.oldest_released: np.ndarray | None = None  # (B,) onset of the oldest of them (a large number: none)
        # Per id below the end of the TIME_SHIFTs: its kind and its pitch (notes) or steps (shifts); ids at
        # or past the end (VELOCITY, PAD, EOS) read the last entry, an "other".
        n_ids = time_shift + n_shifts + 1
        self._kind_of, self._value_of = np.full(n_ids, _OTHER, dtype=np.int64), np.zeros(n_ids, dtype=np.int64)
        pitches = np.arange(self.n_pitches)
        for kind, first, values in ((_ON, note_on, pitches), (_OFF, note_off, pitches),
                                    (_SHIFT, time_shift, np.arange(1, n_shifts + 1))):
            self._kind_of[first : first + len(values)], self._value_of[first : first + len(values)] = kind, values

    @classmethod
    def of(cls, tokenizer, max_note_seconds: float | None, polyphony_ratio: float | None = None,
           pedal_release: int | None = None, overtaken: int | None = None) -> NoteGrammarGuard:
        """The guard of an `EventTokenizer`'s ids; ``max_note_seconds`` None (or 0): no cap on a note's length;
        ``polyphony_ratio`` None: no cap on notes at once (the options' defaults are in
        `musictx.decoding.sampling_options.SamplingOptions`)."""
        lay = tokenizer.layout
        steps = None if not max_note_seconds else max(1, round(max_note_seconds / tokenizer.config.time_step))
        return cls(lay.note_on, lay.note_off, lay.time_shift, lay.velocity - lay.time_shift, steps, polyphony_ratio,
                   pedal_release=pedal_release, overtaken=overtaken)

    def start(self, prompt: Tensor) -> None:
        """Follow the prompt (B, T0): which notes sound at its end, since when. Vectorised over the prompt
        (a million-note seed takes a fraction of a second): a pitch sounds at the end when its last
        NOTE_ON / NOTE_OFF is a NOTE_ON, and its onset is the step of that NOTE_ON; the same state as
        calling `update` id by id."""
        B, T0 = prompt.shape
        device = prompt.device
        self.onset = np.full((B, self.n_pitches), -1, dtype=np.int64)
        self.now = np.zeros(B, dtype=np.int64)
        self.released, self.oldest_released = np.zeros(B, dtype=np.int64), np.full(B, NEVER, dtype=np.int64)
        self.overtaken = np.zeros((B, self.n_pitches), dtype=np.int64)
        on, off, shift, value = self._classify(prompt)
        pitch = value  # read at note events only
        if self.polyphony_ratio is not None:
            most = self._most_at_once(on, off, pitch, shift)  # (B,)
            self.cap = (most.float() * self.polyphony_ratio).ceil().long().clamp(min=self.min_polyphony).cpu().numpy()
        if T0 == 0:
            self.ring_from = None if self.ring_after is None else self.now + self.ring_after
            return
        steps = torch.where(shift, value, 0).cumsum(dim=1)  # (B, T0) after each id
        # Position of the last NOTE_ON / NOTE_OFF of each (sample, pitch); -1: none.
        position = torch.arange(T0, device=device).expand(B, T0)
        slot = torch.arange(B, device=device)[:, None] * self.n_pitches + pitch  # (B, T0)
        last = torch.full((B * self.n_pitches,), -1, dtype=torch.long, device=device)
        event = on | off
        last.scatter_reduce_(0, slot[event], position[event], reduce="amax")
        last = last.view(B, self.n_pitches)
        at = last.clamp(min=0)
        sounding = (last >= 0) & on.gather(1, at)
        self.onset = torch.where(sounding, steps.gather(1, at), -1).cpu().numpy()  # a NOTE_ON adds no step itself
        self.now = steps[:, -1].cpu().numpy().copy()
        if self.ring_after is not None:
            self.ring_from = self.now + self.ring_after
        if self.overtaken_limit is not None:
            self._overtaken_in_prompt(on, off, pitch, steps)

    def _overtaken_in_prompt(self, on: Tensor, off: Tensor, pitch: Tensor, steps: Tensor) -> None:
        """`overtaken` at the prompt's end: per sounding note, the prompt's notes struck at a later step that
        have ended. Notes are paired per voice as in `_most_at_once` (a NOTE_OFF whose voice's previous event
        is a NOTE_ON ends the note struck there)."""
        B = on.shape[0]
        row, t, voice, is_on = self._voice_events(on, off, pitch)
        closes = torch.zeros_like(is_on)
        closes[1:] = ~is_on[1:] & is_on[:-1] & (voice[1:] == voice[:-1])  # (E,) an OFF ending a note
        at_close = closes.nonzero(as_tuple=True)[0]
        ended_row = row[at_close].cpu().numpy()
        ended_onset = steps[row[at_close - 1], t[at_close - 1]].cpu().numpy()  # (N,) onset step of each ended note
        for b in range(B):
            later = np.sort(ended_onset[ended_row == b])
            sounding = self.onset[b] >= 0
            self.overtaken[b, sounding] = len(later) - np.searchsorted(later, self.onset[b, sounding], side="right")

    def _classify(self, ids: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The NOTE_ON, NOTE_OFF and TIME_SHIFT masks of ``ids`` (any shape) and each id's value (its
        pitch or steps), read from the lookup tables that `update` uses."""
        i = ids.clamp(max=len(self._kind_of) - 1)
        kind = torch.from_numpy(self._kind_of).to(ids.device)[i]
        value = torch.from_numpy(self._value_of).to(ids.device)[i]
        return kind == _ON, kind == _OFF, kind == _SHIFT, value

    def most_at_once(self, ids: Tensor) -> int:
        """The most notes sounding together over the ids (T,) of one sample (see `_most_at_once`)."""
        on, off, shift, pitch = self._classify(ids[None])
        return int(self._most_at_once(on, off, pitch, shift)[0])

    def _voice_events(self, on: Tensor, off: Tensor, pitch: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The note events of ids (B, T) given by their masks and pitches, grouped by voice (one (sample,
        pitch)) and in time order within a voice: each event's row, position, voice and whether it is a
        NOTE_ON, (E,) each."""
        row, t = (on | off).nonzero(as_tuple=True)  # (E,)
        voice = row * self.n_pitches + pitch[row, t]
        order = torch.argsort(voice * on.shape[1] + t)
        return row[order], t[order], voice[order], on[row, t][order]

    def _most_at_once(self, on: Tensor, off: Tensor, pitch: Tensor, shift: Tensor) -> Tensor:
        """(B,) the most notes sounding together in each row of ids (B, T) given by their masks and pitches,
        counted during each TIME_SHIFT and at the end. A NOTE_ON of a sounding pitch or a NOTE_OFF of a
        silent one changes nothing."""
        B, T = on.shape
        if T == 0:
            return torch.zeros(B, dtype=torch.long, device=on.device)
        row, t, voice, is_on = self._voice_events(on, off, pitch)
        was_on = torch.zeros_like(is_on)  # the voice's previous event, if any, was a NOTE_ON
        was_on[1:] = is_on[:-1] & (voice[1:] == voice[:-1])
        delta = torch.zeros(B, T, dtype=torch.long, device=on.device)
        delta[row, t] = (is_on & ~was_on).long() - (~is_on & was_on).long()
        count = delta.cumsum(dim=1)  # (B, T) notes sounding after each id; never negative
        return torch.maximum(torch.where(shift, count, 0).amax(dim=1), count[:, -1])

    def update(self, ids: Tensor, done: Tensor | None = None) -> None:
        """Advance by one id per sample (B,)."""
        i = np.minimum(ids.cpu().numpy(), len(self._kind_of) - 1)
        kind, value = self._kind_of[i], self._value_of[i]  # (B,) each
        on, off = kind == _ON, kind == _OFF
        ended = off & (self.onset[np.arange(len(i)), value] >= 0)  # (B,) a sounding note ends
        self.released += ended
        if self.overtaken_limit is not None:
            self._count_overtaken(ended, value)
        self.oldest_released[ended] = np.minimum(self.oldest_released[ended], self.onset[ended, value[ended]])
        moved = kind == _SHIFT  # time moves on: a new step, nothing released in it yet
        self.released[moved], self.oldest_released[moved] = 0, NEVER
        self.onset[off, value[off]] = -1
        self.onset[on, value[on]] = self.now[on]
        if self.overtaken_limit is not None:
            self.overtaken[on, value[on]] = 0  # a re-struck pitch is a new note
        self.now += np.where(kind == _SHIFT, value, 0)

    def _count_overtaken(self, ended: np.ndarray, value: np.ndarray) -> None:
        """A note ending (``ended`` (B,) rows, pitch ``value``) overtakes every note sounding since an earlier
        step; the ended note's own count starts again at its next NOTE_ON."""
        rows = np.flatnonzero(ended)
        if not len(rows):
            return
        ended_onset = self.onset[rows, value[rows]]  # (R,)
        older = (self.onset[rows] >= 0) & (self.onset[rows] < ended_onset[:, None])  # (R, n_pitches)
        self.overtaken[rows] += older
        self.overtaken[rows, value[rows]] = 0

    def _end_overtaken(self, forbid: np.ndarray, sounding: np.ndarray, late: np.ndarray) -> None:
        """In ``forbid`` (B, V): rows with a note that ``overtaken_limit`` later-struck notes have outlasted may
        only end such a note. In real performances (pedal folded in) 1 note in 2,300 is outlasted by over 20
        later notes, and none by 100; the piano model forgot notes in fast runs, 116 later notes passing
        them, and they sounded on to the note cap (docs/generation.md, "Stuck notes")."""
        forgotten = sounding & (self.overtaken >= self.overtaken_limit)  # (B, n_pitches)
        pending = forgotten.any(axis=1) & ~late
        if pending.any():
            forbid[pending] = True
            forbid[pending, self.offs] = ~forgotten[pending]

    def _release_older(self, forbid: np.ndarray, sounding: np.ndarray, late: np.ndarray) -> None:
        """In ``forbid`` (B, V): rows in a pedal release with older notes still sounding may only end one of them
        (``late`` (B,) rows, with an overdue note, keep that rule)."""
        older = sounding & (self.onset < self.oldest_released[:, None])  # (B, n_pitches)
        pending = (self.released >= self.pedal_release) & older.any(axis=1) & ~late  # (B,)
        if pending.any():
            forbid[pending] = True
            forbid[pending, self.offs] = ~older[pending]

    def _thin_at_cap(self, forbid: np.ndarray, sounding: np.ndarray, late: np.ndarray) -> None:
        """In ``forbid`` (B, V): rows at the polyphony cap may only end a sounding note (the model picks which)
        until they are below it; no new note starts and no time passes there. Only forbidding new notes let
        time pass over the wall of held notes instead: the model, unable to play on, stalled with them held,
        and they sounded to the note cap (docs/generation.md, "Stuck notes")."""
        full = (sounding.sum(axis=1) >= self.cap) & ~late  # (B,) late rows keep the overdue rule
        if not full.any():
            return
        if not self.release_at_cap:
            forbid[full, self.note_on : self.note_off] = True
            return
        forbid[full] = True
        forbid[full, self.offs] = ~sounding[full]

    def __call__(self, logits: Tensor) -> Tensor:
        """Logits (B, V) with the forbidden ids at -inf (a new tensor)."""
        sounding = self.onset >= 0  # (B, n_pitches)
        forbid = np.zeros(logits.shape, dtype=bool)
        forbid[:, self.offs] = ~sounding
        late = np.zeros(len(sounding), dtype=bool)  # (B,) samples that may only release overdue notes
        if self.max_note_steps is not None:
            overdue = sounding & (self.now[:, None] - self.onset >= self.max_note_steps)  # (B, n_pitches)
            if self.ring_from is not None:  # the final chord rings to the end (`musictx.decoding.hooks.final_chord`)
                overdue &= self.onset < self.ring_from[:, None]
            late = overdue.any(axis=1)
            if late.any():
                forbid[late] = True
                forbid[late, self.offs] = ~overdue[late]
        if self.cap is not None:
            self._thin_at_cap(forbid, sounding, late)
        if self.pedal_release:
            self._release_older(forbid, sounding, late)
        if self.overtaken_limit is not None:
            self._end_overtaken(forbid, sounding, late)
        return logits.masked_fill(torch.from_numpy(forbid).to(logits.device), float("-inf"))


def note_cap(tokenizer, seed, max_note_seconds: float | None, from_seed: float | None) -> float | None:
    """The longest a new note may sound: ``from_seed`` times the seed's 95th-percentile note duration, within
    [1 s, max_note_seconds]; ``max_note_seconds`` when ``from_seed`` is None or the seed has no notes, and no
    cap at all (None) when ``max_note_seconds`` is None."""
    notes = tokenizer.decode_notes(seed.ids) if from_seed and max_note_seconds else None
    if notes is None or not len(notes):
        return max_note_seconds
    long_notes = float(np.percentile(notes.end - notes.start, 95))
    return min(max(1.0, from_seed * long_notes), max_note_seconds)


@dataclass
class GuardOptions:
    enabled: bool = option(True, "refuse stray NOTE_OFFs and end notes held too long; false: off")
    max_note_seconds: float | None = option(5.0, "the longest a note may sound; null: no cap", above=0)
    # a seed of short notes gets short notes, a pedalled one keeps its long ones
    note_cap_from_seed: float | None = option(
        2.0, "a note sounds at most this many times the seed's long notes (95th percentile), 1 s..max_note_seconds; "
             "null: max_note_seconds alone", low=0)
    polyphony_ratio: float | None = option(
        1.5, f"no new note while this many times the seed's most notes at once sound (at least {MIN_POLYPHONY}); "
             "null: no cap", above=0)
    # a forgotten note does not hang on to the note cap
    pedal_release: int | None = option(
        3, "once this many notes end at one step (a pedal release), the notes struck before the oldest of them end "
           "too; null: off", low=1)
    # a note that many later notes have outlasted was forgotten, however young (1 in 2,300 real notes is
    # outlasted by 20; the piano model's stuck notes by 12-116)
    overtaken: int | None = option(
        16, "a sounding note ends once this many notes struck after it have ended; null: off", low=1)


def _make(inputs: HookInputs, o: GuardOptions) -> NoteGrammarGuard | None:
    if not o.enabled:
        return None
    longest = note_cap(inputs.tokenizer, inputs.seed, o.max_note_seconds, o.note_cap_from_seed)
    # with the pedal as ids, notes keep their key lengths: a chord's keys let go together and the bass held on
    # is no forgotten note, and a lift is one id that ends what the pedal held (the overtaken rule's limit was
    # measured on notes with the pedal folded in)
    folded = not inputs.tokenizer.config.pedal_events
    guard = NoteGrammarGuard.of(inputs.tokenizer, longest, o.polyphony_ratio, o.pedal_release if folded else None,
                                o.overtaken if folded else None)
    if inputs.ending:  # a piece that ends: its final chord rings from the step it is struck at
        guard.ring_after = chord_step(inputs.length_seconds, inputs.tokenizer.config.time_step)
    return guard


SPEC = HookSpec("guard", GuardOptions,
                ("performance",),
                ("continue",), _make, "no stray NOTE_OFF; notes end within the seed's lengths; polyphony capped")
