"""Continuing MIDI: what ``musictx-generate``, ``musictx-evaluate``, ``musictx-app`` and the benches share.
A model (+ an optional seed MIDI) -> continuations as MIDI, piano roll, WAV and a JSON record; the
command's config is ``conf/generate.yaml`` and its entry point `musictx.commands.generate`. The model is the shipped
``piano`` model unless ``checkpoint=`` names another shipped model, a model folder or a ``.ckpt``
(`musictx.checkpoints.model_store`).

    musictx-generate seed_midi=motif.mid                      # the shipped model

    musictx-generate checkpoint=outputs/train/.../checkpoints/last.ckpt seed_midi=motif.mid seed_seconds=10 \\
        length_seconds=30 num_samples=4 temperature=0.95 top_p=0.95 seed=7 output_dir=out/

The seed MIDI is encoded with the checkpoint's own tokenizer, its tracks merged into one piano stream (one
printed line says which, and what was dropped: `musictx.io.seed_tracks`), counted from its first note (silence
before it is left out), or from the first note at or after ``seed_from`` seconds of the file, and cut
``seed_seconds`` later; the model continues from its last id. The output
MIDI carries the seed's tempo map and time signatures over that span (`musictx.io.midi_timing`), so that in a
DAW it sits on the seed's bars; unconditional samples are written at 120 bpm in 4/4. Without
``seed_midi`` generation is unconditional: the prompt is a single VELOCITY event (``start_velocity``,
mezzo-forte by default), because training windows start at the beginning of a piece, which is a VELOCITY
or TIME_SHIFT event (there is no BOS token).

Everything is checked (options, output_dir, checkpoint, tokenizer, seed) before the model runs and the
first file is written, so a bad input leaves no partial output. A run only adds files: in a folder that
already holds samples (continuing ``D/sample_03.mid`` into ``D``) it numbers its own after them and writes
its record beside ``generation.json`` (`musictx.generation.output_folder`); the seed and everything else stay as they
were. The functions below are usable from Python without Hydra: `run` takes a `GenerateOptions`
(`musictx.generation.generate_options`, where the options are checked).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from musictx.generation.generate_options import GenerateOptions, check_option_names  # noqa: F401  (re-exported)
from musictx.generation.guard import NoteGrammarGuard
from musictx.generation.output_folder import claim_record_path, claim_sample_numbers, describe_reuse, sample_name
from musictx.generation.sampling import GenerationInterrupted, ProgressPrinter, SecondsLimit, context_length, generate
from musictx.generation.seeds import (  # noqa: F401  (cut_at_seconds, drop_leading_silence: re-exported for callers)
    GenerateError,
    Seed,
    cut_at_seconds,
    drop_leading_silence,
    seed_from_midi,
    unconditional_seed,
)
from musictx.io.audio import AudioRenderError, audio_unavailable, render_wav
from musictx.io.jsonio import write_json
from musictx.io.midi_io import Notes
from musictx.io.midi_timing import MidiTiming
from musictx.io.seed_tracks import track_merge
from musictx.io.tokenizer import EventTokenizer, TokenizerMismatchError


def load_model(opts: GenerateOptions):
    """(net, tokenizer, meta) of ``opts.checkpoint`` (a shipped name, a model folder or a ``.ckpt``; unset:
    the shipped default model), checked against ``opts.tokenizer`` if given."""
    from musictx.checkpoints import model_store

    expected = _expected_tokenizer(opts.tokenizer) if opts.tokenizer else None
    try:
        net, tokenizer, meta = model_store.load_model(opts.checkpoint, map_location=opts.device)
    except TokenizerMismatchError:
        raise
    except model_store.ModelLoadError as err:
        raise GenerateError(f"checkpoint={err}") from None  # the message starts with the model reference
    except Exception as err:  # torch.load raises many types for files that are not checkpoints
        raise GenerateError(f"checkpoint={opts.checkpoint}: not a usable musictx checkpoint "
                            f"({type(err).__name__}: {err})") from None
    if expected is not None:
        tokenizer.check_compatible(expected, what=f"tokenizer={opts.tokenizer}")
    max_len = context_length(net)
    if opts.slide is not None and max_len is not None and opts.slide >= max_len:
        raise GenerateError(f"slide must be < the model's context ({max_len}), got {opts.slide}")
    return net, tokenizer, meta


def _expected_tokenizer(path: str) -> EventTokenizer:
    p = Path(path)
    file = p / "tokenizer.json" if p.is_dir() else p
    if not file.is_file():
        raise GenerateError(f"tokenizer={path}: no such file (a tokenizer.json, or a prepared data dir holding one)")
    try:
        return EventTokenizer.load(file)
    except (ValueError, KeyError, TypeError) as err:  # json.JSONDecodeError is a ValueError
        raise GenerateError(f"tokenizer={file}: not a tokenizer.json ({err})") from None


def sample_continuations(net, tokenizer: EventTokenizer, seed: Seed, opts: GenerateOptions,
                         on_step=None) -> list[np.ndarray]:
    """New ids of ``opts.num_samples`` continuations of ``seed`` in one batch (EOS kept, PAD dropped).
    ``on_step``: see `musictx.generation.sampling.generate`; a Ctrl-C raises its `GenerationInterrupted`."""
    device = next(net.parameters()).device
    generator = torch.Generator(device=device).manual_seed(opts.seed)
    prompt = torch.as_tensor(seed.ids, dtype=torch.long, device=device).expand(opts.num_samples, -1)
    stop = SecondsLimit.of(tokenizer, opts.length_seconds) if opts.length_seconds else None
    guard = NoteGrammarGuard.of(tokenizer, opts.max_note_seconds) if opts.guard else None
    ids = generate(net, prompt, opts.token_cap(), temperature=opts.temperature, top_k=opts.top_k, top_p=opts.top_p,
                   eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id, use_cache=opts.use_cache, generator=generator,
                   stop_fn=stop, slide=opts.slide, guard=guard, keep_seed=opts.keep_seed, on_step=on_step)
    return new_ids(tokenizer, seed, ids)


def new_ids(tokenizer: EventTokenizer, seed: Seed, ids: torch.Tensor) -> list[np.ndarray]:
    """Each row of the sampler's ``ids`` (B, T) after the seed, PAD dropped."""
    new = ids[:, len(seed.ids):].cpu().numpy()
    return [row[row != tokenizer.pad_id] for row in new]


