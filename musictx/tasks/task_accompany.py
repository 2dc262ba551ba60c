"""``task=accompany``: a melody's accompaniment (BRIDGE, PIANO) written for its bars, or a song's own
accompaniment written anew."""

from __future__ import annotations

from musictx.tasks.song_task import SongTask


class Accompany(SongTask):
    """The tracks a song lacks written under its given ones, led bar by bar (`musictx.tasks.accompany`)."""

    name = "accompany"
    model = "pop"
    why_model = "task=accompany: the pop model writes the accompaniment"
    progress_word = "accompanying"

    def read(self, tok, path, beats="auto", anew: bool = False, learnt=None, level=None):
        from musictx.tasks.song_bars import melody_song

        return melody_song(tok, path, beats, anew, learnt, level)

    def tracks_of(self, song, names):
        from musictx.tasks.song_bars import roles_to_write

        return roles_to_write(song, names)

    def prompt(self, request, net, tok, sampling, samples: int):
        from musictx.tasks.accompany import led_prompt

        return led_prompt(net, tok, request.song, request.tracks, request.s, request.e, sampling, request.chords,
                          samples)

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
        return (f"{request.track_names()} written for bars {request.s + 1}-{request.e} of {opts.seed_midi}{chords}"
                + left_out_clause(request.song, (request.s, request.e)))
