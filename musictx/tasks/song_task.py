"""Infill and accompaniment as prompt formats around the one sampler: a `SongTask` is a song read the task's
way (`musictx.tasks.song_bars`), a bar range and the tracks to write; it builds the task's prompt
(`SongTask.prompt`) and puts what the sampler wrote back into the song's file (`SongTask.written`).

The command (`musictx.tasks.infill_run`, ``musictx-generate task=infill|accompany``) and the web app's
Infill and Accompany tabs (`musictx.app.infill_tab`) both build their task here, so that they read a song,
resolve its tracks and sample alike; each keeps its own limits and its own words for the user.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from symusic import Score

from musictx.io.chord_labels import Chords
from musictx.tasks.accompany import led_prompt
from musictx.tasks.continue_metrical import strip_after_bars
from musictx.tasks.infill import middle_bars, song_middle_prompt
from musictx.tasks.prompt import Prompt, new_rows, sample
from musictx.tasks.song_bars import SongBars, melody_song, programs_of_names, read_song, roles_to_write
from musictx.tasks.write_back import filled_file, with_written_tracks

SONG_TASKS = ("infill", "accompany")


def read_task_song(task: str, tok, path: str | os.PathLike, beats="auto", anew: bool = False) -> SongBars:
    """The song a ``task`` works on: the whole file (infill), or its melody with the tracks it lacks
    (accompany: a file that already has them is refused). MidiReadError names the file's problem."""
    if task not in SONG_TASKS:
        raise ValueError(f"task {task!r}: a song task is one of {', '.join(SONG_TASKS)}")
    return read_song(tok, path, beats=beats) if task == "infill" else melody_song(tok, path, beats, anew)


@dataclass
class SongTask:
    """One infill or accompaniment request on a read song: bars [s, e) (0-based) and the tracks to write."""

    task: str  # one of SONG_TASKS
    song: SongBars
    s: int
    e: int
    tracks: set[int] | list[str] | None  # infill: the programs redone (None: all); accompany: the roles written
    chords: Chords | None = None  # accompany: a lead sheet's chords, on the file's clock

    @classmethod
    def of(cls, task: str, song: SongBars, s: int, e: int, names=None) -> SongTask:
        """The task with the tracks ``names`` asks for (track names; None: infill redoes every track,
        accompany writes the roles the song lacks); MidiReadError for a name the song cannot take."""
        tracks = programs_of_names(song, names) if task == "infill" else roles_to_write(song, names)
        return cls(task, song, s, e, tracks)

    def track_names(self) -> str:
        """The tracks written, as the user reads them."""
        if self.task == "accompany":
            return ", ".join(self.tracks)
        if self.tracks is None:
            return "all tracks"
        return ", ".join(t.name for t in self.song.read.tracks.tracks if t.program in self.tracks)

    def prompt(self, net, tok, sampling, samples: int = 1) -> Prompt:
        """The prompt of ``samples`` takes drawn as one batch with ``sampling`` (`SamplingOptions`): the
        middle of the bars (infill) or the song led by its given tracks (accompany); it ends with the first
        new Bar."""
        if self.task == "infill":
            return song_middle_prompt(net, tok, self.song, self.s, self.e, self.tracks, sampling, samples=samples)
        return led_prompt(net, tok, self.song, self.tracks, self.s, self.e, sampling, self.chords, samples)

    def written(self, tok, rows: np.ndarray) -> list[tuple[Score, int]]:
        """(the song's own score with the bars written, new ids sampled) of each sampled row (B, T) of ids
        from the first new Bar on."""
        n = self.e - self.s
        if self.task == "infill":
            return [(filled_file(tok, self.song, self.s, self.e, self.tracks, m), len(m))
                    for m in middle_bars(tok, rows, n)]
        return [(with_written_tracks(tok, self.song, self.tracks, self.s, self.e, new), len(new) - 1)
                for new in (strip_after_bars(tok, row, n) for row in rows)]

    def sample(self, net, tok, sampling, samples: int = 1, on_step=None) -> list[tuple[Score, int]]:
        """``samples`` takes drawn as one batch (`prompt`, `written`); ``on_step(next_ids, done)`` after
        every draw."""
        prompt = self.prompt(net, tok, sampling, samples)
        prompt.hooks.on_step = on_step
        return self.written(tok, new_rows(sample(net, prompt), prompt))