def piece_notes(tokenizer: EventTokenizer, seed: Seed, new_ids: np.ndarray, include_seed: bool = True) -> Notes:
    """Notes of seed + continuation; with ``include_seed=False`` only the notes struck after the seed,
    moved to start at 0 (velocities still follow from the seed's last VELOCITY event)."""
    notes = tokenizer.decode_notes(np.concatenate([seed.ids, new_ids]))
    if include_seed:
        return notes
    step = tokenizer.config.time_step
    cut = round(seed.seconds / step)
    on, off = np.rint(notes.start / step).astype(np.int64), np.rint(notes.end / step).astype(np.int64)
    keep = on >= cut
    return Notes((on[keep] - cut) * step, (off[keep] - cut) * step, notes.pitch[keep], notes.velocity[keep])


def notes_to_midi(notes: Notes, program: int = 0):
    """A ``pretty_midi.PrettyMIDI`` with one track of ``notes``."""
    import pretty_midi

    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(program=program, name="musictx")
    for s, e, p, v in zip(notes.start.tolist(), notes.end.tolist(), notes.pitch.tolist(), notes.velocity.tolist(),
                          strict=True):
        inst.notes.append(pretty_midi.Note(velocity=int(v), pitch=int(p), start=s, end=e))
    pm.instruments.append(inst)
    return pm


def write_midi(notes: Notes, path: str | os.PathLike, program: int = 0, timing: MidiTiming | None = None,
               name: str = "musictx piano") -> Path:
    """Write ``notes`` as a one-track MIDI file named ``name``, with the tempo map and time signatures of
    ``timing`` (None: 120 bpm, 4/4, where the tokenizer's 10 ms grid is exact); note seconds become ticks
    through that map. Written by symusic (C++) from arrays: a million notes take seconds, where
    `notes_to_midi` (pretty_midi) takes minutes."""
    import symusic

    timing = (timing or MidiTiming()).fine()
    score = symusic.Score(timing.tpq)
    for t in timing.tempos:
        score.tempos.append(symusic.Tempo(t.tick, mspq=t.mspq))
    for m in timing.meters:
        score.time_signatures.append(symusic.TimeSignature(m.tick, m.numerator, m.denominator))
    track = symusic.Track(name=name, program=program)
    on = timing.ticks(notes.start).astype(np.int32)
    off = np.maximum(timing.ticks(notes.end).astype(np.int32), on + 1)
    track.notes = symusic.Note.from_numpy(on, off - on, notes.pitch.astype(np.int8),
                                          np.clip(notes.velocity, 1, 127).astype(np.int8))
    score.tracks.append(track)
    score.dump_midi(str(path))
    return Path(path)


def stop_reason(tokenizer: EventTokenizer, new_ids: np.ndarray, opts: GenerateOptions) -> str:
    if len(new_ids) and new_ids[-1] == tokenizer.eos_id:
        return "eos"
    seconds = tokenizer.split_time_shifts(new_ids)[2] * tokenizer.config.time_step
    if opts.length_seconds and seconds >= opts.length_seconds - 1e-9:
        return "length_seconds"
    return "max_tokens" if len(new_ids) >= opts.token_cap() else "interrupted"


