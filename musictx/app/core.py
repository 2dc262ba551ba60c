"""What one request of the web app does, without Gradio: `Continuer` holds the app's models (each request's
choice, `musictx.app.models`) and turns a seed file and `Settings` into `Result` files through the generation
library (seed cutting `musictx.tasks.seeds`, sampling `musictx.tasks.continue_seed`, writing MIDI /
piano roll / WAV `musictx.generation.continue_midi`), keeping its work folder under `musictx.app.disk.Limits`;
`run_request` turns any failure into a one-line message."""

from __future__ import annotations

import itertools
import logging
import os
import re
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from symusic import Score

from musictx.app.disk import RUN_PREFIX, Limits, is_in, make_workdir, prune, room_problem
from musictx.app.messages import (  # noqa: F401  (USER_ERRORS and the request wrappers: imported from here)
    STOPPED,
    USER_ERRORS,
    draw_request,
    for_the_page,
    header_problem,
    instruments_line,
    preview_request,
    reason_for_page,
    run_request,
)
from musictx.app.models import Choice, Loaded, Models
from musictx.app.progress import GenerationProgress, Report
from musictx.app.settings import MAX_LENGTH_SECONDS, MAX_SAMPLES, MAX_SEED_SECONDS, Settings  # noqa: F401
from musictx.decoding import HOLD_SECONDS, GenerateError, parse_density
from musictx.evaluation.arcs import ArcChoice, arcs_of_midi, attention_arcs, plot_arcs
from musictx.generation import GenerateOptions, apply_programs, parse_programs, write_take
from musictx.io.audio import audio_unavailable
from musictx.io.dynamics import seed_rule
from musictx.io.midi_io import MidiReadError, file_problem, read_notes
from musictx.io.piano_roll import plot_piano_roll
from musictx.io.read_errors import unreadable
from musictx.io.seed_tracks import track_merge
from musictx.io.tokenizers import is_metrical
from musictx.listed import counted
from musictx.paths import BUNDLED_MOTIF
from musictx.tasks import Seed, sample_continuations, score_roll, seed_from_midi, take_of

log = logging.getLogger("musictx.app")
MOTIF = BUNDLED_MOTIF
MAX_WHOLE_SEED_SECONDS = 120.0  # "all of it" (API only): a seed longer than this is refused
DEFAULT_MAX_QUEUE = 8  # requests that may wait, each bounded as above
MAX_UPLOAD_MB = 5.0
UPLOAD_FORM_BYTES = 64 * 2**10  # an upload request's multipart headers around the file


def too_large(size: int, max_mb: float) -> str:
    """The refusal of a file of ``size`` bytes over ``max_mb`` MB, in numbers that differ however close they are."""
    allowed = int(max_mb * 2**20)
    return f"{size / 2**20:.3f} MB ({size:,} bytes) is larger than the {max_mb:g} MB ({allowed:,} bytes) allowed"


@dataclass
class Result:
    """One continuation as files on disk, a line that describes it, and one about its seed's tracks when
    reading it merged or dropped any (empty otherwise)."""

    midi: Path
    png: Path
    wav: Path | None
    title: str
    seed_note: str = ""
    seed_line: str = ""  # which part of an earlier result was the seed (results continued further)
    model_line: str = ""  # which model made it, and why that one (`musictx.app.models.Choice.line`)


@dataclass(frozen=True)
class Lineage:
    """Where a result came from: the stem of the user's upload (results are named after it) and the seconds
    where the user's own notes end in it (model output after that)."""

    stem: str
    user_until: float | None = None  # None: an upload, all the user's

    def user_until_after(self, seed: Seed) -> float | None:
        """Where the user's notes end in results continued from ``seed`` cut out of this file; None when the
        seed is all the user's."""
        if self.user_until is None:
            return None
        return max(0.0, min(self.user_until - seed.silence_dropped, seed.seconds))


