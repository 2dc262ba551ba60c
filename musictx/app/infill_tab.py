"""The app's infill and accompaniment requests (issue 40, item 4), without Gradio: a song and a bar range in,
one take out (MIDI, a piano roll with the range shaded, WAV where the app renders audio). They build the same
`musictx.tasks.song_task.SongTask` as ``musictx-generate task=infill|accompany`` and go through the
`Continuer`'s upload, disk and pruning checks.
The Gradio tabs that call them are `musictx.app.infill_page`."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np

from musictx.app.core import Continuer, Result, _safe_stem
from musictx.app.disk import RUN_PREFIX
from musictx.app.metrical import BarProgress
from musictx.app.models import Choice, Loaded
from musictx.app.progress import Report
from musictx.decoding import GenerateError, check_seed
from musictx.io.audio import wav_beside
from musictx.io.chord_labels import ChordFileError, Chords
from musictx.io.dynamics import seed_rule
from musictx.io.midi_io import MidiReadError, Notes
from musictx.io.midi_write import write_score
from musictx.io.piano_roll import MARKED_SHADE, piano_roll_figure, save_figure
from musictx.io.tokenizers import is_metrical
from musictx.tasks import (
    SongBars,
    fill_parts_said,
    heard_clause,
    left_out_clause,
    parse_bars,
    reading_said,
    repeats_note,
    task_named,
    ticks_to_seconds,
)

BAND_SHADE = MARKED_SHADE  # the bars asked for, on the song's piano roll and the take's
# One request's work is bounded as the continuation's is (a fill's speed: docs/infill.md).
# Accompaniment: empty bar boxes ask for the whole piece, so the bound holds whole songs: POP909's songs read
# without their beat files have 60-160 bars; 171 bars of a piano performance took 27 s on one busy CPU thread.
MAX_FILL_BARS = 16
MAX_ACCOMPANY_BARS = 256
MAX_CHORD_FILE_BYTES = 2**20  # a lab file of a long song is a few kB


def infill_problem(model: Loaded, task: str = "infill", pinned: bool = True) -> str | None:
    """Why ``model`` cannot do ``task`` (infill or accompany; one line), or None. The rule is the command's
    (`musictx.tasks.song_task.SongTask.check_model`): a metrical model, with the infill tokens to infill.
    Without ``--model`` (``pinned`` False) the app chooses a model that can, so this is said only of a pinned
    one."""
    how = f"start the app without --model (it then uses {task_named(task).model} for this tab)"
    if not is_metrical(model.tokenizer):
        return f"The model `{model.ref}` reads performance events, not bars: {how}."
    try:
        task_named(task).check_model(model.ref, model.tokenizer)
    except GenerateError:
        return (f"The model `{model.ref}` has no infill tokens, so it cannot fill bars: {how}, or with "
                "--model pop_infill (docs/infill.md).")
    return None


def song_parts(song: SongBars) -> list[tuple[str, Notes]]:
    """Each track of ``song`` as the tokenizer read it, in seconds: (its name, its notes)."""
    score = song.read.score.to("second")
    parts = []
    for track in score.tracks:
        a = track.notes.numpy()
        if len(a["time"]):
            parts.append((track.name or f"program {track.program}",
                          Notes(a["time"], a["time"] + a["duration"], a["pitch"].astype(np.int64),
                                a["velocity"].astype(np.int64))))
    return parts


def song_notes(song: SongBars) -> Notes:
    """Every note of ``song`` as the tokenizer read it, in seconds (all tracks together)."""
    return Notes.concat([n for _, n in song_parts(song)])


def draw_band(song: SongBars, s: int, e: int, png: Path, title: str, marked_as: str = "written by the model"
              ) -> Path:
    """The piano roll of ``song``, each track in its colour, bars [s, e) shaded, named ``marked_as`` in the legend,
    and shown with their context."""
    parts = song_parts(song)
    lo, hi = ticks_to_seconds(song.read.score, np.array([song.lines[s], song.lines[e]]))
    return save_figure(piano_roll_figure(Notes.concat([n for _, n in parts]), title=title, parts=parts,
                                         marked=(float(lo), float(hi)), marked_as=marked_as), png)

EMPTY_BOX = {"infill": "no song file: upload a MIDI file in Song MIDI, or press Use the Continue tab's seed",
             "accompany": "no melody file: upload a MIDI file in Melody MIDI"}


class Filler:
    """Infill and accompaniment requests on ``cont``'s model and work folder."""

    def __init__(self, cont: Continuer):
        self.cont = cont
        pinned = cont.models.pinned  # what the tabs say when the page opens: only a pinned model can fall short
        self.problem = infill_problem(cont.models.get(pinned), "infill") if pinned else None
        self.accompany_problem = infill_problem(cont.models.get(pinned), "accompany") if pinned else None

    def _song(self, path, task: str, beats=None, anew: bool = False) -> tuple[Path, SongBars, Choice]:
        """(the upload, the song read for ``task`` by its model, that model's choice); ``beats``: the Beats per
        bar box (empty: the file's meter, or found from its music)."""
        if path is None or str(path) == "":  # each tab's own box, not the Continue tab's seed and motif button
            raise GenerateError(EMPTY_BOX[task])
        midi = self.cont.check_upload(path)
        choice = self.cont.models.choose(midi, task)
        problem = infill_problem(choice.model, task, pinned=bool(self.cont.models.pinned))
        if problem:
            raise GenerateError(problem)
        per_bar = beats_number(beats)
        learnt = getattr(choice.model.net, "learnt_programs", None)  # a band's other tracks played as those parts
        song = _for_file(midi, task_named(task).read, choice.model.tokenizer, midi, per_bar or "auto", anew, learnt,
                         seed_rule(self.cont.base, choice.model.net))
        return midi, song, choice

    def _bars(self, midi: Path, song: SongBars, first, last, most: int) -> tuple[int, int]:
        """The 0-based range [s, e) of the boxes ``first``-``last`` (1-based, inclusive). An empty box reaches
        the piece's edge: From the first bar, To the last, as far as ``most`` bars from From."""
        first, last = bar_number(first, "From"), bar_number(last, "To")
        first = 1 if first is None else first
        if last is not None and first > last:  # both given, the wrong way round (an empty To follows From)
            raise GenerateError(f"bars {first}-{last}: the From bar comes after the To bar")
        last = min(song.n_bars, first + most - 1) if last is None else last
        try:
            s, e = parse_bars(f"{first}-{last}", song)
        except MidiReadError as err:
            raise GenerateError(f"{midi.name}: {err.reason.replace('bars=', 'bars ')}") from None
        if e - s > most:
            raise GenerateError(f"bars {s + 1}-{e}: at most {most} bars at a time")
        return s, e

    def band(self, path, first, last, beats=None) -> Path:
        """The song's piano roll with bars ``first``-``last`` (1-based, inclusive) shaded."""
        midi, song, _ = self._song(path, "infill", beats)
        s, e = self._bars(midi, song, first, last, song.n_bars)
        folder = self.cont.workdir / "previews"
        folder.mkdir(exist_ok=True)
        png = folder / f"{next(self.cont._previews):04d}_{_safe_stem(midi)}_bars.png"
        with self.cont._in_use(png):
            draw_band(song, s, e, png, f"{midi.name}: bars {s + 1}-{e} of {song.n_bars}",
                      "to be written by the model")  # a preview: nothing is written yet
        self.cont.prune(keep={png})
        return png

    def fill(self, path, first, last, tracks: str | None = None, repeats: bool = True, beats=None,
             seed: int = 0, report: Report | None = None) -> Result:
        """Bars ``first``-``last`` of the song ``path`` (of the tracks named, comma-separated; all when empty)
        sampled anew; everything else is the file's own. ``repeats``: the copy cache as the app's settings
        have it (the bars may play the song's own bars again), else off."""
        midi, song, choice = self._song(path, "infill", beats)
        s, e = self._bars(midi, song, first, last, MAX_FILL_BARS)
        task = _for_file(midi, task_named("infill").request, song, s, e, tracks or None)
        seed = check_seed("Random seed (seed)", seed or 0)  # as Continue: 2.5 refused, not cut to 2
        opts = replace(self.cont.base, seed=seed)
        opts = opts if repeats else opts.with_hook("copy_cache", strength=0.0)

        notes = []  # what the take's notes tell, once it is drawn

        def make():
            score = task.sample(choice.model.net, choice.model.tokenizer, opts, on_step=_bars_drawn(choice, s, e,
                                                                                                   report))[0][0]
            notes.append(repeats_note(choice.model.tokenizer, task, score, 'untick "Let the bars repeat"'))
            return score
        what = "every track" if not tracks else tracks
        copied = "" if opts.hooks.copy_cache.strength else ", no copy cache"
        parts = fill_parts_said(song.learnt, song.read, song.parts, task.only) or ""  # tracks played as another part
        return self._write(midi, song, (s, e), make, "fill", f"bars {s + 1}-{e}{_cut(song, s, e, last)} ({what}) "
                           f"filled{copied}, random seed {seed}", choice, beats,
                           note=lambda: ". ".join(x[:1].upper() + x[1:] for x in (parts, *notes) if x))

    def accompany(self, path, roles=None, first=None, last=None, chords=None, beats=None, seed: int = 0,
                  report: Report | None = None) -> Result:
        """The tracks ``roles`` (BRIDGE, PIANO; default those missing) written for the melody ``path``, led by
        the lead sheet's ``chords`` (a lab file) where one is given. A whole song (its melody, BRIDGE and PIANO)
        with no track ticked gets a new accompaniment for its melody; its own is left out and the title says so."""
        midi, song, choice = self._song(path, "accompany", beats, anew=not roles)
        s, e = self._bars(midi, song, first, last, MAX_ACCOMPANY_BARS)
        task = _for_file(midi, task_named("accompany").request, song, s, e, list(roles or []) or None)
        task.chords = self._chords(chords)
        seed = check_seed("Random seed (seed)", seed or 0)  # as Continue: 2.5 refused, not cut to 2
        opts = replace(self.cont.base, seed=seed)

        def make():
            return task.sample(choice.model.net, choice.model.tokenizer, opts,
                               on_step=_bars_drawn(choice, s, e, report))[0][0]
        led = f", following the chords of {Path(chords).name}" if task.chords else ""
        heard = heard_clause(song, s, opts.accompany_context, other_way=False)  # the page has no box for it

        def title(silent: list[str]) -> str:  # a track asked for that got no notes is not called written
            names = ", ".join(f"{name} (no notes)" if name in silent else name for name in task.tracks)
            return (f"{names} written for bars {s + 1}-{e}{_cut(song, s, e, last)}{led}"
                    f"{left_out_clause(song, (s, e))}{heard}, random seed {seed}")
        return self._write(midi, song, (s, e), make, "acc", title, choice, beats, expect=list(task.tracks))

    def _chords(self, path) -> Chords | None:
        """The uploaded chord file's chords (None for none); its problems told under its own name."""
        if path is None or str(path) == "":
            return None
        p = Path(path)
        if not p.is_file():
            raise GenerateError(f"{p.name}: the uploaded chord file is gone; upload it again")
        if p.stat().st_size > MAX_CHORD_FILE_BYTES:
            raise GenerateError(f"{p.name}: {p.stat().st_size / 2**20:.1f} MB is too large for a chord file")
        try:
            return Chords.read(p)
        except ChordFileError as err:
            raise GenerateError(str(err).replace(str(p), p.name)) from None

    def _write(self, midi: Path, song: SongBars, bars: tuple[int, int], make, kind: str, title,
               choice: Choice, beats=None, note=lambda: "", expect: list[str] = ()) -> Result:
        """Sample and write one take into a new run folder, under the same disk checks as a continuation; a
        song whose bars are one beat long (a POP909 file without its beat file) is said in the title; ``note()``,
        asked once the take is drawn, is the line under it. Of the tracks ``expect``, those left without a note in
        the bars are said in the line, and ``title(those)`` (a callable) names them (it said "BRIDGE, PIANO
        written" over a take with no BRIDGE)."""
        cont, (s, e) = self.cont, bars
        cont.check_room()  # before the work: a request that cannot be kept is refused at once
        out = cont.workdir / f"{RUN_PREFIX}{next(cont._runs):04d}"
        stem = _safe_stem(midi)
        with cont._in_use(midi, out):
            try:
                score = make()
                out.mkdir(parents=True)
                cont.check_room()  # before the result's files
                name = f"{stem}_{kind}_{cont._take(stem + '_' + kind):02d}"
                path = out / f"{name}.mid"
                write_score(score, path)  # atomic, as every result the app writes
                # the take, read whole, on the bars the song was read with
                taken = task_named("infill").read(choice.model.tokenizer, path, beats_number(beats) or "auto")
                silent = silent_tracks(taken, s, e, expect)
                title = title(silent) if callable(title) else title
                png = draw_band(taken, s, e, out / f"{name}.png", f"{name}: {title}")
                wav = wav_beside(path, cont.base.soundfont) if cont.audio_reason is None else None
            except BaseException:
                shutil.rmtree(out, ignore_errors=True)  # a refused or failed request leaves nothing
                raise
            cont._newest = out
        cont.prune()
        said = " ".join(x for x in (note(), silent_said(silent, len(expect), s, e)) if x)
        return Result(path, png, out / wav if wav else None, f"{name}: {title}{reading_said(song, False)}",
                      seed_note=said, model_line=choice.line())