def write_sample(out_dir: Path, index: int, tokenizer: EventTokenizer, seed: Seed, new_ids: np.ndarray,
                 opts: GenerateOptions, audio: bool, name: str | None = None,
                 earlier_from: float | None = None) -> dict:
    """Write sample_XX.mid / .png (/ .wav), XX being ``index`` (or ``name``.mid ...); return its record for
    generation.json. ``earlier_from``: see `musictx.evaluation.plots.plot_piano_roll`."""
    from musictx.evaluation.plots import plot_piano_roll

    name = name or sample_name(index)
    notes = piece_notes(tokenizer, seed, new_ids, opts.include_seed)
    midi = out_dir / f"{name}.mid"
    write_midi(notes, midi, timing=seed.output_timing(opts.include_seed), name=seed.track_name())
    takeover = seed.seconds if opts.include_seed else None
    plot_piano_roll(notes, out_dir / f"{name}.png", takeover=takeover, title=f"{name}: {len(notes)} notes",
                    earlier_from=earlier_from if takeover else None)
    wav = None
    if audio:
        try:
            wav = render_wav(midi, out_dir / f"{name}.wav", opts.soundfont).name
        except AudioRenderError as err:
            print(f"audio skipped for {name}: {err}")
    return {"midi": midi.name, "png": f"{name}.png", "wav": wav, "new_tokens": len(new_ids),
            "new_seconds": tokenizer.split_time_shifts(new_ids)[2] * tokenizer.config.time_step,
            "total_seconds": notes.duration(), "notes": len(notes), "stop": stop_reason(tokenizer, new_ids, opts)}


def run(opts: GenerateOptions) -> dict:
    """Validate, load, generate, write; return the record written to ``generation.json`` (or the free name
    after it). A Ctrl-C while sampling writes the samples so far (MIDI and piano roll), then raises
    KeyboardInterrupt saying so."""
    opts.check()
    if opts.threads:
        torch.set_num_threads(opts.threads)
    net, tokenizer, meta = load_model(opts)
    seed, tracks = _seed(tokenizer, opts)
    no_audio = audio_unavailable(opts.soundfont) if opts.audio else "audio=false"
    every = opts.progress_every_s
    progress = ProgressPrinter(tokenizer, opts.length_seconds, every) if every else None
    t0 = time.perf_counter()
    try:
        pieces, interrupted = sample_continuations(net, tokenizer, seed, opts, on_step=progress), False
    except GenerationInterrupted as stop:
        pieces, interrupted = new_ids(tokenizer, seed, stop.ids), True
    wall = time.perf_counter() - t0
    # Nothing was written before this point: every check above raises first.
    out_dir = Path(opts.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if no_audio:
        print(f"no WAV files: {no_audio}")
    samples, record_path = write_samples(out_dir, tokenizer, seed, pieces, opts, no_audio is None and not interrupted)
    record = {"settings": asdict(opts), "checkpoint": meta["ref"], "model_source": meta["source"],
              "model_path": str(Path(meta["path"]).resolve()),
              "model": meta["model"], "global_step": meta.get("global_step"), "tokenizer": tokenizer.to_dict(),
              "seed": {"midi": seed.path, "seconds": seed.seconds, "tokens": len(seed.ids),
                       "unconditional": seed.path is None, "silence_dropped_seconds": seed.silence_dropped,
                       "starts_at_seconds": seed.silence_dropped, "tracks": tracks},
              "samples": samples, "interrupted": interrupted, "generation_wall_s": wall,
              "new_tokens_per_s": sum(len(p) for p in pieces) / max(wall, 1e-9)}
    write_json(record_path, record, what="generation")
    print_samples(out_dir, samples, opts)
    if interrupted:
        got = [s["new_seconds"] for s in samples]
        raise KeyboardInterrupt(f"interrupted: wrote the {len(samples)} partial sample(s) so far "
                                f"({min(got):.1f} to {max(got):.1f} s of new music) to {out_dir.resolve()}")
    print(f"wrote {len(samples)} sample(s) and {record_path.name} to {out_dir.resolve()}")
    return record


def write_samples(out_dir: Path, tokenizer: EventTokenizer, seed: Seed, pieces: list[np.ndarray],
                  opts: GenerateOptions, audio: bool) -> tuple[list[dict], Path]:
    """Write each piece under the next free sample number of ``out_dir``; return their records and the path
    claimed for the run's record. No file already there is replaced (`musictx.generation.output_folder`)."""
    numbers = claim_sample_numbers(out_dir, len(pieces))
    record_path = claim_record_path(out_dir)
    reuse = describe_reuse(out_dir, numbers, record_path)
    if reuse:
        print(reuse)
    samples = [write_sample(out_dir, n, tokenizer, seed, ids, opts, audio=audio) for n, ids in zip(numbers, pieces,
                                                                                                    strict=True)]
    return samples, record_path


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
