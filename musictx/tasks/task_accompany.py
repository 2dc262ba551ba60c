"""``task=accompany``: a melody's accompaniment (BRIDGE, PIANO) written for its bars, or a song's own
accompaniment written anew."""

from __future__ import annotations

from musictx.decoding.errors import GenerateError
from musictx.tasks.song_task import SongTask
from musictx.tasks.task import ACCOMPANY_CONTEXTS, DEFAULT_ACCOMPANY_CONTEXT


class Accompany(SongTask):
    """The tracks a song lacks written under its given ones, led bar by bar (`musictx.tasks.accompany`)."""

    name = "accompany"
    model = "pop"
    why_model = "task=accompany: the pop model writes the accompaniment"
    progress_word = "accompanying"
    hears_song = True

    def check(self, opts) -> None:
        super().check(opts)
        if context_of(opts) not in ACCOMPANY_CONTEXTS:
            raise GenerateError(f"accompany_context={context_of(opts)}: give one of {', '.join(ACCOMPANY_CONTEXTS)}")

    def read(self, tok, path, beats="auto", anew: bool = False, learnt=None, level=None):
        from musictx.tasks.song_bars import melody_song

        return melody_song(tok, path, beats, anew, learnt, level)

    def tracks_of(self, song, names):
        from musictx.tasks.song_bars import roles_to_write

        return roles_to_write(song, names)

    def prompt(self, request, net, tok, sampling, samples: int):
        from musictx.tasks.accompany import led_prompt

        return led_prompt(net, tok, request.song, request.tracks, request.s, request.e, sampling, request.chords,
                          samples, context_of(sampling))

    def written(self, request, tok, rows) -> list:
        from musictx.tasks.continue_metrical import strip_after_bars
        from musictx.tasks.write_back import with_written_tracks

        n = request.e - request.s
        for k, row in enumerate(rows):
            if (reached := int((row == tok.bar_id).sum())) <= n:  # the Bar after the last one never came
                print(f"sample {k + 1} of {len(rows)}: the accompaniment stopped in bar {request.s + reached} of bars "
                      f"{request.s + 1}-{request.e}, at the token cap; the bars after it are left unaccompanied")
        return [(with_written_tracks(tok, request.song, request.tracks, request.s, request.e, new), len(new) - 1)
                for new in (strip_after_bars(tok, row, n) for row in rows)]

    def describe(self, request, opts) -> str:
        from musictx.tasks.song_bars import left_out_clause

        chords = f", following the chords of {opts.chords}" if request.chords else ""
        heard = heard_clause(request.song, request.s, context_of(opts))
        return (f"{request.track_names()} written for bars {request.s + 1}-{request.e} of {opts.seed_midi}{chords}"
                + left_out_clause(request.song, (request.s, request.e)) + heard)


def context_of(opts) -> str:
    """The run's ``accompany_context`` (the command's option); options without one (the app's) take the default."""
    return getattr(opts, "accompany_context", DEFAULT_ACCOMPANY_CONTEXT)


def heard_clause(song, s: int, context: str, other_way: bool = True) -> str:
    """How the model heard the bars before bar s of a whole song accompanied anew and, with ``other_way``, the
    option for the other way (the app, which has no box for it, leaves it out); "" where there is nothing to hear:
    another song, or bars from the first."""
    if song.own_ids is None or s == 0:
        return ""
    heard, other = (("as the song plays them", "accompany_context=melody: without its BRIDGE and PIANO")
                    if context == "song" else
                    ("without its BRIDGE and PIANO", "accompany_context=song: as the song plays them"))
    return f"; the bars before bar {s + 1} heard {heard}" + (f" ({other})" if other_way else "")
