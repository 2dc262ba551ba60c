"""What a task is: a registered class (`musictx.tasks.registry`) with its name, the shipped model it asks for,
the options it takes, and how it turns a run's options into a `Job` for the one sampler.

A task's class is read by option checking and ``--help`` as well as by the run, so its file imports no torch:
the methods that build prompts import their machinery when called (`musictx.tasks.continue_seed` and the rest).
Adding a task is its class file, its line in the registry and its test.
"""

from __future__ import annotations

from typing import Any, ClassVar

from musictx.decoding.errors import GenerateError

# accompany_context (task=accompany; written here, where every task's check reads it): what the model hears of the
# bars before the ones it writes. "song": a whole song's own BRIDGE and PIANO there, as a continuation hears its
# seed (the default: its accompaniment came closer to the song's in density, register and spread; docs/infill.md,
# "The song's own bars before"); "melody": the given tracks alone (a whole song: its melody, after which the model
# starts cold: docs/infill.md, "A tune alone")
ACCOMPANY_CONTEXTS = ("melody", "song")
DEFAULT_ACCOMPANY_CONTEXT = "song"


class Task:
    """One kind of run. Subclasses set the class attributes and override `check` and `job`."""

    name: ClassVar[str]
    model: ClassVar[str | None] = None  # the shipped model picked when checkpoint= names none; None: judged by the seed
    why_model: ClassVar[str] = ""  # the one line said when `model` is picked
    song_options: ClassVar[bool] = False  # takes bars= and tracks= (a part of a song's own bars)
    takes_chords: ClassVar[bool] = True  # takes chords= (a lead sheet the new music follows)
    chooses: ClassVar[bool] = False  # takes best_of= (each sample the best of several by the model's critic)
    ends: ClassVar[bool] = False  # takes ending=true (its last bars close the piece: `musictx.decoding.hooks.cadence`)
    hears_song: ClassVar[bool] = False  # takes accompany_context= (what it hears of a song's bars before its own)

    def check(self, opts: Any) -> None:
        """GenerateError for options that do not go with this task (said before a model loads)."""
        if opts.chords is not None and not self.takes_chords:
            raise GenerateError(f"chords= is not for task={self.name}: it takes no lead sheet")
        if opts.best_of not in (None, 1) and not self.chooses:
            raise GenerateError(f"best_of= is not for task={self.name}: only a continuation is chosen among candidates")
        if getattr(opts, "ending", False) and not self.ends:
            raise GenerateError(f"ending=true is not for task={self.name}: it closes a continuation's new bars, and "
                                "this task writes inside the song's own")
        context = getattr(opts, "accompany_context", None)
        if context is not None and not self.hears_song and context != DEFAULT_ACCOMPANY_CONTEXT:
            raise GenerateError(f"accompany_context={context} is not for task={self.name}: it says what an "
                                "accompaniment hears of the song's bars before the ones it writes")
        if not self.song_options and (opts.bars is not None or opts.tracks):
            raise GenerateError(f"bars= and tracks= are not for task={self.name}: they name a part of a song")

    def job(self, opts: Any, net: Any, tok: Any):
        """The run as a prompt for the sampler and how its rows become takes (`musictx.tasks.prompt.Job`)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"task={self.name}"
