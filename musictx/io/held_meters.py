"""A file's meters as the metrical tokens can hold them. No torch.

MidiTok's REMI writes a bar's meter as a TimeSig token, and the shipped tokenizers hold only n/4 (n 1-7) and
n/8 (n 3, 5, 6, 7, 9, 12) (`musictx.io.remi_settings`). A time signature outside those it drops without a word,
and the bar before it runs on: a reel in 2/2 after its one-beat pickup became 63 one-beat bars, and a
Palestrina mass in 4/2 was cut into 4/4 bars. The seed, counted in the file's bars, was then cut bars away from
where its line said (a 16 s seed of 8 s, "3 bars (0.0 s) new").

So a meter the tokens do not hold is rewritten, before encoding, as the meters they do hold that cover the same
bar: one of the same length where there is one (2/2 as 4/4, 3/2 as 6/4, 4/8 as 2/4, 12/16 as 6/8; the bar lines
stay, and the continuation is written in the file's own meter), else the bar split into two to four bars as even
as can be (4/2 as two of 4/4, 9/4 as 5/4 + 4/4, 11/8 as 6/8 + 5/8), else two, four or eight bars as one (7/16
pairs as 7/8). One line says what was read how.
"""

from __future__ import annotations

import math

from symusic import Score, TimeSignature

MAX_PARTS = 4  # a bar split into at most this many bars the tokens hold
MAX_JOIN = 8  # at most this many bars of a tiny meter read as one


def held_as(numerator: int, denominator: int, held: dict[int, list[int]]) -> list[tuple[int, int]] | None:
    """The meters the tokens hold (``held``: denominator -> numerators) that one bar of ``numerator/denominator``
    is read as: itself where held; else the fewest bars, as even as can be, of one denominator (the nearest to the
    file's first, then the finer) that last as long; else one bar lasting 2, 4 or 8 of the file's (a negative
    count: [(-k, 0), meter]). None where nothing fits."""
    if numerator in held.get(denominator, ()):
        return [(numerator, denominator)]
    order = sorted(held, key=lambda d: (abs(math.log2(d) - math.log2(denominator)), -d))
    for parts in range(1, MAX_PARTS + 1):
        for d in order:
            split = _even_split(numerator * d, denominator, parts)
            if split and all(n in held[d] for n in split):
                return [(n, d) for n in split]
    for k in (2, 4, MAX_JOIN):
        for d in order:
            n = _whole(numerator * d * k, denominator)
            if n in held[d]:
                return [(-k, 0), (n, d)]
    return None


def _whole(top: int, bottom: int) -> int | None:
    return top // bottom if top % bottom == 0 else None


def _even_split(top: int, bottom: int, parts: int) -> list[int] | None:
    """``top / bottom`` (a whole number) cut into ``parts`` whole numbers as even as can be, larger first."""
    total = _whole(top, bottom)
    if total is None or total < parts:
        return None
    q, r = divmod(total, parts)
    return [q + 1] * r + [q] * (parts - r)


def hold_meters(score: Score, held: dict[int, list[int]], name: str) -> tuple[list[TimeSignature] | None, str | None]:
    """Rewrite ``score``'s time signatures the tokens do not hold, in place (`held_as`). Returns (the time signatures
    to write the music back in: the file's own where every bar line stayed, the rewritten ones where bars were split
    or joined; None where nothing was rewritten, the line saying what was read how, or None)."""
    sigs = sorted(score.time_signatures, key=lambda s: s.time)
    if all(s.numerator in held.get(s.denominator, ()) for s in sigs):
        return None, None
    end = score.end()
    read, written, said = [], [], {}
    for k, sig in enumerate(sigs):
        stop = sigs[k + 1].time if k + 1 < len(sigs) else None
        meters = held_as(sig.numerator, sig.denominator, held)
        own = f"{sig.numerator}/{sig.denominator}"
        if meters is None:  # no bar the tokens hold: MidiTok's own reading, said
            read.append(sig)
            written.append(sig)
            said[own] = f"{own} is kept as it is (no bar the tokens hold lasts as long; its bars may not line up)"
            continue
        events = _events(sig.time, stop, end, meters, score.ticks_per_quarter)
        read += events
        kept = len(meters) == 1
        written += [sig] if kept else events
        if (sig.numerator, sig.denominator) != meters[-1] or not kept:
            said[own] = _how(own, meters)
    score.time_signatures = read
    return written, (f"{name}: {'; '.join(said.values())}: the model's tokens hold no such bar" if said else None)


def _how(own: str, meters: list[tuple[int, int]]) -> str:
    if meters[0][0] < 0:
        return f"every {-meters[0][0]} bars of {own} read as one of {meters[1][0]}/{meters[1][1]} (bars counted so)"
    if len(meters) == 1:
        return f"{own} read as {meters[0][0]}/{meters[0][1]}, the same bars (written back as {own})"
    parts = " + ".join(f"{n}/{d}" for n, d in meters)
    return f"each bar of {own} read as {parts} (bars counted so)"


def _events(start: int, stop: int | None, end: int, meters: list[tuple[int, int]], tpq: int) -> list[TimeSignature]:
    """The time signatures from ``start`` to ``stop`` (None: to ``end``, the score's last tick; the last meter runs on
    after it) that play ``meters`` bar by bar: one event where the bars are all one meter, else one at each bar line."""
    if meters[0][0] < 0:
        meters = meters[1:]
    if len(set(meters)) == 1:
        return [TimeSignature(start, *meters[0])]
    lengths = [n * tpq * 4 // d for n, d in meters]
    last = stop if stop is not None else end  # none on the end: MidiTok would write it an empty bar
    events, tick, k = [], start, 0
    while tick < last:
        events.append(TimeSignature(tick, *meters[k]))
        tick += lengths[k]
        k = (k + 1) % len(meters)
    return events
