"""The meter of a file whose own meter cannot be trusted, found from its music. No torch.

POP909's MIDI files say 1/4 throughout and keep their real bars in ``beat_midi.txt`` beside them; copied
without that file (as users do), every "bar" is one beat long and a metrical model packs a bar's music into
each beat. `guess_meter` finds beats per bar and the first downbeat from where the music leans: long notes
and low notes start on downbeats more often than elsewhere. `untrusted_meter` says when to ask it: a file
whose every time signature has a numerator of 1. A triple meter found is read as 6/4, two 3/4 bars a bar, as
POP909's beat files mark every one of its triple-time songs (the model learnt no 3/4 bar; 2/4 reads as 4/4 alike).

A beat file beside the file outranks the file's own time signature (POP909's 2/4 and 1/4 are its MIDI
editor's, not the song's); where the two differ, `beat_file_said` says so in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from symusic import Score

from musictx.io.score_prep import Meter, apply_meter, beats_file_of, read_meter

METERS = (4, 3)  # beats per bar tried, in order of preference (2/4 reads as 4/4: its bars pair up)
# a triple meter is read as two 3/4 bars a bar: POP909's beat files mark all 26 of its triple-time songs 6/4 (none
# 3/4), so the model learnt no 3/4 bar; of the 12 songs the music found triple, 12 are 6/4 by their beat files
PAIRED = {3: 6}
THREE_MARGIN = 1.15  # 3/4 is taken only when its downbeats lean this much more than 4/4's
ON_BEAT = 1 / 8  # an onset within this share of a beat of a beat counts for that beat
BASS_BELOW = 55  # MIDI pitch: notes under G3 count twice (the bass moves on downbeats)


@dataclass(frozen=True)
class MeterGuess:
    meter: Meter
    lean: float  # how much more the chosen downbeats weigh than the average beat (1: not at all)
    asked: bool = False  # the beats per bar were the user's (beats_per_bar=); only the downbeat was found

    def describe(self, name: str) -> str:
        m = self.meter
        where = (f"the first downbeat {m.first_downbeat_tick / m.beat_ticks:.2f} beats in (its notes there weigh "
                 f"{self.lean:.2f}x an average beat's)")
        if self.asked:
            return f"{name}: {m.beats_per_bar} beats a bar, as asked; {where}, found from the music"
        paired = next((f" (its {k}-beat bars paired, as POP909's beat files mark them)" for k, v in PAIRED.items()
                       if v == m.beats_per_bar), "")
        return (f"{name}: its meter says one beat a bar and no beat file lies beside it, so its bars were found "
                f"from the music: {m.beats_per_bar}/4{paired}, {where}; put POP909's beat_midi.txt beside it to use "
                "the annotated bars, or give the beats per bar")


def untrusted_meter(score: Score) -> bool:
    """True when the file's time signatures all say one beat a bar (1/4, 1/8): a meter that no song has."""
    sigs = score.time_signatures
    return len(sigs) > 0 and all(s.numerator == 1 for s in sigs)


def _onsets(score: Score) -> tuple[np.ndarray, np.ndarray]:
    """(onset in beats, weight) of every pitched note: its length in beats (at most 4), twice for a bass note."""
    tpq = score.ticks_per_quarter
    notes = [t.notes.numpy() for t in score.tracks if len(t.notes) and not t.is_drum]
    if not notes:
        return np.zeros(0), np.zeros(0)
    time = np.concatenate([n["time"] for n in notes]).astype(np.float64) / tpq  # (N,) in beats
    dur = np.concatenate([n["duration"] for n in notes]).astype(np.float64) / tpq
    pitch = np.concatenate([n["pitch"] for n in notes])
    return time, np.minimum(dur, 4.0) * np.where(pitch < BASS_BELOW, 2.0, 1.0)


def beat_offset(time: np.ndarray, weight: np.ndarray, bins: int = 32) -> float:
    """Where the beats fall inside a quarter of the file's ticks (0 <= offset < 1): POP909's ticks follow its
    tempo but its first beat is not at tick 0. The phase at which the most weight starts (+- one bin)."""
    phase = np.floor((time % 1.0) * bins).astype(np.int64) % bins
    counts = np.bincount(phase, weights=weight, minlength=bins)
    near = counts + np.roll(counts, 1) + np.roll(counts, -1)
    return float(np.argmax(near) / bins)


