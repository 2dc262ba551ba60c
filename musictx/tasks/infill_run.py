"""``musictx-generate task=infill|accompany``: each sample made in the song's own score, handed on decoded for
`musictx.generation.output_folder.write_run` to write as MIDI (+ piano roll) with a ``generation.json`` record.

    musictx-generate task=infill checkpoint=... seed_midi=song.mid bars=9-12 [tracks=piano]
    musictx-generate task=accompany checkpoint=... seed_midi=melody.mid [tracks=bridge,piano] [bars=..] [chords=a.lab]

Called by `musictx.generation.continue_midi.run` once the model is loaded; the options were checked before
(`musictx.generation.generate_options.check_task`).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from tqdm import tqdm

from musictx.decoding.errors import GenerateError
from musictx.generation.generate_options import BOUNDS
from musictx.io.chord_labels import Chords
from musictx.io.infill_format import InfillIds
from musictx.io.tokenizers import is_metrical
from musictx.tasks.prompt import Job, new_rows
from musictx.tasks.song_bars import left_out_clause, meter_warning, parse_bars
from musictx.tasks.song_task import SongTask, read_task_song
from musictx.tasks.take import Take, score_roll


def song_job(opts, net, tok) -> Job:
    """``musictx-generate task=infill|accompany``: the song read, the bars and tracks resolved (a range past
    the bounds is refused, `check_range`, before any sampling), the ``opts.num_samples`` takes' prompt drawn
    as one batch with seed ``opts.seed``, a progress bar in bars. A Ctrl-C ends the run with nothing written."""
    if not is_metrical(tok):
        raise GenerateError(f"checkpoint={opts.checkpoint}: task={opts.task} needs a metrical (REMI) model")
    if opts.task == "infill":
        try:
            InfillIds.of(tok)
        except ValueError as err:
            raise GenerateError(f"checkpoint={opts.checkpoint}: {err}") from None
    task, what = _task(opts, tok)
    prompt = task.prompt(net, tok, opts, opts.num_samples)

    def takes(ids, _cut_short, wall) -> list[Take]:
        made = task.written(tok, new_rows(ids, prompt))
        # the samples share one batch: each take's wall time is the batch's share
        marked = tuple(float(t) for t in task.song.line_seconds([task.s, task.e]))  # the bars written, shaded
        return [_take(score, n_new, what, wall / len(made), marked) for score, n_new in made]

    bars = opts.num_samples * (task.e - task.s)
    return Job(prompt, takes, {"task": opts.task, "what": what}, lambda: _progress(opts, tok, bars),
               keeps_partial=False)


@contextmanager
def _progress(opts, tok, total: int):
    """The bars drawn so far, all samples together: each Bar drawn opens one more bar of a sample."""
    with tqdm(total=total, desc="filling" if opts.task == "infill" else "accompanying", unit=" bars",
              file=sys.stdout, disable=not opts.progress_every_s, mininterval=opts.progress_every_s or 10.0) as bar:
        yield lambda next_ids, done: bar.update(int(((next_ids == tok.bar_id) & ~done).sum()))
        bar.update(bar.total - bar.n)


def check_range(opts, song, s: int, e: int) -> None:
    """GenerateError when bars [s, e) are more than a run takes (`BOUNDS`: as many bars, or seconds, as
    ``length_bars`` and ``length_seconds`` allow a continuation), naming the option to give."""
    seconds = float(song.line_seconds([e])[0] - song.line_seconds([s])[0])
    if e - s > BOUNDS.length_bars or seconds > BOUNDS.length_seconds:
        given = f"bars={opts.bars}" if opts.bars is not None else f"seed_midi={opts.seed_midi} (all its {e - s} bars)"
        raise GenerateError(f"{given}: {e - s} bars, {seconds:.0f} s, are more than task={opts.task} takes in one "
                            f"run (at most {BOUNDS.length_bars} bars and {BOUNDS.length_seconds:g} s); give "
                            "bars=FIRST-LAST for a part of it")


def _task(opts, tok) -> tuple[SongTask, str]:
    """(the run's task, a line saying what it does). The task itself (`musictx.tasks.song_task.SongTask`)
    is the app's too."""
    # accompany with no tracks named: a whole song gets a new accompaniment for its melody
    song = read_task_song(opts.task, tok, opts.seed_midi, opts.beats_per_bar or "auto",
                          anew=opts.task == "accompany" and not opts.tracks)
    s, e = parse_bars(opts.bars, song) if opts.task == "infill" or opts.bars is not None else (0, song.n_bars)
    check_range(opts, song, s, e)
    task = SongTask.of(opts.task, song, s, e, opts.tracks)
    if opts.task == "infill":
        what = f"bars {s + 1}-{e} of {opts.seed_midi} ({task.track_names()}) filled"
    else:
        task.chords = Chords.read_option(opts.chords)
        what = f"{task.track_names()} written for bars {s + 1}-{e} of {opts.seed_midi}" + (
            f", following the chords of {opts.chords}" if task.chords else "") + left_out_clause(song)
    return task, what + meter_warning(song)


def _take(score, new_ids: int, what: str, wall: float, marked: tuple[float, float]) -> Take:
    notes, tracks, end, parts = score_roll(score)
    record = {"new_tokens": int(new_ids), "wall_s": wall, "seconds": end, "notes": len(notes), "tracks": tracks}
    silent = [t.name for t in score.tracks if len(t.notes) == 0]  # a MIDI file keeps no empty track
    record["silent_tracks"] = silent
    said = f"; {', '.join(silent)}: no notes written, so no such track in the file" if silent else ""
    return Take(score, notes, record, f"{what}; {len(notes)} notes in {tracks}{said}", parts=parts, marked=marked)
