"""A seed played softer (or louder) than the music a model learnt from, heard at the model's own level, and its new
notes written back as softly (or loudly).

The models did not follow a seed far from their own level: a pp seed was answered at mf, and a file written at one
loud velocity (100 or 127, as notation programs export) was answered by the piano at its own mf. So a seed (or a
song to fill or accompany) whose pitched notes' median velocity is under a floor (`soft_seed_velocity`), or over a
ceiling (`loud_seed_ratio` times the model's level), or whose notes all have one velocity (`flat_seed_level`: no
dynamics, as a notation program writes it; the piano answered every note at 80 at its own 63), has every pitched
velocity scaled by one factor, its median to the model's own level (`LevelRule`: the model's ``heard_velocity``,
recorded in its config.json at training, `musictx.io.played_level`; the floor where it records none, and then no
ceiling and no flat rule): the model hears the music as loud as the music it learnt, and the new notes are scaled
back by the same factor (`Dynamics.back`). A scale, not a shift, so that accents and swells keep their
proportions. Drums keep their own velocities. docs/generation.md, "A seed played pp goes on pp", has the
measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIDI_VELOCITIES = (1, 127)


@dataclass(frozen=True)
class Dynamics:
    """How a seed's velocities were heard: each times ``scale`` (1: as they are)."""

    scale: float = 1.0
    median: float = 0.0  # the seed's median velocity, as played
    flat: bool = False  # heard at the model's level because every note has one velocity (`LevelRule.flat`)

    def back_one(self, velocity: int) -> int:
        """One velocity the model wrote, as softly (or loudly) as the seed was played (`back`)."""
        return velocity if self.scale == 1.0 else int(scaled(np.array([velocity]), 1.0 / self.scale)[0])

    def back(self, velocity: np.ndarray) -> np.ndarray:
        """Velocities the model wrote, (N,), as softly (or loudly) as the seed was played."""
        return velocity if self.scale == 1.0 else scaled(velocity, 1.0 / self.scale)

    def line(self, say_off: bool = True, what: str = "the seed") -> str:
        """E.g. ``the seed is played softly (median velocity 23): heard at 63, its new notes written back as softly
        (soft_seed_velocity=null: heard as it is)``; "" where it was heard as it is. ``say_off``: name the option
        that turns it off (False where the user has no such switch); ``what``: what was played so."""
        if self.scale == 1.0:
            return ""
        if self.flat:
            off = " (flat_seed_level=false: heard as it is)" if say_off else ""
            return (f"{what} is written at one velocity ({self.median:.0f}): heard at {self.median * self.scale:.0f}, "
                    f"its new notes written back at its level{off}")
        how, option = ("softly", "soft_seed_velocity") if self.scale > 1.0 else ("loudly", "loud_seed_ratio")
        off = f" ({option}=null: heard as it is)" if say_off else ""
        return (f"{what} is played {how} (median velocity {self.median:.0f}): heard at "
                f"{self.median * self.scale:.0f}, its new notes written back as {how}{off}")


@dataclass(frozen=True)
class LevelRule:
    """When a seed is heard at another level, and which: one played softly (its median velocity under ``floor``),
    loudly (over ``ceiling``; None: never) or at one velocity (``flat``) is heard at the model's own level
    (`heard_velocity`: its training music's median), at least the floor."""

    floor: float
    heard_at: float
    ceiling: float | None = None
    flat: bool = False  # one written at one velocity (no dynamics, as a notation program or a piano roll exports it)
    # is heard at the model's level too: the piano answered every note at 80 at its own 63


def level_rule(floor: float | None, net, loud_ratio: float | None = None, flat: bool = False) -> LevelRule | None:
    """The rule for ``net`` (its ``heard_velocity``, None where it records none: the floor, and no ceiling) under a
    run's ``soft_seed_velocity`` (``floor``) and ``loud_seed_ratio`` (the ceiling as a multiple of the model's
    level) and ``flat_seed_level`` (``flat``; needs a recorded level); None where none applies: every seed heard as
    it is."""
    level = getattr(net, "heard_velocity", None)
    ceiling = None if level is None or loud_ratio is None else level * loud_ratio
    flat = flat and level is not None
    if floor is None and ceiling is None and not flat:
        return None
    floor = 0.0 if floor is None else float(floor)
    return LevelRule(floor, max(floor, level or 0.0), ceiling, flat)


def seed_rule(opts, net) -> LevelRule | None:
    """`level_rule` under a run's options (``soft_seed_velocity``, ``loud_seed_ratio``, ``flat_seed_level``)."""
    return level_rule(opts.soft_seed_velocity, net, opts.loud_seed_ratio, opts.flat_seed_level)


def heard_dynamics(velocity: np.ndarray, rule: LevelRule | None) -> Dynamics:
    """How to hear a seed whose pitched notes have ``velocity`` (N,): scaled so that their median is the rule's
    ``heard_at`` where it is under its floor or over its ceiling, or, with the rule's ``flat``, where every note has
    one velocity (None: never)."""
    if rule is None or not len(velocity):
        return Dynamics()
    median = float(np.median(velocity))
    if 0 < median < rule.floor or (rule.ceiling is not None and median > rule.ceiling):
        return Dynamics(rule.heard_at / median, median)
    if rule.flat and len(velocity) > 1 and 0 < median != rule.heard_at and np.ptp(velocity) == 0:
        return Dynamics(rule.heard_at / median, median, flat=True)
    return Dynamics(1.0, median)


def scaled(velocity: np.ndarray, scale: float) -> np.ndarray:
    """``velocity`` (N,) times ``scale``, rounded, within MIDI's 1..127, in its own dtype."""
    low, high = MIDI_VELOCITIES
    velocity = np.asarray(velocity)
    return np.clip(np.rint(velocity.astype(np.float64) * scale), low, high).astype(velocity.dtype)


def score_velocities(score, start: int = 0, end: int | None = None) -> np.ndarray:
    """(N,) velocities of a symusic ``score``'s pitched notes struck in ticks [start, end) (None: to its end)."""
    out = []
    for track in score.tracks:
        if track.is_drum:
            continue
        a = track.notes.numpy()
        inside = a["time"] >= start
        if end is not None:
            inside &= a["time"] < end
        out.append(a["velocity"][inside])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def scale_score(score, scale: float):
    """``score`` (symusic, in place) with every pitched note's velocity times ``scale`` (`scaled`)."""
    from musictx.io.score_io import note_list  # symusic: not at import

    if scale == 1.0:
        return score
    for track in score.tracks:
        if track.is_drum or not len(track.notes):
            continue
        a = track.notes.numpy()
        track.notes = note_list(a["time"], a["duration"], a["pitch"], scaled(a["velocity"], scale))
    return score
