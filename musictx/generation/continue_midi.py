"""Continuing a MIDI file into a folder: the job behind ``musictx-generate`` (`run`).
A model (+ an optional seed MIDI) -> continuations as MIDI, piano roll, WAV and a JSON record; the
command's config is ``conf/generate.yaml`` and its entry point `musictx.commands.generate`. The model is the
shipped ``piano`` model unless ``checkpoint=`` names another shipped model, a model folder or a ``.ckpt``
(`musictx.checkpoints.model_store`).

    musictx-generate seed_midi=motif.mid                      # the shipped model

    musictx-generate checkpoint=outputs/train/.../checkpoints/last.ckpt seed_midi=motif.mid seed_seconds=10 \\
        length_seconds=30 num_samples=4 temperature=0.95 top_p=0.95 seed=7 output_dir=out/

The seed MIDI is encoded with the checkpoint's own tokenizer, its tracks merged into one piano stream (one
printed line says which, and what was dropped: `musictx.io.seed_tracks`), counted from its first note (silence
before it is left out), or from the first note at or after ``seed_from`` seconds of the file, and cut
``seed_seconds`` later (`musictx.tasks.seeds`); the model continues from its last id
(`musictx.tasks.continue_seed`). The output MIDI carries the seed's tempo map and time signatures over
that span (`musictx.io.midi_timing`, written by `musictx.io.midi_write`), so that in a DAW it sits on the
seed's bars; unconditional samples are written at 120 bpm in 4/4. Without ``seed_midi`` generation is
unconditional: the prompt is a single VELOCITY event (``start_velocity``, mezzo-forte by default), because
training windows start at the beginning of a piece, which is a VELOCITY or TIME_SHIFT event (there is no
BOS token).

Everything is checked (options, output_dir, checkpoint, tokenizer, seed) before the model runs and the
first file is written, so a bad input leaves no partial output. A run only adds files: in a folder that
already holds samples (continuing ``D/sample_03.mid`` into ``D``) it numbers its own after them and writes
its record beside ``generation.json`` (`musictx.generation.output_folder`); the seed and everything else stay
as they were. A Ctrl-C still leaves a record: while sampling, of the partial samples so far; while writing,
of the samples already written (the unfinished ones' files are removed). `run` takes a `GenerateOptions`
(`musictx.generation.generate_options`, where the options are checked); no Hydra here.

A run reads as a straight line, each step in its own module and none returned to: the options checked, the
model opened, the run's job built by its task (`musictx.tasks.registry`: the seed or song read, the prompt
made), drawn by the one sampler and decoded (`musictx.tasks.prompt.draw`), and what comes back, plain
data (`musictx.tasks.take`), written by `musictx.generation.output_folder.write_run`.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from musictx.checkpoints.model_store import ModelLoadError, load_model, shipped_models
from musictx.decoding.errors import GenerateError
from musictx.generation.generate_options import GenerateOptions, is_midi_name
from musictx.generation.model_choice import choose_model
from musictx.generation.output_folder import write_run
from musictx.generation.programs import apply_programs, parse_programs
from musictx.io.audio import audio_unavailable
from musictx.tasks.prompt import draw
from musictx.tasks.registry import task_named


def open_model(opts: GenerateOptions):
    """(net, tokenizer, meta) of ``opts.checkpoint`` on ``opts.device`` from the model store, a refusal said
    as the ``checkpoint=`` option's (GenerateError), then checked against the options that depend on the
    model (`GenerateOptions.check_model`)."""
    if not opts.checkpoint:
        name, why = choose_model(opts.seed_midi, shipped_models(), opts.task)
        print(f"model: {name} ({why}); checkpoint=<name or path> picks another")
        opts.checkpoint = name
    try:
        net, tokenizer, meta = load_model(opts.checkpoint, map_location=opts.device)
    except ModelLoadError as err:
        raise GenerateError(f"checkpoint={err}") from None  # the message starts with the model reference
    opts.check_model(net, tokenizer)
    return net, tokenizer, meta


def run(opts: GenerateOptions) -> dict:
    """Check, load, seed, sample, write; return the record written to ``generation.json`` (or the free name
    after it). A Ctrl-C while sampling writes the samples so far (MIDI and piano roll), one while writing
    keeps the samples already written; either records them, then raises KeyboardInterrupt saying so."""
    opts.check()
    if opts.seed_midi and Path(opts.seed_midi).is_dir() and not is_midi_name(opts.seed_midi):  # a folder of seeds
        from musictx.generation.seed_folder import run_seed_folder

        return run_seed_folder(opts, run)
    if getattr(opts, "seed_note", None):  # seed_from=end, resolved by the check
        print(opts.seed_note)
    if opts.threads:
        torch.set_num_threads(opts.threads)
    net, tokenizer, meta = open_model(opts)
    no_audio = audio_unavailable(opts.soundfont) if opts.audio else "audio=false"  # said once the folder is made
    job = task_named(opts.task).job(opts, net, tokenizer)  # the task's prompt and how its rows become takes
    batch = draw(net, job)  # the one sampler
    if unmatched := apply_programs(batch.takes, parse_programs(opts.programs)):
        print(unmatched)
    # Nothing was written before this point: every check above raises first.
    head = {"settings": asdict(opts), "checkpoint": meta["ref"], "model_source": meta["source"],
            "model_path": str(Path(meta["path"]).resolve()), "model": meta["model"],
            "global_step": meta.get("global_step"), "tokenizer": tokenizer.to_dict()}
    return write_run(Path(opts.output_dir), batch, head, no_audio, opts.soundfont)