def beat_weights(time: np.ndarray, weight: np.ndarray, offset: float) -> np.ndarray:
    """(n_beats,) the weight of the notes starting on each beat (beats at ``offset`` + k quarters)."""
    rel = time - offset
    beat = np.rint(rel).astype(np.int64)
    near = (np.abs(rel - beat) <= ON_BEAT) & (beat >= 0)
    return np.bincount(beat[near], weights=weight[near], minlength=int(beat.max(initial=0)) + 1)


def guess_meter(score: Score, beats_per_bar: int | None = None) -> MeterGuess | None:
    """Beats per bar (of `METERS`, or ``beats_per_bar`` as the user gives it) and the first downbeat, from
    `beat_weights`; None for music too short or too even to tell (fewer than 8 beats, or no phase leaning)."""
    time, weight = _onsets(score)
    offset = beat_offset(time, weight) if len(time) else 0.0
    weights = beat_weights(time, weight, offset)
    if len(weights) < 8 or weights.mean() <= 0:
        return None
    best: dict[int, tuple[float, int]] = {}
    for per_bar in (beats_per_bar,) if beats_per_bar else METERS:
        leans = [weights[phase::per_bar].mean() / weights.mean() for phase in range(per_bar)]
        best[per_bar] = (max(leans), int(np.argmax(leans)))
    per_bar = beats_per_bar or (3 if best[3][0] > THREE_MARGIN * best[4][0] else 4)
    lean, phase = best[per_bar]
    if lean <= 1.0 and not beats_per_bar:
        return None
    if not beats_per_bar and per_bar in PAIRED:  # the pair's downbeat: the phase of the two that leans more
        per_bar = PAIRED[per_bar]
        leans = [weights[p::per_bar].mean() / weights.mean() for p in range(per_bar)]
        lean, phase = max(leans), int(np.argmax(leans))
    tpq = score.ticks_per_quarter
    return MeterGuess(Meter(per_bar, int(round((phase + offset) * tpq)), tpq), float(lean), bool(beats_per_bar))


def apply_bars(score: Score, path, beats="auto") -> tuple[int, str | None]:
    """Put ``score``'s bars where they belong, in place (`MetricalTokenizer.read`'s ``beats``): a number is the
    user's beats per bar, the downbeat found from the music; ``"auto"`` takes POP909's beat file beside ``path``,
    else finds the bars from the music when the file's meter says one beat a bar; a path is a beat file; None
    keeps the file's own meter. (the shift in ticks, the line telling the user how the bars were found or None)."""
    name = Path(path).name if path is not None else "the score"
    if isinstance(beats, int) and not isinstance(beats, bool):  # the user's beats per bar, over any meter
        guess = guess_meter(score, beats_per_bar=beats)
        meter = guess.meter if guess else Meter(beats, 0, score.ticks_per_quarter)
        found = guess.describe(name) if guess else f"{name}: {beats} beats a bar, as asked, from its start"
        return apply_meter(score, meter), found
    beats_path = beats_file_of(path) if (beats == "auto" and path is not None) else beats
    if beats_path not in (None, "auto"):
        meter, own = read_meter(beats_path, score), signatures(score)
        shift = apply_meter(score, meter)
        return shift, beat_file_said(name, Path(beats_path).name, own, score.time_signatures[0])
    if beats == "auto" and untrusted_meter(score) and (guess := guess_meter(score)):
        return apply_meter(score, guess.meter), guess.describe(name)  # POP909 without its beat file
    return 0, None


def signatures(score: Score) -> list[str]:
    """The file's own meters, each once in order ("2/4"), but the one-beat ones: no song's meter (POP909's 1/4)."""
    return list(dict.fromkeys(f"{t.numerator}/{t.denominator}" for t in sorted(score.time_signatures,
                                                                              key=lambda t: t.time)
                              if t.numerator > 1))


def beat_file_said(name: str, beat_file: str, own: list[str], meter) -> str | None:
    """The line saying that the beat file's meter (``meter``, the time signature it gave) overrides the file's own
    ``own`` (`signatures`); None where they agree or the file says no meter of its own. POP909's 001-010 say 2/4
    and their beat files 4/4: their continuations came out in 4/4, unsaid."""
    read = f"{meter.numerator}/{meter.denominator}"
    if not own or own == [read]:
        return None
    return (f"{name} says {' and '.join(own)}, but the {beat_file} beside it marks a downbeat every "
            f"{meter.numerator} beats: its bars are read as {read}, as the beat file has them (give the beats per "
            "bar to read it otherwise)")