def silent_tracks(song: SongBars, s: int, e: int, names) -> list[str]:
    """Those of the tracks ``names`` with no note starting in bars [s, e) of ``song`` (a missing track has none)."""
    lo, hi = ticks_to_seconds(song.read.score, np.array([song.lines[s], song.lines[e]]))
    heard = {name.lower() for name, notes in song_parts(song) if ((notes.start >= lo) & (notes.start < hi)).any()}
    return [name for name in names if name.lower() not in heard]


def silent_said(silent: list[str], asked: int, s: int, e: int) -> str:
    """The line about tracks asked for that the model left silent in bars [s, e) ("" for none)."""
    if not silent:
        return ""
    alone = f", or tick {silent[0]} alone" if asked > 1 else ""
    return (f"{' and '.join(silent)}: no notes in bars {s + 1}-{e} (the model left "
            f"{'it' if len(silent) == 1 else 'them'} silent); press Retry to draw again{alone}.")


def _bars_drawn(choice: Choice, s: int, e: int, report: Report | None) -> BarProgress | None:
    """The progress of writing bars [s, e), counted in the Bar ids drawn: a whole song's accompaniment takes
    a minute or more, and the page showed only Gradio's seconds counter (with a wrong estimate) until then."""
    return None if report is None else BarProgress(choice.model.tokenizer.bar_id, e - s, report)


