"""``task=infill``: bars of a song written anew, every track or the ones named, between the song's own bars."""

from __future__ import annotations

from musictx.decoding.errors import GenerateError
from musictx.tasks.song_task import SongTask

SAME_AS_SONG = 0.9  # the least share of a take's notes that are the song's own for its line to say so


def repeats_note(tok, request, score, how: str) -> str:
    """Where a fill (``score``, of ``request``) came back as the song's own notes (the copy cache copies where its
    bars return, so a user may hear the bars unchanged), that and ``how`` to ask for new music; "" otherwise."""
    from musictx.tasks.write_back import share_as_written

    share = share_as_written(tok, request.song, request.s, request.e, request.tracks, request.only, score)
    if share < SAME_AS_SONG:
        return ""
    return (f"{share:.0%} of the notes written are the song's own there: the copy cache plays its bars again where "
            f"they come back ({how} for new music)")


class Infill(SongTask):
    """Bars [s, e) of a song filled, the music before and after them both heard (`musictx.tasks.infill`)."""

    name = "infill"
    model = "pop_infill"
    why_model = "task=infill: the pop model fine-tuned to fill bars"
    takes_chords = False
    needs_bars = True
    progress_word = "filling"

    def read(self, tok, path, beats="auto", anew: bool = False, learnt=None, level=None):
        from musictx.tasks.song_bars import read_song

        return read_song(tok, path, beats=beats, learnt=learnt, level=level)

    def tracks_of(self, song, names):
        from musictx.tasks.song_bars import programs_of_names

        return programs_of_names(song, names)

    def request(self, song, s: int, e: int, names=None):
        """The programs the model redoes, and the tracks named (a track that shares its part with one not named
        keeps its own notes: `musictx.tasks.played_as`)."""
        from musictx.tasks.song_bars import programs_of, tracks_named
        from musictx.tasks.song_task import SongRequest

        named = tracks_named(song, names)
        return SongRequest(self, song, s, e, programs_of(song, named), only=named)

    def check_model(self, ref: str, tok) -> None:
        super().check_model(ref, tok)
        from musictx.io.infill_format import InfillIds

        try:
            InfillIds.of(tok)
        except ValueError as err:
            raise GenerateError(f"checkpoint={ref}: {err}") from None

    def prompt(self, request, net, tok, sampling, samples: int):
        from musictx.tasks.infill import song_middle_prompt

        return song_middle_prompt(net, tok, request.song, request.s, request.e, request.tracks, sampling,
                                  samples=samples)

    def written(self, request, tok, rows) -> list:
        from musictx.io.infill_format import InfillIds
        from musictx.tasks.infill import middle_bars
        from musictx.tasks.write_back import filled_file

        s, e = request.s, request.e
        for k, row in enumerate(rows):  # a middle ends with Infill_End or the Bar after its last bar; else no room
            if InfillIds.of(tok).end not in row and (reached := int((row == tok.bar_id).sum())) <= e - s:
                print(f"sample {k + 1} of {len(rows)}: the fill stopped in bar {s + reached} of bars {s + 1}-{e}, out "
                      "of room in the model's context; the bars after it are left empty (fill fewer bars at a time)")
        return [(filled_file(tok, request.song, s, e, request.tracks, m, request.only), len(m))
                for m in middle_bars(tok, rows, e - s)]

    def take_note(self, request, tok, score) -> str:
        """Where the bars came back as the song's own notes (the copy cache copies where its bars return, so a
        user may hear the bars unchanged), that and how to ask for new music."""
        return repeats_note(tok, request, score, "hooks.copy_cache.strength=0")

    def track_names(self, request) -> str:
        """The programs it redoes, by their tracks' names (None: every track)."""
        if request.only is None:
            return "all tracks"
        return ", ".join(request.song.read.tracks.tracks[k].name for k in request.only)

    def describe(self, request, opts) -> str:
        from musictx.tasks.played_as import fill_parts_said

        parts = fill_parts_said(request.song.learnt, request.song.read, request.song.parts, request.only)
        return f"bars {request.s + 1}-{request.e} of {opts.seed_midi} ({request.track_names()}) filled" + (
            f"; {parts}" if parts else "")