class Continuer:
    """The app's models (``model`` pins one; None: each request's own choice, `musictx.app.models`) and what one
    request does with them; no Gradio here (usable and tested without it)."""

    def __init__(self, model: str | None = None, workdir: str | os.PathLike | None = None,
                 soundfont: str | None = None, max_upload_mb: float = MAX_UPLOAD_MB, device: str = "cpu",
                 limits: Limits | None = None):
        self.base = GenerateOptions(soundfont=soundfont, device=device)
        self.models = Models(model, self.base)
        self.workdir = Path(workdir) if workdir else make_workdir()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.motif = self.workdir / MOTIF.name  # a copy the page may serve
        shutil.copyfile(MOTIF, self.motif)
        self.max_upload_mb = max_upload_mb
        self.limits = limits or Limits()
        self._pinned: set[Path] = {self.motif}  # never pruned: what the page shows before any request
        self._busy: list[Path] = []  # seeds and result folders of requests in flight
        self._newest: Path | None = None  # the latest request's results: its caller may still be fetching them
        self._lock = threading.Lock()  # requests (generate, preview, the periodic prune) run in several threads
        self.audio_reason = audio_unavailable(soundfont)
        self._runs = itertools.count(1)
        self.takeovers: dict[str, float] = {}  # result MIDI path -> seconds where the model took over
        self.lineage: dict[str, Lineage] = {}  # result MIDI path -> its upload's name, where the user's notes end
        self.ids: dict[str, np.ndarray] = {}  # result MIDI path -> the ids of its seed and continuation (arcs)
        self.made_by: dict[str, Choice] = {}  # result MIDI path -> the model that made it
        self._takes: dict[str, int] = {}
        self._previews = itertools.count(1)

    def check_upload(self, path: str | os.PathLike | None) -> Path:
        """The seed file's path, or GenerateError saying in the app's words why it cannot be used."""
        if path is None or str(path) == "":
            raise GenerateError("no seed file: upload a MIDI file or use the bundled motif")
        p = Path(path)
        if not p.exists() and is_in(p, self.workdir):
            raise GenerateError(f"{p.name}: removed from the server to keep its disk use bounded (it keeps the "
                                f"newest {self.limits.keep_results} results); upload it again")
        problem = file_problem(p) if p.exists() else "the uploaded file is gone; upload it again"
        if problem:
            raise GenerateError(f"{p.name}: {problem}")
        if (size := p.stat().st_size) > self.max_upload_mb * 2**20:
            raise GenerateError(f"{p.name}: {too_large(size, self.max_upload_mb)}")
        problem = header_problem(p)
        if problem:
            raise GenerateError(f"{p.name}: {problem}")
        if is_in(p, self.workdir):
            os.utime(p)  # in use again: the oldest-first pruning keeps it longer
        return p

    def continue_file(self, path: str | os.PathLike | None, settings: Settings,
                      report: Report | None = None) -> list[Result]:
        """Continue the seed file ``path``; write and return ``settings.num_samples`` results, named after it."""
        seed_path = self.check_upload(path)
        choice = self.models.choose(seed_path)
        _, results = self._continue(seed_path, settings, report, Lineage(_safe_stem(seed_path)), choice)
        return results

    def choice_for(self, midi: Path) -> Choice:
        """The model of a result this server made (a result continued or drawn again), else the file's choice."""
        return self.made_by.get(str(midi)) or self.models.choose(midi)

    def continue_further(self, path: str | os.PathLike | None, settings: Settings,
                         report: Report | None = None) -> list[Result]:
        """Continue the result ``path`` from its last ``settings.seed_seconds`` (all of it when None); each new
        result says which part was its seed, and its piano roll shades the user's notes apart from the
        earlier model output."""
        midi = self.check_upload(path)
        before = self.lineage.get(str(midi), Lineage(_safe_stem(midi)))
        choice = self.choice_for(midi)
        end = self._read(midi, choice.model).duration()
        keep = settings.seed_seconds
        start = 0.0 if keep is None or keep >= end else end - keep
        seed, results = self._continue(midi, replace(settings, seed_from=start), report, before, choice)
        first = seed.silence_dropped  # where the seed's first note is in the result
        line = (f"Seed: all {end:.1f} s of {midi.name}." if first == 0 else
                f"Seed: the last {end - first:.1f} s of {midi.name} (from {first:.1f} s to its end at {end:.1f} s).")
        return [replace(r, seed_line=line) for r in results]

    def _continue(self, seed_path: Path, settings: Settings, report: Report | None,
                  lineage: Lineage, choice: Choice) -> tuple[Seed, list[Result]]:
        """(seed, results): sample from ``seed_path`` cut as ``settings`` say, write the results."""
        report = report or (lambda fraction, text: None)
        settings.check()
        self.check_room()  # before the work: a request that cannot be kept is refused at once
        out = self.workdir / f"{RUN_PREFIX}{next(self._runs):04d}"
        with self._in_use(seed_path, out):
            try:
                seed, results = self._sample_and_write(seed_path, out, settings, report, lineage, choice)
            except BaseException:
                shutil.rmtree(out, ignore_errors=True)  # a refused or failed request leaves nothing
                raise
            self._newest = out
        for r in results:
            self.made_by[str(r.midi)] = choice
        self.prune()
        return seed, [replace(r, model_line=choice.line()) for r in results]

    def _sample_and_write(self, seed_path: Path, out: Path, settings: Settings, report: Report,
                          lineage: Lineage, choice: Choice) -> tuple[Seed, list[Result]]:
        opts = replace(self.base, seed_midi=str(seed_path), output_dir=str(out), seed_seconds=settings.seed_seconds,
                       length_seconds=settings.length_seconds, temperature=settings.temperature,
                       top_p=settings.top_p, num_samples=int(settings.num_samples), seed=int(settings.seed),
                       seed_from=float(settings.seed_from or 0), programs=settings.instruments or None,
                       drums=settings.drums, ending=bool(settings.ending)
                       ).with_hook("recall_guidance", strength=float(settings.recall_guidance))
        opts = opts.with_hook("density", **parse_density(settings.density))
        opts.check()
        report(0.0, f"reading the seed ({choice.model.ref} model)")
        net, tok = choice.model.net, choice.model.tokenizer
        if is_metrical(tok):
            return self._metrical(seed_path, out, opts, report, lineage, choice.model)
        if opts.ending and opts.length_seconds <= HOLD_SECONDS:
            raise GenerateError(f"End the piece: the piano's close holds its chord {HOLD_SECONDS:g} s; add more "
                                "seconds than that")
        seed = self._seed(seed_path, opts, tok, net)
        tracks = track_merge(tok, seed_path)
        said = [tracks.line()] if tracks.changed_anything else []
        said += [heard] if (heard := seed.dynamics.line(say_off=False)) else []  # a pp (ff) seed heard louder (softer)
        note = "; ".join(said) + "." if said else ""
        pieces = sample_continuations(net, tok, seed, opts, num_samples=opts.num_samples,
                                      length_seconds=opts.length_seconds, max_tokens=opts.max_tokens,
                                      on_step=GenerationProgress(tok, opts.length_seconds, report), ending=opts.ending)
        out.mkdir(parents=True)
        mine = lineage.user_until_after(seed)  # where the user's own notes end in the new results
        results: list[Result] = []
        for i, ids in enumerate(pieces):
            report(1.0, f"writing sample {i + 1} of {len(pieces)} (piano roll, audio)")
            self.check_room()
            name = f"{lineage.stem}_cont_{self._take(lineage.stem):02d}"
            take = take_of(tok, seed, ids, opts, earlier_from=mine)
            apply_programs([take], parse_programs(opts.programs))
            rec = write_take(out, name, take, opts.soundfont, audio=self.audio_reason is None)
            title = f"Sample {i + 1}: {rec['notes']} notes, {rec['new_seconds']:.1f} s new ({STOPPED[rec['stop']]})"
            said = " ".join(x for x in (note, instruments_line(opts.programs, take)) if x)
            results.append(Result(out / rec["midi"], out / rec["png"], out / rec["wav"] if rec["wav"] else None,
                                  title, said))
            key = str(results[-1].midi)
            self.takeovers[key] = seed.seconds
            self.lineage[key] = Lineage(lineage.stem, seed.seconds if mine is None else mine)
            self.ids[key] = np.concatenate([seed.ids, ids[ids != tok.eos_id]])  # as the model read it
        return seed, results

    def _metrical(self, seed_path: Path, out: Path, opts: GenerateOptions, report: Report,
                  lineage: Lineage, model: Loaded) -> tuple:
        """A metrical model's request (`musictx.app.metrical`): tracks, bars, tempo and meter kept."""
        from musictx.app.metrical import sample_and_write

        try:
            seed, written, note = sample_and_write(model, self.audio_reason is None, out, opts, report, lineage,
                                                   self._take, lambda seconds: _check_length(seed_path, seconds))
        except GenerateError as err:  # the seed's refusals, said with the file's name and not its server path
            raise GenerateError(for_the_page(err, seed_path)) from None
        except MidiReadError as err:
            raise GenerateError(f"{seed_path.name}: {reason_for_page(err.reason)}") from None
        results = []  # each with ``note``: how the seed's tracks are played (as another part, drums looped)
        for rec, ids in written:
            title = f"Sample {len(results) + 1}: {rec['notes']} notes in {len(rec['tracks'])} track(s), " \
                    f"{counted(rec['new_bars'], 'bar')} new"
            results.append(Result(out / rec["midi"], out / rec["png"], out / rec["wav"] if rec["wav"] else None,
                                  title, note))
            key = str(results[-1].midi)
            self.takeovers[key] = seed.seconds
            self.lineage[key] = Lineage(lineage.stem, seed.seconds)
            self.ids[key] = ids
        return seed, results

    def _seed(self, seed_path: Path, opts: GenerateOptions, tokenizer, net) -> Seed:
        """The seed cut from ``seed_path`` as ``opts`` say for ``net``, or GenerateError in the page's words."""
        level = seed_rule(opts, net)  # a pp or ff seed heard at the model's own level
        try:
            seed = seed_from_midi(tokenizer, seed_path, opts.seed_seconds, opts.seed_from, level)
        except GenerateError as err:  # name the file, not the server's temporary path
            raise GenerateError(for_the_page(err, seed_path)) from None
        _check_length(seed_path, seed.seconds)
        return seed

    def _take(self, stem: str) -> int:
        """The next take number of results named after ``stem`` (numbered across the session, so that two
        downloads never share a name)."""
        self._takes[stem] = self._takes.get(stem, -1) + 1
        return self._takes[stem]

    def preview(self, path: str | os.PathLike | None) -> Path:
        """PNG piano roll of a seed file as its model reads it (`preview_with_model`)."""
        return self.preview_with_model(path)[0]

    def preview_with_model(self, path: str | os.PathLike | None) -> tuple[Path, Choice]:
        """(PNG piano roll of a seed file as the model chosen for it reads it: tracks merged and sustain applied
        for piano, every track for pop; that choice)."""
        midi = self.check_upload(path)
        choice = self.models.choose(midi)
        notes, parts = self._read(midi, choice.model), None
        if is_metrical(choice.model.tokenizer):  # a song's tracks, each drawn in its colour
            parts = _for_page(midi, lambda: score_roll(Score(str(midi)))[3])
        folder = self.workdir / "previews"
        folder.mkdir(exist_ok=True)
        png = folder / f"{next(self._previews):04d}_{_safe_stem(midi)}.png"
        title = f"{midi.name}: {len(notes)} notes, {notes.duration():.1f} s"
        with self._in_use(png):
            plot_piano_roll(notes, png, title=title, parts=parts)
        self.prune(keep={png})
        return png, choice

    def motif_preview(self) -> Path:
        """The bundled motif's piano roll, shown when the page opens: kept for the life of the server."""
        png = self.preview(self.motif)
        self._pinned.add(png)
        return png

    def check_room(self, incoming: int = 0) -> None:
        """GenerateError when ``incoming`` more bytes (a result, an upload) do not fit under `limits` once the
        oldest items are pruned (`musictx.app.disk.room_problem`)."""
        self.prune()
        problem = room_problem(self.workdir, self.limits, incoming)
        if problem:
            raise GenerateError(problem)

    def upload_problem(self, size: int) -> str | None:
        """Why an upload of ``size`` bytes (the request's, the form's few headers included) is refused: larger
        than a seed file may be, or `check_room` (the upload guard answers with it); None when it fits."""
        if size > self.max_upload_mb * 2**20 + UPLOAD_FORM_BYTES:
            return (f"the file is too large ({size / 2**20:.1f} MB; a seed file may be at most "
                    f"{self.max_upload_mb:g} MB)")
        try:
            self.check_room(size)
        except GenerateError as err:
            return str(err)
        return None

    def prune(self, keep: frozenset[Path] | set[Path] = frozenset()) -> list[Path]:
        """Remove the oldest results, previews and uploads over `limits` (`musictx.app.disk.prune`); never the
        motif, what requests in flight use, the newest request's results or ``keep``. Returns what went."""
        with self._lock:
            spared = self._pinned | set(self._busy) | set(keep) | ({self._newest} if self._newest else set())
            removed = prune(self.workdir, self.limits, spared)
            for gone in removed:  # what the server remembers of removed results goes with them
                for table in (self.takeovers, self.lineage, self.ids, self.made_by):
                    for key in [k for k in list(table) if is_in(Path(k), gone)]:  # list(): a request may add keys
                        table.pop(key, None)
        if removed:
            log.info("removed %d old item(s) to keep the work folder under its limits", len(removed))
        return removed

    @contextmanager
    def _in_use(self, *paths: Path) -> Iterator[None]:
        """Keep ``paths`` from `prune` (run in another thread) while a request reads or writes them."""
        with self._lock:
            self._busy.extend(paths)
        try:
            yield
        finally:
            with self._lock:
                for path in paths:
                    self._busy.remove(path)

    def _read(self, midi: Path, model: Loaded):
        """The notes of ``midi`` as ``model`` reads them, or GenerateError naming it (its name, not its server
        path) in the app's words."""
        try:  # a metrical tokenizer reads a score (bars, tracks); the rolls and lengths here want notes
            return read_notes(midi) if is_metrical(model.tokenizer) else model.tokenizer.read(midi)
        except MidiReadError as err:
            raise GenerateError(f"{midi.name}: {reason_for_page(err.reason)}") from None

    def first_model(self) -> Loaded:
        """The model the page opens with: the pinned one, else the bundled motif's choice."""
        return self.models.choose(self.motif).model

    def draw_arcs(self, midi: str | os.PathLike, choice: ArcChoice, takeover: float | None = None) -> Path:
        """PNG of the attention arcs over a result (`musictx.evaluation.arcs`), written beside its MIDI file:
        over the ids it was made of, or for a file this server did not make, over the file read again."""
        midi = self.check_upload(midi)
        ids, model = self.ids.get(str(midi)), self.choice_for(midi).model
        if not model.has_attention:
            raise GenerateError(f"the model `{model.ref}` of {midi.name} has no attention to draw")
        with self._in_use(midi.parent):
            try:
                arc_map = (attention_arcs(model.net, model.tokenizer, ids, choice) if ids is not None else
                           arcs_of_midi(model.net, model.tokenizer, midi, choice))
            except MidiReadError as err:
                raise GenerateError(f"{midi.name}: {reason_for_page(err.reason)}") from None
            view = "-".join(str("mean" if v is None else v) for v in (choice.layer, choice.head))
            png = plot_arcs(arc_map, midi.with_name(f"{midi.stem}_arcs_{view}_{choice.last_notes}.png"), choice.top,
                            takeover)
        self.prune(keep={png})
        return png


def _for_page(midi: Path, read):
    """``read()``, a file the tokenizer read already: any error of symusic's is the page's one line."""
    try:
        return read()
    except Exception as err:  # noqa: BLE001 - symusic's own errors are terse RuntimeErrors
        raise GenerateError(f"{midi.name}: {unreadable(err)}") from None


def _safe_stem(path: Path) -> str:
    """A file's stem fit to name results after: letters, digits, ``-`` and ``_``."""
    return re.sub(r"[^\w-]+", "_", path.stem).strip("_") or "seed"


def _check_length(seed_path: Path, seconds: float) -> None:
    """GenerateError for a seed longer than `MAX_WHOLE_SEED_SECONDS`: each result repeats its seed, so its
    length bounds the files (a performance's seed and a metrical one's alike)."""
    if seconds > MAX_WHOLE_SEED_SECONDS:
        raise GenerateError(f"{seed_path.name}: a seed of {seconds:.0f} s is longer than the "
                            f"{MAX_WHOLE_SEED_SECONDS:g} s allowed; give seed seconds (at most {MAX_SEED_SECONDS:g})")
