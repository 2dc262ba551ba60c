"""``musictx-generate task=infill|accompany``: the options checked, each sample made and written as MIDI (+ piano
roll) with a ``generation.json`` record beside it.

    musictx-generate task=infill checkpoint=... seed_midi=song.mid bars=9-12 [tracks=piano]
    musictx-generate task=accompany checkpoint=... seed_midi=melody.mid [tracks=bridge,piano] [bars=1-16]

Called by `musictx.generation.continue_midi.run` once the model is loaded.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from musictx.generation.accompany import accompany_song, melody_song, roles_to_write
from musictx.generation.infill import infill_song, parse_bars, programs_of_names, read_song
from musictx.generation.output_folder import claim_record_path, claim_sample_numbers, sample_name
from musictx.generation.seeds import GenerateError
from musictx.io.infill_format import InfillIds
from musictx.io.jsonio import write_json
from musictx.io.midi_io import Notes
from musictx.io.piano_roll import plot_piano_roll
from musictx.io.score_io import score_to_pretty_midi
from musictx.io.tokenizers import is_metrical

TASKS = ("continue", "infill", "accompany")


def check_task(opts) -> None:
    """Raise GenerateError for a task and options that do not go together (before a model is loaded)."""
    if opts.task not in TASKS:
        raise GenerateError(f"task={opts.task}: use one of {', '.join(TASKS)}")
    if opts.task == "continue":
        if opts.bars is not None or opts.tracks:
            raise GenerateError("bars= and tracks= are for task=infill and task=accompany")
        return
    if not opts.seed_midi:
        raise GenerateError(f"task={opts.task} needs seed_midi=<file> (the song to work in)")
    if opts.task == "infill" and opts.bars is None:
        raise GenerateError("task=infill needs bars=FIRST-LAST (1-based, inclusive), e.g. bars=9-12")


def run_task(opts, net, tok, meta: dict) -> dict:
    if not is_metrical(tok):
        raise GenerateError(f"checkpoint={opts.checkpoint}: task={opts.task} needs a metrical (REMI) model")
    try:
        InfillIds.of(tok)
    except ValueError as err:
        raise GenerateError(f"checkpoint={opts.checkpoint}: {err}") from None
    make, what = _task(opts, net, tok)
    out_dir = Path(opts.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    numbers = claim_sample_numbers(out_dir, opts.num_samples)
    record_path = claim_record_path(out_dir)
    samples, t0 = [], time.perf_counter()
    for k, number in enumerate(numbers):
        start = time.perf_counter()
        score, new_ids = make(replace(opts, seed=opts.seed + k))
        samples.append(_write(out_dir, number, score, new_ids, time.perf_counter() - start))
        print(f"{out_dir / samples[-1]['midi']}: {what}; {samples[-1]['notes']} notes in {samples[-1]['tracks']}")
    record = {"settings": asdict(opts), "task": opts.task, "what": what, "checkpoint": meta["ref"],
              "model_path": str(Path(meta["path"]).resolve()), "tokenizer": tok.to_dict(), "samples": samples,
              "generation_wall_s": time.perf_counter() - t0}
    write_json(record_path, record, what="generation")
    print(f"wrote {len(samples)} sample(s) and {record_path.name} to {out_dir.resolve()}")
    return record


def _task(opts, net, tok):
    """(a function of the options making one sample: (score, new ids), a line saying what it does)."""
    if opts.task == "infill":
        song = read_song(tok, opts.seed_midi)
        s, e = parse_bars(opts.bars, song)
        taken = programs_of_names(song, opts.tracks)
        names = "all tracks" if taken is None else ", ".join(
            t.name for t in song.read.tracks.tracks if t.program in taken)
        what = f"bars {s + 1}-{e} of {opts.seed_midi} ({names}) filled"

        def make(o):
            score, middle = infill_song(net, tok, song, s, e, taken, o, max_bar_repeats=o.max_bar_repeats)
            return score, len(middle)
        return make, what
    song = melody_song(tok, opts.seed_midi)
    s, e = parse_bars(opts.bars, song) if opts.bars is not None else (0, song.n_bars)
    roles = roles_to_write(song, opts.tracks)
    what = f"{', '.join(roles)} written for bars {s + 1}-{e} of {opts.seed_midi}"
    return (lambda o: accompany_song(net, tok, song, roles, s, e, o, max_bar_repeats=o.max_bar_repeats)), what


def _write(out_dir: Path, number: int, score, new_ids: int, wall: float) -> dict:
    name = sample_name(number)
    midi = out_dir / f"{name}.mid"
    score.dump_midi(str(midi))
    pm = score_to_pretty_midi(score)
    notes = Notes.concat([Notes(np.array([n.start for n in i.notes]), np.array([n.end for n in i.notes]),
                                np.array([n.pitch for n in i.notes], dtype=np.int64),
                                np.array([n.velocity for n in i.notes], dtype=np.int64)) for i in pm.instruments])
    plot_piano_roll(notes, out_dir / f"{name}.png", title=f"{name}: {len(notes)} notes")
    return {"midi": midi.name, "png": f"{name}.png", "new_tokens": int(new_ids), "wall_s": wall,
            "seconds": pm.get_end_time(), "notes": len(notes),
            "tracks": {i.name: len(i.notes) for i in pm.instruments}}
