"""Which shipped model fits a seed, said in one line: a metrical seed (notes on a beat grid, or a band's
tracks, or POP909 beats beside it) goes to ``pop``, a performance (rubato, one piano) to ``piano``.
``checkpoint=`` always wins. No torch.
"""

from __future__ import annotations

import os

import numpy as np
from symusic import Score

from musictx.io.read_errors import unreadable
from musictx.io.score_prep import beats_file_of, role_of
from musictx.tasks.registry import task_named
from musictx.tasks.seeds import seed_refused

GRID_SHARE = 0.8  # share of onsets within 1/32 beat of the 16th grid above which a file is metrical
BAND_TRACKS = 3  # pitched tracks from which a file is a band's song, whatever its timing (two: a piano's hands)


def grid_share(score: Score) -> float:
    """Share of the note onsets on a 16th-note grid of the score's ticks, at the grid's best phase (POP909's
    grid starts at its first beat, not at tick 0): a quantized file scores ~1, a recorded performance ~0.25."""
    tpq = score.ticks_per_quarter
    onsets = np.concatenate([t.notes.numpy()["time"] for t in score.tracks if len(t.notes)] or [np.zeros(0)])
    if len(onsets) == 0:
        return 0.0
    step, bins = tpq / 4, 16  # a bin is 1/64 beat: within +-1 bin is within 1/32 beat
    phase = np.floor((onsets % step) / step * bins).astype(np.int64) % bins  # (N,) bin of each onset's phase
    counts = np.bincount(phase, minlength=bins)
    near = counts + np.roll(counts, 1) + np.roll(counts, -1)  # (bins,) onsets within a bin of each phase
    return float(near.max() / len(onsets))


def choose_model(seed_midi: str | os.PathLike | None, shipped: list[str], task: str = "continue") -> tuple[str, str]:
    """(shipped model name, why) for ``seed_midi``; piano when pop is not installed or there is no seed; for
    ``task=infill`` the model that knows the infill tokens (pop_infill) when it is shipped; for ``task=accompany``
    pop, whatever the melody's timing (the accompaniment is written on bars)."""
    wanted = task_named(task)
    if wanted.model and wanted.model in shipped:  # the task's own model (infill: pop_infill; accompany: pop)
        return wanted.model, wanted.why_model
    if "pop" not in shipped:
        return "piano", "the only shipped model"
    if not seed_midi:
        return "piano", "no seed to judge by (unconditional: the piano model)"
    if beats_file_of(seed_midi):
        return "pop", "a POP909 beat file lies beside the seed"
    try:
        score = Score(str(seed_midi))
    except Exception as err:  # noqa: BLE001 - any reader error: said as the seed's readers say it, before a model is named
        raise seed_refused(seed_midi, unreadable(err)) from None
    if not any(len(t.notes) for t in score.tracks):
        raise seed_refused(seed_midi, "no notes")
    pitched = [t for t in score.tracks if len(t.notes) and not t.is_drum]
    roles = sorted({r for t in pitched if (r := role_of(t.name))})
    if len(roles) >= 2 or len(pitched) >= BAND_TRACKS:  # a band's tracks: the piano model would merge them
        names = sorted({t.name for t in pitched if role_of(t.name)})  # as the file names them (CAU: a BRIDGE)
        named = f"tracks named {', '.join(names)}" if len(roles) >= 2 else f"{len(pitched)} pitched tracks"
        return "pop", f"a multi-track song ({named}), kept apart by the pop model"
    share = grid_share(score)
    if share >= GRID_SHARE:
        drums = sum(bool(len(t.notes)) and t.is_drum for t in score.tracks)
        kit = f" and {drums} of drums" if drums else ""  # a drum loop is no "0 tracks"
        return "pop", (f"metrical seed: {share:.0%} of its onsets on its 16th-note grid, {len(pitched)} pitched "
                       f"track(s){kit}")
    return "piano", f"a performance: {share:.0%} of its onsets on its 16th-note grid (metrical from {GRID_SHARE:.0%})"
