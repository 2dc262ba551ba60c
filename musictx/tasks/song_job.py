"""``musictx-generate task=infill|accompany``: each sample made in the song's own score, handed on decoded for
`musictx.generation.output_folder.write_run` to write as MIDI (+ piano roll) with a ``generation.json`` record.

    musictx-generate task=infill checkpoint=... seed_midi=song.mid bars=9-12 [tracks=piano]
    musictx-generate task=accompany checkpoint=... seed_midi=melody.mid [tracks=bridge,piano] [bars=..] [chords=a.lab]

Called through the task (`musictx.tasks.song_task.SongTask.job`) once the model is loaded; the options were
checked before (`SongTask.check`).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from tqdm import tqdm

from musictx.decoding.errors import GenerateError
from musictx.io.chord_labels import Chords
from musictx.io.dynamics import LevelRule, seed_rule
from musictx.listed import counts_listed
from musictx.tasks.limits import BOUNDS
from musictx.tasks.prompt import Job, new_rows
from musictx.tasks.song_bars import parse_bars, reading_said
from musictx.tasks.take import Take, score_roll


def song_job(task, opts, net, tok) -> Job:
    """``task`` (a `musictx.tasks.song_task.SongTask`) as a job: the song read, the bars and tracks resolved (a
    range past the bounds is refused, `check_range`, before any sampling), the ``opts.num_samples`` takes'
    prompt drawn as one batch with seed ``opts.seed``, a progress bar in bars. A Ctrl-C ends the run with
    nothing written."""
    task.check_model(opts.checkpoint, tok)
    request = _request(task, opts, tok, getattr(net, "learnt_programs", None), seed_rule(opts, net))
    what = task.describe(request, opts) + reading_said(request.song)
    prompt = request.prompt(net, tok, opts, opts.num_samples)

    def takes(ids, _cut_short, wall) -> list[Take]:
        made = request.written(tok, new_rows(ids, prompt))
        # the samples share one batch: each take's wall time is the batch's share
        marked = tuple(float(t) for t in request.song.line_seconds([request.s, request.e]))  # the bars written
        return [_take(score, n_new, what, wall / len(made), marked, request.take_note(tok, score))
                for score, n_new in made]

    bars = opts.num_samples * (request.e - request.s)
    return Job(prompt, takes, {"task": task.name, "what": what}, lambda: _progress(task, opts, tok, bars),
               keeps_partial=False)


@contextmanager
def _progress(task, opts, tok, total: int):
    """The bars drawn so far, all samples together: each Bar drawn opens one more bar of a sample."""
    with tqdm(total=total, desc=task.progress_word, unit=" bars", file=sys.stdout,
              disable=not opts.progress_every_s, mininterval=opts.progress_every_s or 10.0) as bar:
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


def _request(task, opts, tok, learnt: tuple[int, ...] | None, level: LevelRule | None = None):
    """The run's request (`musictx.tasks.song_task.SongRequest`): the song read the task's way for a model that
    learnt the parts ``learnt``, its bars (bars=, or the whole song where the task allows) and tracks; accompany
    with no tracks named writes a whole song's accompaniment anew."""
    song = task.read(tok, opts.seed_midi, opts.beats_per_bar or "auto", anew=not opts.tracks, learnt=learnt,
                     level=level)
    s, e = parse_bars(opts.bars, song) if task.needs_bars or opts.bars is not None else (0, song.n_bars)
    check_range(opts, song, s, e)
    request = task.request(song, s, e, opts.tracks)
    if task.takes_chords:
        request.chords = Chords.read_option(opts.chords)
        if request.chords is not None:  # the bars written, on the song file's clock as the lead sheet's
            start, end = (float(t) for t in song.line_seconds([s, e]))
            if short := request.chords.short_of(start, end, f"chords={opts.chords}: bars {s + 1}-{e}"):
                print(short)
    return request


def _take(score, new_ids: int, what: str, wall: float, marked: tuple[float, float], note: str = "") -> Take:
    notes, tracks, end, parts = score_roll(score)
    record = {"new_tokens": int(new_ids), "wall_s": wall, "seconds": end, "notes": len(notes), "tracks": tracks}
    silent = [t.name for t in score.tracks if len(t.notes) == 0]  # a MIDI file keeps no empty track
    record["silent_tracks"] = silent
    said = f"; {', '.join(silent)}: no notes written, so no such track in the file" if silent else ""
    said += f"; {note}" if note else ""
    return Take(score, notes, record, f"{what}; {len(notes)} notes in {counts_listed(tracks)}{said}", parts=parts,
                marked=marked)
