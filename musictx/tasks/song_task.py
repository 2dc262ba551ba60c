"""The tasks that work in a song's own bars (infill, accompany): what they share, as a base class, and one
request on a read song (`SongRequest`: the bars and the tracks to write).

The command (``musictx-generate task=infill|accompany``, `musictx.tasks.song_job`) and the web app's Infill
and Accompany tabs (`musictx.app.infill_tab`) both make their request here, so that they read a song,
resolve its tracks and sample alike; each keeps its own limits and its own words for the user. No torch at
import (see `musictx.tasks.task`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from musictx.decoding.errors import GenerateError
from musictx.tasks.limits import BOUNDS
from musictx.tasks.task import Task

if TYPE_CHECKING:
    from musictx.io.dynamics import LevelRule


class SongTask(Task):
    """A task on bars [s, e) of a song; subclasses say how the song is read, which tracks are written, the
    prompt and how the rows go back into the song's file."""

    song_options = True
    progress_word: ClassVar[str]  # the progress bar's word: "filling"
    needs_bars: ClassVar[bool] = False  # bars= must be given (infill); else the whole song by default

    def check(self, opts) -> None:
        super().check(opts)
        if not opts.seed_midi:
            raise GenerateError(f"task={self.name} needs seed_midi=<file> (the song to work in)")
        if self.needs_bars and opts.bars is None:
            raise GenerateError(f"task={self.name} needs bars=FIRST-LAST (1-based, inclusive), e.g. bars=9-12")
        if opts.bars is not None:
            check_bars_form(opts.bars)

    def read(self, tok, path: str | os.PathLike, beats="auto", anew: bool = False,
             learnt: tuple[int, ...] | None = None, level: LevelRule | None = None):
        """The song this task works on (`musictx.tasks.song_bars.SongBars`); MidiReadError names the file's
        problem. ``learnt``: the parts (programs) the model learnt (``net.learnt_programs``; None: not recorded);
        ``level``: when a song is heard at the model's level (`musictx.tasks.song_bars.read_fitted`)."""
        raise NotImplementedError

    def tracks_of(self, song, names) -> Any:
        """The tracks ``names`` asks for, in this task's terms; MidiReadError for a name the song cannot take."""
        raise NotImplementedError

    def check_model(self, ref: str, tok) -> None:
        """GenerateError when the model ``ref`` (as checkpoint= named it), of tokenizer ``tok``, cannot do this
        task."""
        from musictx.io.tokenizers import is_metrical

        if not is_metrical(tok):
            raise GenerateError(f"checkpoint={ref}: task={self.name} needs a metrical (REMI) model")

    def prompt(self, request: SongRequest, net, tok, sampling, samples: int):
        raise NotImplementedError

    def written(self, request: SongRequest, tok, rows) -> list:
        raise NotImplementedError

    def track_names(self, request: SongRequest) -> str:
        """The tracks ``request`` writes, as the user reads them (here: the roles it writes)."""
        return ", ".join(request.tracks)

    def describe(self, request: SongRequest, opts) -> str:
        """One line saying what the run writes."""
        raise NotImplementedError

    def take_note(self, request: SongRequest, tok, score) -> str:
        """What one take's line adds about the ``score`` written ("" for nothing)."""
        return ""

    def request(self, song, s: int, e: int, names=None) -> SongRequest:
        """This task on bars [s, e) of ``song`` with the tracks ``names`` asks for (None: the task's default)."""
        return SongRequest(self, song, s, e, self.tracks_of(song, names))

    def job(self, opts, net, tok):
        from musictx.tasks.song_job import song_job  # the sampler's machinery: not at import (see Task)

        return song_job(self, opts, net, tok)


@dataclass
class SongRequest:
    """One infill or accompaniment request on a read song: bars [s, e) (0-based) and the tracks to write."""

    task: SongTask
    song: Any  # `musictx.tasks.song_bars.SongBars`
    s: int
    e: int
    tracks: set[int] | list[str] | None  # infill: the programs redone (None: all); accompany: the roles written
    chords: Any = None  # accompany: a lead sheet's `Chords`, on the file's clock
    only: list[int] | None = None  # infill: the indices of the tracks named (None: every track of ``tracks``)

    def track_names(self) -> str:
        """The tracks written, as the user reads them."""
        return self.task.track_names(self)

    def prompt(self, net, tok, sampling, samples: int = 1):
        """The prompt (`musictx.tasks.prompt.Prompt`) of ``samples`` takes drawn as one batch with
        ``sampling`` (`SamplingOptions`); it ends with the first new Bar."""
        return self.task.prompt(self, net, tok, sampling, samples)

    def written(self, tok, rows) -> list:
        """(the song's own score with the bars written, new ids sampled) of each sampled row (B, T) of ids
        from the first new Bar on."""
        return self.task.written(self, tok, rows)

    def take_note(self, tok, score) -> str:
        """What a take's line adds about the ``score`` written (`SongTask.take_note`; "" for nothing)."""
        return self.task.take_note(self, tok, score)

    def sample(self, net, tok, sampling, samples: int = 1, on_step=None) -> list:
        """``samples`` takes drawn as one batch (`prompt`, `written`); ``on_step(next_ids, done)`` after
        every draw."""
        from musictx.tasks.prompt import new_rows, sample

        prompt = self.prompt(net, tok, sampling, samples)
        prompt.hooks.on_step = on_step
        return self.written(tok, new_rows(sample(net, prompt), prompt))


def check_bars_form(spec) -> None:
    """GenerateError unless ``bars=`` reads FIRST-LAST (or one bar), 1-based, in order, and at most
    ``BOUNDS.length_bars`` bars: said before the model loads (the song's own bars are checked once read)."""
    first, _, last = str(spec).strip().partition("-")
    try:
        a, b = int(first), int(last or first)
    except ValueError:
        raise GenerateError(f"bars={spec}: give a bar range as FIRST-LAST, e.g. bars=9-12") from None
    if not 1 <= a <= b:
        raise GenerateError(f"bars={spec}: FIRST and LAST count from 1, FIRST <= LAST, e.g. bars=9-12")
    if b - a + 1 > BOUNDS.length_bars:
        raise GenerateError(f"bars={spec}: {b - a + 1} bars are more than one run takes (at most "
                            f"{BOUNDS.length_bars}); give a shorter range")
