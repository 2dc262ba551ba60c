"""A metrical continuation written out: its new ids decoded after the seed's into a score on the seed file's
ticks, with its named tracks, tempo map and meter (`continuation_score`), and how long its new bars last. No
torch: the critic's choice (`musictx.tasks.critic_choice`) and the evaluation read continuations this way too.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from symusic import Score, Tempo, TimeSignature, Track

from musictx.io.dynamics import scale_score
from musictx.tasks.metrical_seeds import MetricalSeed, grid_ticks, ticks_to_seconds
from musictx.tasks.played_as import hand_back


def continuation_score(tok, seed: MetricalSeed, new_ids: np.ndarray, include_seed: bool = True) -> Score:
    """Seed + continuation (or the continuation alone, from its first bar line) as a score in the seed file's
    ticks, with its named tracks, its tempo map and meter from the seed's first bar line on."""
    prefix = seed.ids if include_seed else np.array([], dtype=np.int64)
    score = tok.decode_score(np.concatenate([prefix, new_ids]), seed.tracks)
    tpq = output_tpq(seed.score.ticks_per_quarter, score.ticks_per_quarter)
    score = score.resample(tpq, min_dur=1)
    first = seed.first_bar if include_seed else seed.first_bar + seed.bars
    tempos, sigs = _timing_from(seed, first)
    factor = tpq / seed.score.ticks_per_quarter  # the seed file's ticks -> the output's
    # the song's tempo map and meter go on under the new bars; their events after the last note are dropped,
    # or a DAW (and the file's length) would run on to the end of the song the seed came from
    end = max((n.end for t in score.tracks for n in t.notes), default=0)
    score.tempos = [Tempo(round(t.time * factor), t.qpm) for k, t in enumerate(tempos)
                    if k == 0 or round(t.time * factor) < end]
    score.time_signatures = [TimeSignature(round(s.time * factor), s.numerator, s.denominator)
                             for k, s in enumerate(sigs) if k == 0 or round(s.time * factor) < end]
    seed_end = (seed.lines[seed.first_bar + seed.bars] - seed.start_tick) * factor if include_seed else 0
    score = hand_back(score, seed.parts, grid_ticks(tok, score), seed_end)  # tracks that shared a part, apart
    if seed.registers is not None:
        seed.registers.back(score)  # a track read by octaves into the tokens' pitches goes on where it was
    scale_score(score, 1.0 / seed.dynamics.scale)  # a pp (ff) seed's notes, and the new ones, as it was played
    # every seed track stays in the file, even one the continuation left silent
    present = {t.name for t in score.tracks}
    for info in seed.tracks.tracks:
        if info.name not in present and not info.is_drum:
            score.tracks.append(Track(info.name, info.real_program, False))
    return score


def output_tpq(seed_tpq: int, token_tpq: int) -> int:
    """The seed's ticks per quarter when the tokens' grid falls on its ticks, else 480 (a tick grid that
    rounds no onset: pretty_midi's default 220 does not hold MidiTok's 8 per quarter)."""
    return seed_tpq if seed_tpq % token_tpq == 0 else 480


def _timing_from(seed: MetricalSeed, bar: int):
    shifted = replace(seed, first_bar=bar, bars=1)  # its written meters too (a 2/2 read as 4/4 is written 2/2)
    return shifted.output_timing()


def new_bars_seconds(seed: MetricalSeed, score: Score, include_seed: bool = True) -> float:
    """Seconds of new music in ``score``: from the seed's last bar line to the end of the last note."""
    factor = score.ticks_per_quarter / seed.score.ticks_per_quarter
    seed_ticks = int(seed.lines[seed.first_bar + seed.bars] - seed.lines[seed.first_bar])
    start = round(seed_ticks * factor) if include_seed else 0
    end = max(score.end(), start)
    t = ticks_to_seconds(score, np.array([start, end]))
    return float(t[1] - t[0])
