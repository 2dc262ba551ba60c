"""``musictx-generate task=infill|accompany``: each sample made in the song's own score, handed on decoded for
`musictx.generation.output_folder.write_run` to write as MIDI (+ piano roll) with a ``generation.json`` record.

    musictx-generate task=infill checkpoint=... seed_midi=song.mid bars=9-12 [tracks=piano]
    musictx-generate task=accompany checkpoint=... seed_midi=melody.mid [tracks=bridge,piano] [bars=..] [chords=a.lab]

Called by `musictx.generation.continue_midi.run` once the model is loaded; the options were checked before
(`musictx.generation.generate_options.check_task`).
"""

from __future__ import annotations

import time
from dataclasses import replace

from musictx.generation.accompany import accompany_song, melody_song, roles_to_write
from musictx.generation.generate_options import read_chords
from musictx.generation.infill import infill_song, meter_warning, parse_bars, programs_of_names, read_song
from musictx.generation.seeds import GenerateError
from musictx.generation.take import Batch, Take, score_roll
from musictx.io.infill_format import InfillIds
from musictx.io.tokenizers import is_metrical


def sample_task(opts, net, tok) -> Batch:
    """The ``opts.num_samples`` samples of ``opts.task``, sample k drawn with seed ``opts.seed + k``."""
    if not is_metrical(tok):
        raise GenerateError(f"checkpoint={opts.checkpoint}: task={opts.task} needs a metrical (REMI) model")
    if opts.task == "infill":
        try:
            InfillIds.of(tok)
        except ValueError as err:
            raise GenerateError(f"checkpoint={opts.checkpoint}: {err}") from None
    make, what = _task(opts, net, tok)
    takes, t0 = [], time.perf_counter()
    for k in range(opts.num_samples):
        start = time.perf_counter()
        score, new_ids = make(replace(opts, seed=opts.seed + k))
        takes.append(_take(score, new_ids, what, time.perf_counter() - start))
    return Batch(takes, {"task": opts.task, "what": what}, time.perf_counter() - t0)


def _task(opts, net, tok):
    """(a function of the options making one sample: (score, new ids), a line saying what it does)."""
    if opts.task == "infill":
        song = read_song(tok, opts.seed_midi)
        s, e = parse_bars(opts.bars, song)
        taken = programs_of_names(song, opts.tracks)
        names = "all tracks" if taken is None else ", ".join(
            t.name for t in song.read.tracks.tracks if t.program in taken)
        what = f"bars {s + 1}-{e} of {opts.seed_midi} ({names}) filled" + meter_warning(song)

        def make(o):
            score, middle = infill_song(net, tok, song, s, e, taken, o, max_bar_repeats=o.max_bar_repeats)
            return score, len(middle)
        return make, what
    song = melody_song(tok, opts.seed_midi)
    s, e = parse_bars(opts.bars, song) if opts.bars is not None else (0, song.n_bars)
    roles = roles_to_write(song, opts.tracks)
    chords = read_chords(opts.chords)
    what = f"{', '.join(roles)} written for bars {s + 1}-{e} of {opts.seed_midi}" + (
        f", following the chords of {opts.chords}" if chords else "") + meter_warning(song)
    return (lambda o: accompany_song(net, tok, song, roles, s, e, o, max_bar_repeats=o.max_bar_repeats,
                                     chords=chords)), what


def _take(score, new_ids: int, what: str, wall: float) -> Take:
    notes, tracks, end = score_roll(score)
    record = {"new_tokens": int(new_ids), "wall_s": wall, "seconds": end, "notes": len(notes), "tracks": tracks}
    silent = [t.name for t in score.tracks if len(t.notes) == 0]  # a MIDI file keeps no empty track
    record["silent_tracks"] = silent
    said = f"; {', '.join(silent)}: no notes written, so no such track in the file" if silent else ""
    return Take(score, notes, record, f"{what}; {len(notes)} notes in {tracks}{said}")
