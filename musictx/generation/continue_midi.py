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
``seed_seconds`` later (`musictx.generation.seeds`); the model continues from its last id
(`musictx.generation.continue_seed`). The output MIDI carries the seed's tempo map and time signatures over
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
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from musictx.checkpoints.model_store import ModelLoadError, load_model, shipped_models
from musictx.ctrl_c import remembered_ctrl_c
from musictx.generation.continue_seed import new_ids, new_seconds, piece_notes, sample_continuations, stop_reason
from musictx.generation.generate_options import GenerateOptions
from musictx.generation.model_choice import choose_model
from musictx.generation.output_folder import (
    claim_record_path,
    claim_sample_numbers,
    describe_reuse,
    drop_empty_claims,
    release_numbers,
    sample_name,
)
from musictx.generation.progress import SamplingProgress
from musictx.generation.sampling import GenerationInterrupted
from musictx.generation.seeds import GenerateError, Seed, seed_from_midi, unconditional_seed
from musictx.io.audio import audio_unavailable, wav_beside
from musictx.io.jsonio import write_json
from musictx.io.midi_write import write_midi
from musictx.io.piano_roll import plot_piano_roll
from musictx.io.seed_tracks import track_merge
from musictx.io.tokenizer import EventTokenizer
from musictx.io.tokenizers import is_metrical


def open_model(opts: GenerateOptions):
    """(net, tokenizer, meta) of ``opts.checkpoint`` on ``opts.device`` from the model store, a refusal said
    as the ``checkpoint=`` option's (GenerateError), then checked against the options that depend on the
    model (`GenerateOptions.check_model`)."""
    if not opts.checkpoint:
        name, why = choose_model(opts.seed_midi, shipped_models())
        print(f"model: {name} ({why}); checkpoint=<name or path> picks another")
        opts.checkpoint = name
    try:
        net, tokenizer, meta = load_model(opts.checkpoint, map_location=opts.device)
    except ModelLoadError as err:
        raise GenerateError(f"checkpoint={err}") from None  # the message starts with the model reference
    opts.check_model(net, tokenizer)
    return net, tokenizer, meta


