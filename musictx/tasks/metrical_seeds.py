"""A seed for the metrical tokenizer, cut at bar lines, and the timeline its continuation is written on.

The seed is whole bars of the file: from the bar line nearest ``seed_from`` to the bar line nearest
``seed_from + seed_seconds`` (at least one bar), so the new music starts on the seed's grid, on a downbeat,
not at its first note. The output keeps the file's tempo map, meter (as read: a POP909 beat file's over the
file's own, said in the meter line) and named tracks from that bar line on: in a DAW it sits on the song's bars.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
from symusic import Score, Tempo, TimeSignature

from musictx.decoding.errors import GenerateError
from musictx.io.dynamics import Dynamics, LevelRule, heard_dynamics, scale_score, score_velocities
from musictx.io.midi_io import MidiReadError
from musictx.io.registers import Registers
from musictx.io.score_prep import TrackMap
from musictx.tasks.played_as import PartPlan, play_as_learnt, remember_seed_notes
from musictx.tasks.seeds import seed_past_end


def bar_lines(score: Score) -> np.ndarray:
    """(n_bars + 1,) tick of every bar line from 0 to past the last note, by the score's time signatures."""
    tpq, end = score.ticks_per_quarter, max(score.end(), 1)
    sigs = sorted(score.time_signatures, key=lambda s: s.time) or [TimeSignature(0, 4, 4)]
    if sigs[0].time > 0:
        sigs = [TimeSignature(0, 4, 4), *sigs]
    lines = []
    for k, sig in enumerate(sigs):
        stop = sigs[k + 1].time if k + 1 < len(sigs) else end + 1
        length = max(sig.numerator * tpq * 4 // sig.denominator, 1)
        lines.extend(range(sig.time, stop, length))
    while lines[-1] <= end:
        lines.append(lines[-1] + max(sigs[-1].numerator * tpq * 4 // sigs[-1].denominator, 1))
    return np.asarray(lines, dtype=np.int64)


def ticks_to_seconds(score: Score, ticks: np.ndarray) -> np.ndarray:
    """Seconds of each tick under the score's tempo map (120 bpm before the first tempo)."""
    tpq = score.ticks_per_quarter
    tempos = sorted(score.tempos, key=lambda t: t.time)
    times = np.array([0] + [t.time for t in tempos if t.time > 0], dtype=np.float64)
    mspq = [500000] + [t.mspq for t in tempos]
    # the tempo in force from each change on: the last of those at or before its tick
    qpm_at = [mspq[0]] * len(times)
    for t in tempos:
        qpm_at[int(np.searchsorted(times, t.time, side="right")) - 1] = t.mspq
    sec_per_tick = np.asarray(qpm_at, dtype=np.float64) / 1e6 / tpq
    starts = np.concatenate([[0.0], np.cumsum(np.diff(times) * sec_per_tick[:-1])])
    k = np.searchsorted(times, ticks, side="right") - 1
    return starts[k] + (np.asarray(ticks, dtype=np.float64) - times[k]) * sec_per_tick[k]


@dataclass
class MetricalSeed:
    ids: np.ndarray  # the seed's ids: whole bars
    tracks: TrackMap
    score: Score  # the file as read (meter applied), in its own ticks
    first_bar: int  # bar index of the seed's first bar in the file
    bars: int  # bars in the seed
    lines: np.ndarray = field(repr=False)  # bar-line ticks of the file
    origin_seconds: float = 0.0  # time of the seed's first bar line in the file as read
    meter_found: str | None = None  # how the bars were found from the music, when the file's meter said nothing
    shift_seconds: float = 0.0  # how much later the reading put the music (POP909 pickups; 0 otherwise)
    path: str | None = None
    song_ids: np.ndarray | None = field(default=None, repr=False)  # the whole file's ids, as the seed's were made
    parts: PartPlan | None = None  # tracks played as a part the model learnt (`musictx.tasks.played_as`)
    registers: Registers | None = None  # tracks read by octaves into the tokens' pitches, written back moved back
    dynamics: Dynamics = field(default_factory=Dynamics)  # a pp (ff, flat) seed heard at the model's level
    written_meters: list | None = field(default=None, repr=False)  # the file's meters where the tokens' differ (a 2/2
    # read as 4/4: `musictx.io.held_meters`), to write the music back in; None: the score's own

    @property
    def silence_dropped(self) -> float:
        """Where the seed starts in its file, in seconds (named as `musictx.tasks.seeds.Seed`'s)."""
        return self.origin_seconds

    @property
    def start_tick(self) -> int:
        return int(self.lines[self.first_bar])

    @property
    def seconds(self) -> float:
        t = ticks_to_seconds(self.score, self.lines[[self.first_bar, self.first_bar + self.bars]])
        return float(t[1] - t[0])

    def bars_after(self, bar_id: int, bars: int) -> np.ndarray:
        """The song's own ids of the ``bars`` bars after the seed, from the Bar id that opens the first (fewer
        where the song ends sooner; none past its end): the real continuation, made as the seed's ids were."""
        bar_at = np.flatnonzero(self.song_ids == bar_id)  # (n_bars,) index of each Bar id
        k0 = self.first_bar + self.bars
        if k0 >= len(bar_at):
            return self.song_ids[:0]
        return self.song_ids[bar_at[k0]: bar_at[k0 + bars] if k0 + bars < len(bar_at) else len(self.song_ids)]

    def bar_seconds(self) -> float:
        """Seconds of the seed's last bar: how long one more bar of the continuation lasts."""
        k = self.first_bar + self.bars
        t = ticks_to_seconds(self.score, self.lines[[k - 1, k]])
        return float(t[1] - t[0])

    def new_bar_lines_ticks(self, bars: int) -> np.ndarray:
        """(bars + 1,) the bar lines of ``bars`` new bars after the seed, in the file's ticks: the file's own lines,
        carried on at its last bar's length (the meter the continuation's bars are written in past its end)."""
        k = self.first_bar + self.bars
        known = self.lines[k:k + bars + 1]
        step = int(self.lines[-1] - self.lines[-2]) if len(self.lines) > 1 else 1
        more = known[-1] + step * np.arange(1, bars + 2 - len(known)) if len(known) else np.zeros(0)
        return np.concatenate([known, more]).astype(np.int64)

    def new_bar_lines_seconds(self, bars: int) -> np.ndarray:
        """`new_bar_lines_ticks` in seconds on the file's own clock (as a lead sheet of the file has them)."""
        return ticks_to_seconds(self.score, self.new_bar_lines_ticks(bars)) - self.shift_seconds

    def output_timing(self) -> tuple[list[Tempo], list[TimeSignature]]:
        """The file's tempo map and meter from the seed's first bar line on, moved to start at tick 0."""
        start = self.start_tick
        meters = self.score.time_signatures if self.written_meters is None else self.written_meters
        tempos, sigs = _from_tick(self.score.tempos, start), _from_tick(sorted(meters, key=lambda s: s.time), start)
        tempos = [Tempo(max(t.time - start, 0), t.qpm) for t in tempos] or [Tempo(0, 120.0)]
        sigs = [TimeSignature(max(s.time - start, 0), s.numerator, s.denominator) for s in sigs] or [
            TimeSignature(0, 4, 4)]
        return tempos, sigs


def _from_tick(events, start: int) -> list:
    """The event in force at ``start`` and those after it."""
    return [e for e in events if e.time <= start][-1:] + [e for e in events if e.time > start]


def metrical_seed(tok, path: str | os.PathLike, seed_seconds: float | None = None,
                  seed_from: float = 0.0, beats="auto", learnt: tuple[int, ...] | None = None,
                  level: LevelRule | None = None) -> MetricalSeed:
    """The seed of ``path``: whole bars from the bar line nearest ``seed_from`` (s), ``seed_seconds`` long
    to the nearest bar line (all to the end when None). ``learnt``: the parts (programs) the model learnt; a
    track of another part is played as one of them (`musictx.tasks.played_as`). ``level``: when a seed is
    heard at the model's level (pp, ff, one velocity: `musictx.io.dynamics.LevelRule`; None: as it is)."""
    if getattr(tok, "kind", None) != "remi":  # a Performance tokenizer has no bars to cut at (fit_registers)
        raise GenerateError(f"metrical_seed takes a metrical tokenizer (pop's), not {type(tok).__name__}; a "
                            "Performance model's seed: musictx.tasks.seed_from_midi")
    read = tok.fit_registers(tok.read(path, beats))  # a piccolo's top octave is heard an octave down
    plan = None
    if learnt is not None:
        tracks, plan = play_as_learnt(read.score, read.tracks, learnt)
        read = read._replace(tracks=tracks)
    score, tracks, shift_ticks = read.score, read.tracks, read.shift_ticks
    ids = tok.encode_read(read, path)  # a model with chord events: the song's chords, where a chord file is beside
    bar_at = np.flatnonzero(ids == tok.bar_id)  # (n_bars,) index of each Bar id
    lines = bar_lines(score)
    shift = float(ticks_to_seconds(score, np.array([shift_ticks]))[0])  # tempo map at the start: the pickup
    secs = ticks_to_seconds(score, lines) - shift  # (n_lines,) bar lines on the file's own clock
    n_bars = min(len(bar_at), len(lines) - 1)
    if n_bars == 0:
        raise GenerateError(f"seed_midi={path}: no bar to take a seed from")
    if seed_from:
        first = _nearest_bar(path, secs, n_bars, seed_from)
    else:
        first = _first_sounding_bar(score, lines, n_bars)
    if seed_seconds:
        end = int(np.argmin(np.abs(secs[: n_bars + 1] - (secs[first] + seed_seconds))))
        count = max(end - first, 1)
    else:
        count = n_bars - first
    count = min(count, n_bars - first)
    dynamics = heard_dynamics(score_velocities(score, int(lines[first]), int(lines[first + count])), level)
    if dynamics.scale != 1.0:  # the same bars, each velocity id louder (softer)
        ids = tok.encode_read(read._replace(score=scale_score(score, dynamics.scale)), path)
    stop = bar_at[first + count] if first + count < len(bar_at) else len(ids)
    remember_seed_notes(plan, score, int(lines[first]), grid_ticks(tok, score, int(lines[first])))
    return MetricalSeed(ids[bar_at[first]:stop], tracks, score, first, count, lines,
                        origin_seconds=float(secs[first]), shift_seconds=shift, path=str(path), song_ids=ids,
                        meter_found=read.meter_found, parts=plan, registers=read.registers, dynamics=dynamics,
                        written_meters=read.written_meters)


def grid_ticks(tok, score: Score, tick: int = 0) -> float:
    """Ticks of ``score`` between two of the tokens' positions at ``tick``: a beat (a quarter, an eighth in x/8)
    over the tokenizer's positions a beat."""
    sigs = [s for s in sorted(score.time_signatures, key=lambda s: s.time) if s.time <= tick]
    denominator = sigs[-1].denominator if sigs else 4
    return score.ticks_per_quarter * 4 / denominator / max(tok.miditok.config.beat_res.values())


def _nearest_bar(path, secs: np.ndarray, n_bars: int, seed_from: float) -> int:
    """The bar whose line is nearest ``seed_from`` (s); GenerateError when ``seed_from`` is past the file's last
    bar: the nearest bar was then the last one, a seed from somewhere else than asked (the Performance-event
    seed and the app refuse it too)."""
    end = float(secs[n_bars])
    if seed_from > end:
        raise GenerateError(f"seed_from={seed_from:g}: seed_midi={path} is only {end:.1f} s long (its {n_bars} "
                            f"bars end there); lower seed_from")
    return int(np.argmin(np.abs(secs[:n_bars] - seed_from)))


def _first_sounding_bar(score: Score, lines: np.ndarray, n_bars: int) -> int:
    """The first bar with a note in its first half: a seed from the start skips the empty bars and the pickup
    bar before the music (a POP909 file read on its beat grid opens with an empty bar, then a bar that is
    silent until its last beat), so the output opens with music on a downbeat, not with seconds of silence."""
    onsets = np.sort(np.concatenate([[n.time for n in t.notes] for t in score.tracks] or [[]])).astype(np.int64)
    for bar in range(n_bars):
        half = lines[bar] + (lines[bar + 1] - lines[bar]) // 2
        if np.any((onsets >= lines[bar]) & (onsets < half)):
            return bar
    return 0


def pickup_notes(seed: MetricalSeed) -> int:
    """Notes of the file that start before the seed's first bar line (what a seed from the start leaves out)."""
    return sum(int(np.sum(np.array([n.time for n in t.notes]) < seed.start_tick)) for t in seed.score.tracks)


def bars_for(seed: MetricalSeed, length_seconds: float | None, length_bars: int | None) -> int:
    """Whole bars of new music: ``length_bars``, else ``length_seconds`` at the seed's last bar's length."""
    if length_bars:
        return int(length_bars)
    return max(1, math.ceil((length_seconds or 30.0) / seed.bar_seconds() - 1e-6))


def seed_of(tok, opts, learnt: tuple[int, ...] | None = None, level: LevelRule | None = None) -> MetricalSeed:
    """``musictx-generate``'s seed for a metrical model as its options (`GenerateOptions`) ask, said in one
    printed line; a metrical model always continues a seed file. ``learnt``, ``level``: as `metrical_seed`'s."""
    if not opts.seed_midi:
        raise GenerateError("a metrical model continues a seed: give seed_midi=<file>")
    try:
        seed = metrical_seed(tok, opts.seed_midi, opts.seed_seconds, opts.seed_from, opts.beats_per_bar or "auto",
                             learnt, level)
    except GenerateError:
        raise  # the seed's own refusals (seed_from past the end) name the file and the option already
    except ValueError as err:  # a broken beat file beside the seed
        raise MidiReadError(opts.seed_midi, str(err)) from None
    if seed.meter_found:
        print(f"meter: {seed.meter_found}")
    print(f"seed: bars {seed.first_bar + 1}-{seed.first_bar + seed.bars} of {opts.seed_midi} "
          f"({seed.seconds:.2f} s {_from_where(seed.origin_seconds)}, cut at bar lines); tracks kept apart: "
          f"{seed.tracks.describe()}" + (f"; the {left} note(s) of the pickup before bar {seed.first_bar + 1} "
                                         f"left out" if not opts.seed_from and (left := pickup_notes(seed)) else ""))
    if line := held_too_long(tok, seed):
        print(line)
    start = f"bar {seed.first_bar + 1}"
    if _ends_the_file(tok, seed) and (line := seed_past_end(opts, seed.seconds, seed.bar_seconds() / 2, start)):
        print(line)  # the bar line nearest the end asked for was the file's last: it has less than asked
    return seed


def held_too_long(tok, seed: MetricalSeed) -> str | None:
    """The line saying how many of the seed's pitched notes are held longer than the tokens' longest Duration (12
    beats): the model hears them that long and the seed is written back so, which a note held a minute (a pedal
    point, a drone) was, unsaid. None where every note fits."""
    longest = float(np.nanmax(tok.duration_beats()))
    start, stop = seed.start_tick, int(seed.lines[seed.first_bar + seed.bars])
    grid = grid_ticks(tok, seed.score, start)  # ticks of one position; a beat is beat_res positions
    limit = (longest * max(tok.miditok.config.beat_res.values()) + 0.5) * grid
    held = sum(int(np.sum((n["time"] >= start) & (n["time"] < stop) & (n["duration"] > limit)))
               for t in seed.score.tracks if not t.is_drum for n in [t.notes.numpy()])
    if not held:
        return None
    return (f"seed: {held} note(s) held longer than {longest:g} beats, the longest the model's tokens hold, are heard "
            f"and written {longest:g} beats long")


def _ends_the_file(tok, seed: MetricalSeed) -> bool:
    """Whether the seed runs to the file's last bar."""
    return seed.first_bar + seed.bars >= min(int((seed.song_ids == tok.bar_id).sum()), len(seed.lines) - 1)


def _from_where(origin: float) -> str:
    """Where the seed's first bar line is, as a listener reads it: a bar line before the file's time 0 (the
    bar of a pickup) is said so, not as a negative time."""
    if origin < -0.005:
        return f"from the pickup's bar line, {-origin:.2f} s before the file's start"
    return f"from {max(origin, 0.0):.2f} s"
