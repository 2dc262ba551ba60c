"""The tasks: what a run does with its input file and the network (continue a seed, fill bars of a song,
accompany its melody). Each reads its input, builds the prompt, drives `musictx.decoding.generate` and
returns `Take`s. Above the engine (`musictx.decoding`), below the run (`musictx.generation`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from musictx.lazy import public_dir, public_face

# the public face: name -> the module under musictx.tasks that defines it, imported when first asked for, so that
# ``--help`` and the option checks, which read this package's light modules, load no torch
_PUBLIC = {
    "accompany_song": "accompany",
    "melody_keys": "accompany",
    "continuation_score": "metrical_score",
    "metrical_take": "continue_metrical",
    "parts_line": "continue_metrical",
    "sample_bars": "continue_metrical",
    "seed_drum_loop": "continue_metrical",
    "piece_notes": "continue_seed",
    "sample_continuations": "continue_seed",
    "take_of": "continue_seed",
    "copy_history": "infill",
    "infill_prompt": "infill",
    "infill_song": "infill",
    "BOUNDS": "limits",
    "bars_for": "metrical_seeds",
    "metrical_seed": "metrical_seeds",
    "pickup_notes": "metrical_seeds",
    "seed_of": "metrical_seeds",
    "ticks_to_seconds": "metrical_seeds",
    "fill_parts_said": "played_as",
    "task_named": "registry",
    "heard_clause": "task_accompany",
    "repeats_note": "task_infill",
    "Seed": "seeds",
    "cut_at_seconds": "seeds",
    "drop_leading_silence": "seeds",
    "seed_from_midi": "seeds",
    "unconditional_seed": "seeds",
    "SongBars": "song_bars",
    "left_out_clause": "song_bars",
    "melody_song": "song_bars",
    "reading_said": "song_bars",
    "parse_bars": "song_bars",
    "read_song": "song_bars",
    "score_roll": "take",
    "in_bars": "write_back",
    "ACCOMPANY_CONTEXTS": "task",
    "DEFAULT_ACCOMPANY_CONTEXT": "task",
}
__all__ = sorted(_PUBLIC)

if TYPE_CHECKING:  # for readers and type checkers: where each name lives
    from musictx.tasks.accompany import accompany_song, melody_keys
    from musictx.tasks.continue_metrical import metrical_take, parts_line, sample_bars, seed_drum_loop
    from musictx.tasks.continue_seed import piece_notes, sample_continuations, take_of
    from musictx.tasks.infill import copy_history, infill_prompt, infill_song
    from musictx.tasks.limits import BOUNDS
    from musictx.tasks.metrical_score import continuation_score
    from musictx.tasks.metrical_seeds import bars_for, metrical_seed, pickup_notes, seed_of, ticks_to_seconds
    from musictx.tasks.played_as import fill_parts_said
    from musictx.tasks.registry import task_named
    from musictx.tasks.seeds import Seed, cut_at_seconds, drop_leading_silence, seed_from_midi, unconditional_seed
    from musictx.tasks.song_bars import SongBars, left_out_clause, melody_song, parse_bars, read_song, reading_said
    from musictx.tasks.take import score_roll
    from musictx.tasks.task import ACCOMPANY_CONTEXTS, DEFAULT_ACCOMPANY_CONTEXT
    from musictx.tasks.task_accompany import heard_clause
    from musictx.tasks.task_infill import repeats_note
    from musictx.tasks.write_back import in_bars


__getattr__ = public_face(__name__, _PUBLIC)
__dir__ = public_dir(globals(), _PUBLIC)