def run(opts: GenerateOptions) -> dict:
    """Validate, load, generate, write; return the record written to ``generation.json`` (or the free name
    after it). A Ctrl-C while sampling writes the samples so far (MIDI and piano roll), one while writing
    keeps the samples already written; either records them, then raises KeyboardInterrupt saying so."""
    opts.check()
    if opts.threads:
        torch.set_num_threads(opts.threads)
    net, tokenizer, meta = open_model(opts)
    if opts.task != "continue":
        from musictx.generation.infill_run import run_task

        return run_task(opts, net, tokenizer, meta)
    if is_metrical(tokenizer):
        from musictx.generation.write_metrical import run_metrical

        return run_metrical(opts, net, tokenizer, meta)
    seed, tracks = _seed(tokenizer, opts)
    no_audio = audio_unavailable(opts.soundfont) if opts.audio else "audio=false"
    pieces, cut_short, wall = _sample(net, tokenizer, seed, opts)
    # Nothing was written before this point: every check above raises first.
    out_dir = Path(opts.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if no_audio:
        print(f"no WAV files: {no_audio}")
    samples, record_path, stopped = write_samples(out_dir, tokenizer, seed, pieces, opts,
                                                  no_audio is None and not cut_short)
    record = {"settings": asdict(opts), "checkpoint": meta["ref"], "model_source": meta["source"],
              "model_path": str(Path(meta["path"]).resolve()),
              "model": meta["model"], "global_step": meta.get("global_step"), "tokenizer": tokenizer.to_dict(),
              "seed": {"midi": seed.path, "seconds": seed.seconds, "tokens": len(seed.ids),
                       "unconditional": seed.path is None, "silence_dropped_seconds": seed.silence_dropped,
                       "starts_at_seconds": seed.silence_dropped, "tracks": tracks},
              "samples": samples, "interrupted": cut_short or stopped,
              "samples_not_written": len(pieces) - len(samples), "generation_wall_s": wall,
              "new_tokens_per_s": sum(len(p) for p in pieces) / max(wall, 1e-9)}
    write_json(record_path, record, what="generation")
    print_samples(out_dir, samples, opts)
    if stopped:
        raise KeyboardInterrupt(f"interrupted while writing: wrote {len(samples)} of the {len(pieces)} sample(s) "
                                f"and {record_path.name} to {out_dir.resolve()}")
    if cut_short:
        got = [s["new_seconds"] for s in samples]
        raise KeyboardInterrupt(f"interrupted: wrote the {len(samples)} partial sample(s) so far "
                                f"({min(got):.1f} to {max(got):.1f} s of new music) to {out_dir.resolve()}")
    print(f"wrote {len(samples)} sample(s) and {record_path.name} to {out_dir.resolve()}")
    return record


def _sample(net, tokenizer: EventTokenizer, seed: Seed, opts: GenerateOptions) -> tuple[list[np.ndarray], bool, float]:
    """(new ids per sample, whether a Ctrl-C cut them short, wall seconds), progress printed as it goes."""
    every = opts.progress_every_s
    t0 = time.perf_counter()
    try:
        with SamplingProgress(tokenizer, opts.length_seconds, every) if every else nullcontext() as progress:
            pieces = sample_continuations(net, tokenizer, seed, opts, num_samples=opts.num_samples,
                                          length_seconds=opts.length_seconds, max_tokens=opts.max_tokens,
                                          on_step=progress and progress.update)
        cut_short = False
    except GenerationInterrupted as stop:
        pieces, cut_short = new_ids(tokenizer, seed, stop.ids), True
    return pieces, cut_short, time.perf_counter() - t0


def write_sample(out_dir: Path, index: int, tokenizer: EventTokenizer, seed: Seed, new_ids: np.ndarray,
                 opts: GenerateOptions, audio: bool, name: str | None = None,
                 earlier_from: float | None = None) -> dict:
    """Write sample_XX.mid / .png (/ .wav), XX being ``index`` (or ``name``.mid ...); return its record for
    generation.json. ``earlier_from``: see `musictx.io.piano_roll.plot_piano_roll`."""
    name = name or sample_name(index)
    notes = piece_notes(tokenizer, seed, new_ids, opts.include_seed)
    midi = out_dir / f"{name}.mid"
    write_midi(notes, midi, timing=seed.output_timing(opts.include_seed), name=seed.track_name())
    takeover = seed.seconds if opts.include_seed else None
    plot_piano_roll(notes, out_dir / f"{name}.png", takeover=takeover, title=f"{name}: {len(notes)} notes",
                    earlier_from=earlier_from if takeover else None)
    wav = wav_beside(midi, opts.soundfont) if audio else None
    return {"midi": midi.name, "png": f"{name}.png", "wav": wav, "new_tokens": len(new_ids),
            "new_seconds": new_seconds(tokenizer, new_ids), "total_seconds": notes.duration(), "notes": len(notes),
            "stop": stop_reason(tokenizer, new_ids, opts.length_seconds, opts.token_cap())}


def write_samples(out_dir: Path, tokenizer: EventTokenizer, seed: Seed, pieces: list[np.ndarray],
                  opts: GenerateOptions, audio: bool) -> tuple[list[dict], Path, bool]:
    """Write each piece under the next free sample number of ``out_dir``; return the records of those
    written, the path claimed for the run's record, and whether a Ctrl-C stopped the writing (the files of
    the samples it left unfinished are removed). No file already there is replaced
    (`musictx.generation.output_folder`)."""
    numbers = claim_sample_numbers(out_dir, len(pieces))
    record_path = claim_record_path(out_dir)
    reuse = describe_reuse(out_dir, numbers, record_path)
    if reuse:
        print(reuse)
    samples: list[dict] = []
    try:
        with remembered_ctrl_c() as pressed:
            for number, ids in zip(numbers, pieces, strict=True):
                samples.append(write_sample(out_dir, number, tokenizer, seed, ids, opts, audio=audio))
                if pressed():  # its KeyboardInterrupt was swallowed (raised inside a GC callback): stop here
                    raise KeyboardInterrupt
    except KeyboardInterrupt:
        release_numbers(out_dir, numbers[len(samples):])
        return samples, record_path, True
    except OSError:  # a full disk (musictx.safe_output.OutputError names the file): finished files stay
        drop_empty_claims(out_dir, numbers[len(samples):], record_path)
        raise
    return samples, record_path, False


def _seed(tokenizer: EventTokenizer, opts: GenerateOptions) -> tuple[Seed, str | None]:
    """The seed, and the line saying how its tracks were read (printed; None without a seed file)."""
    if not opts.seed_midi:
        return unconditional_seed(tokenizer, opts.start_velocity), None
    seed = seed_from_midi(tokenizer, opts.seed_midi, opts.seed_seconds, opts.seed_from)
    tracks = track_merge(tokenizer, opts.seed_midi).line()
    print(tracks)
    if opts.seed_from:
        print(f"seed: starts at {seed.silence_dropped:.2f} s of the file, its first note at or after "
              f"seed_from={opts.seed_from:g} s; {seed.seconds:.2f} s of it kept")
    elif seed.silence_dropped:
        print(f"seed: {seed.silence_dropped:.2f} s of silence before its first note left out")
    return seed, tracks


def print_samples(out_dir: Path, samples: list[dict], opts: GenerateOptions) -> None:
    """One line per sample; a sample that the token cap stopped short of ``length_seconds`` says so."""
    for s in samples:
        path = out_dir / s["midi"]
        if s["stop"] == "max_tokens" and opts.length_seconds:
            print(f"{path}: only {s['new_seconds']:.1f} s of the {opts.length_seconds:g} s asked for: stopped at "
                  f"max_tokens={opts.token_cap()} ({s['notes']} notes); raise max_tokens for more")
        else:
            print(f"{path}: {s['notes']} notes, {s['new_tokens']} new tokens, {s['new_seconds']:.1f} s new "
                  f"({s['stop']})")