def beats_number(value) -> int | None:
    """The Beats per bar box: None when empty, else a whole number 1-16 (GenerateError naming the box)."""
    text = "" if value is None else str(value).strip()
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= 16:
        raise GenerateError(f"Beats per bar: give a whole number from 1 to 16, or leave it empty, got {text!r}")
    return int(text)


def bar_number(value, box: str) -> int | None:
    """A bar box's value (the page's text, an API caller's number) as a bar number; None for an empty box;
    GenerateError naming the box for anything else."""
    text = "" if value is None else str(value).strip()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if not (number.is_integer() and number >= 1):
        raise GenerateError(f"{box} bar: {text!r} is not a bar number (a whole number from 1; empty: the "
                            f"{'first' if box == 'From' else 'last'} bar)")
    return int(number)


def _cut(song: SongBars, s: int, e: int, last) -> str:
    """What an empty To box did not reach: the song's last bars, past the most one request may write."""
    if bar_number(last, "To") is not None or e >= song.n_bars:
        return ""
    return f" of {song.n_bars} (at most {e - s} bars at a time)"


def _for_file(midi: Path, work, *args):
    """``work(*args)``, its MidiReadError told as one line under the file's name (not the server's temporary
    path), as the page shows every refusal, and in the page's words: its Tracks box, not the command's option."""
    try:
        return work(*args)
    except MidiReadError as err:
        reason = err.reason.replace("(task=infill tracks=... redoes a track)", "(upload the melody alone, or "
                                    "redo a track with the Infill tab's Tracks box)")
        reason = reason.replace("task=infill tracks=... redoes it", "the Infill tab's Tracks box redoes it")
        raise GenerateError(f"{midi.name}: {reason}") from None


def as_paths(values) -> list[str]:
    """The page's list of takes as paths that still exist (the server prunes its oldest results)."""
    return [str(v) for v in values or [] if os.path.isfile(str(v))]
