"""Continuing MIDI: what ``musictx-generate``, ``musictx-evaluate``, ``musictx-app`` and the benches share.
A model (+ an optional seed MIDI) -> continuations as MIDI, piano roll, WAV and a JSON record; the
command's config is ``conf/generate.yaml`` and its entry point `musictx.generate`. The model is the shipped
``piano`` model unless ``checkpoint=`` names another shipped model, a model folder or a ``.ckpt``
(`musictx.model_store`).

    musictx-generate seed_midi=motif.mid                      # the shipped model

    musictx-generate checkpoint=outputs/train/.../checkpoints/last.ckpt seed_midi=motif.mid seed_seconds=10 \\
        length_seconds=30 num_samples=4 temperature=0.95 top_p=0.95 seed=7 output_dir=out/

The seed MIDI is encoded with the checkpoint's own tokenizer, counted from its first note (silence
before it is left out) and cut ``seed_seconds`` later; the model continues from its last id. The output
MIDI carries the seed's tempo map and time signatures over that span (`musictx.midi_timing`), so that in a
DAW it sits on the seed's bars; unconditional samples are written at 120 bpm in 4/4. Without
``seed_midi`` generation is unconditional: the prompt is a single VELOCITY event (``start_velocity``,
mezzo-forte by default), because training windows start at the beginning of a piece, which is a VELOCITY
or TIME_SHIFT event (there is no BOS token).

Everything is checked (options, output_dir, checkpoint, tokenizer, seed) before the model runs and the
first file is written, so a bad input leaves no partial output. A reused ``output_dir`` keeps only this
run's ``sample_XX`` files, the ones ``generation.json`` lists. The functions below are usable from Python
without Hydra: `run` takes a `GenerateOptions`.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from musictx.audio import AudioRenderError, audio_unavailable, render_wav
from musictx.guard import NoteGrammarGuard
from musictx.jsonio import write_json
from musictx.midi_io import Notes
from musictx.midi_timing import MidiTiming
from musictx.sampling import KEEP_SEED, GenerationInterrupted, ProgressPrinter, SecondsLimit, context_length, generate
from musictx.seeds import (  # noqa: F401  (cut_at_seconds, drop_leading_silence: re-exported for callers)
    GenerateError,
    Seed,
    cut_at_seconds,
    drop_leading_silence,
    seed_from_midi,
    unconditional_seed,
)
from musictx.tokenizer import EventTokenizer, TokenizerMismatchError


@dataclass
class GenerateOptions:
    """The settings of one generation run; the fields (and defaults) of ``conf/generate.yaml``."""

    checkpoint: str | None = None
    seed_midi: str | None = None  # None: unconditional
    seed_seconds: float | None = None  # keep this much of the seed, from its first note; None: all of it
    tokenizer: str | None = None  # tokenizer.json or a prepared data dir the checkpoint must match
    length_seconds: float | None = 30.0  # of new material per sample; None: only max_tokens bounds it
    max_tokens: int | None = None  # new ids per sample at most; None: room for length_seconds (`token_cap`)
    num_samples: int = 4
    temperature: float = 1.0  # 0: greedy
    top_k: int | None = None
    top_p: float | None = 0.95
    seed: int = 0  # of the random generator
    use_cache: bool = True  # False: recompute the whole window every step (reference path)
    slide: int | None = None  # ids dropped when the context is full; None: max_seq_len // 4
    keep_seed: int | None = KEEP_SEED  # the seed's last ids pinned at the start of a slid window; 0: none
    include_seed: bool = True  # False: write the continuation alone, shifted to start at 0
    start_velocity: int = 64  # unconditional prompt: the VELOCITY event of this velocity
    guard: bool = True  # refuse stray NOTE_OFFs and end notes held max_note_seconds (musictx.guard)
    max_note_seconds: float | None = 5.0  # with guard: the longest a note may sound; None: no cap
    device: str = "cpu"
    threads: int | None = None  # torch intra-op threads; None: torch's default
    progress_every_s: float | None = 10.0  # `run` prints how far sampling is this often (wall clock); None: never
    audio: bool = True  # write sample_XX.wav when fluidsynth and the soundfont are present
    soundfont: str | None = None  # None: the first GM soundfont found (musictx.audio.find_soundfont)
    output_dir: str | None = None

    @classmethod
    def from_config(cls, cfg: DictConfig | dict) -> GenerateOptions:
        data = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
        data.pop("hydra", None)
        check_option_names(data)
        return cls(**data)

    def token_cap(self) -> int:
        """New ids per sample at most: ``max_tokens``, or when it is unset room for ``length_seconds`` of
        dense piano (`TOKENS_PER_SECOND`), never below `DEFAULT_MAX_TOKENS`, so that the length asked for
        is what stops a sample."""
        if self.max_tokens is not None:
            return self.max_tokens
        return max(DEFAULT_MAX_TOKENS, math.ceil(TOKENS_PER_SECOND * (self.length_seconds or 0)))

    def check(self) -> None:
        """Raise GenerateError naming the first bad option (numbers, then ``output_dir``)."""
        if self.output_dir in (None, ""):
            raise GenerateError("output_dir is required")
        self.check_sampling()
        check_output_dir(self.output_dir)

    def check_sampling(self) -> None:
        """The numeric options: whole numbers where counts are meant (``max_tokens=1e9`` becomes an int),
        finite numbers (no NaN or inf) in range. Raise GenerateError naming the first bad one."""
        for name in WHOLE_OPTIONS:
            setattr(self, name, _whole(name, getattr(self, name)))
        for name in REAL_OPTIONS:
            _finite(name, getattr(self, name))
        bad = [
            (self.temperature < 0, f"temperature must be >= 0 (0 = greedy), got {self.temperature}"),
            (self.top_k is not None and self.top_k < 1, f"top_k must be >= 1 or null, got {self.top_k}"),
            (self.top_p is not None and not 0 < self.top_p <= 1, f"top_p must be in (0, 1] or null, got {self.top_p}"),
            (self.num_samples < 1, f"num_samples must be >= 1, got {self.num_samples}"),
            (self.max_tokens is not None and self.max_tokens < 1,
             f"max_tokens must be >= 1 or null, got {self.max_tokens}"),
            (self.length_seconds is not None and self.length_seconds <= 0,
             f"length_seconds must be > 0 or null, got {self.length_seconds}"),
            (self.seed_seconds is not None and self.seed_seconds <= 0,
             f"seed_seconds must be > 0 or null (all of the seed), got {self.seed_seconds}"),
            (self.slide is not None and self.slide < 1, f"slide must be >= 1 or null, got {self.slide}"),
            (self.keep_seed is not None and self.keep_seed < 0,
             f"keep_seed must be >= 0 or null, got {self.keep_seed}"),
            (self.max_note_seconds is not None and not self.max_note_seconds > 0,
             f"max_note_seconds must be > 0 or null, got {self.max_note_seconds}"),
            (not 1 <= self.start_velocity <= 127, f"start_velocity must be in 1..127, got {self.start_velocity}"),
            (self.threads is not None and self.threads < 1, f"threads must be >= 1 or null, got {self.threads}"),
            (self.progress_every_s is not None and self.progress_every_s <= 0,
             f"progress_every_s must be > 0 or null, got {self.progress_every_s}"),
        ]
        for is_bad, message in bad:
            if is_bad:
                raise GenerateError(message)


# Options that count something (a float with a whole value, as Hydra reads 1e9, is accepted) and options
# that are real numbers; None is allowed where the field's type allows it.
WHOLE_OPTIONS = ("max_tokens", "num_samples", "top_k", "seed", "slide", "keep_seed", "start_velocity", "threads")
REAL_OPTIONS = ("seed_seconds", "length_seconds", "temperature", "top_p", "max_note_seconds", "progress_every_s")
# The token cap when max_tokens is unset: recorded piano runs at ~40-80 ids per second of music, so this is
# only reached by a model that has gone wrong; DEFAULT_MAX_TOKENS without length_seconds.
TOKENS_PER_SECOND = 200
DEFAULT_MAX_TOKENS = 2048


def check_option_names(names) -> None:
    """Raise GenerateError for the first name that is not a `GenerateOptions` field, with the nearest one."""
    known = [f.name for f in fields(GenerateOptions)]
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean '{close[0]}'?" if close else "musictx-generate --cfg job lists the options"
            raise GenerateError(f"unknown option '{name}'; {hint}")


def _whole(name: str, value):
    if value is None and name not in ("num_samples", "seed", "start_velocity"):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise GenerateError(f"{name} must be a whole number, got {value!r}")
    return int(value)


def _finite(name: str, value) -> None:
    if value is None and name != "temperature":
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
        raise GenerateError(f"{name} must be a finite number, got {value!r}")


def check_output_dir(output_dir: str | os.PathLike) -> None:
    """Raise GenerateError unless ``output_dir`` is a folder or can be made one: checked before the model
    runs, so that a typo does not cost the generation."""
    out = Path(output_dir)
    for path in (out, *out.parents):
        if path.is_dir():
            if not os.access(path, os.W_OK | os.X_OK):
                raise GenerateError(f"output_dir={out}: {path} is not writable")
            return
        if os.path.lexists(path):
            what = "is" if path == out else f"is inside {path}, which is"
            raise GenerateError(f"output_dir={out}: {what} a file, not a folder")


def load_model(opts: GenerateOptions):
    """(net, tokenizer, meta) of ``opts.checkpoint`` (a shipped name, a model folder or a ``.ckpt``; unset:
    the shipped default model), checked against ``opts.tokenizer`` if given."""
    from musictx import model_store

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
    ``on_step``: see `musictx.sampling.generate`; a Ctrl-C raises its `GenerationInterrupted`."""
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
                 opts: GenerateOptions, audio: bool) -> dict:
    """Write sample_XX.mid / .png (/ .wav); return its record for generation.json."""
    from musictx.plots import plot_piano_roll

    name = f"sample_{index:02d}"
    notes = piece_notes(tokenizer, seed, new_ids, opts.include_seed)
    midi = out_dir / f"{name}.mid"
    write_midi(notes, midi, timing=seed.output_timing(opts.include_seed), name=seed.track_name())
    takeover = seed.seconds if opts.include_seed else None
    plot_piano_roll(notes, out_dir / f"{name}.png", takeover=takeover, title=f"{name}: {len(notes)} notes")
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
    """Validate, load, generate, write; return the record written to ``generation.json``. A Ctrl-C while
    sampling writes the samples so far (MIDI and piano roll), then raises KeyboardInterrupt saying so."""
    opts.check()
    if opts.threads:
        torch.set_num_threads(opts.threads)
    net, tokenizer, meta = load_model(opts)
    seed = _seed(tokenizer, opts)
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
    audio = no_audio is None and not interrupted
    if no_audio:
        print(f"no WAV files: {no_audio}")
    samples = [write_sample(out_dir, i, tokenizer, seed, ids, opts, audio=audio) for i, ids in enumerate(pieces)]
    stale = remove_stale_samples(out_dir, {s[k] for s in samples for k in ("midi", "png", "wav") if s[k]})
    if stale:
        print(f"removed {len(stale)} sample file(s) of an earlier run in {out_dir}: {', '.join(stale)}")
    record = {"settings": asdict(opts), "checkpoint": meta["ref"], "model_source": meta["source"],
              "model_path": str(Path(meta["path"]).resolve()),
              "model": meta["model"], "global_step": meta.get("global_step"), "tokenizer": tokenizer.to_dict(),
              "seed": {"midi": seed.path, "seconds": seed.seconds, "tokens": len(seed.ids),
                       "unconditional": seed.path is None, "silence_dropped_seconds": seed.silence_dropped},
              "samples": samples, "interrupted": interrupted, "generation_wall_s": wall,
              "new_tokens_per_s": sum(len(p) for p in pieces) / max(wall, 1e-9)}
    write_json(out_dir / "generation.json", record, what="generation")
    print_samples(out_dir, samples, opts)
    if interrupted:
        got = [s["new_seconds"] for s in samples]
        raise KeyboardInterrupt(f"interrupted: wrote the {len(samples)} partial sample(s) so far "
                                f"({min(got):.1f} to {max(got):.1f} s of new music) to {out_dir.resolve()}")
    print(f"wrote {len(samples)} sample(s) and generation.json to {out_dir.resolve()}")
    return record


def _seed(tokenizer: EventTokenizer, opts: GenerateOptions) -> Seed:
    if not opts.seed_midi:
        return unconditional_seed(tokenizer, opts.start_velocity)
    seed = seed_from_midi(tokenizer, opts.seed_midi, opts.seed_seconds)
    if seed.silence_dropped:
        print(f"seed: {seed.silence_dropped:.2f} s of silence before its first note left out")
    return seed


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


# What write_sample names its files; only these are removed from a reused output folder.
SAMPLE_FILE = re.compile(r"sample_\d{2,}\.(mid|png|wav)")


def remove_stale_samples(out_dir: Path, written: set[str]) -> list[str]:
    """Remove the ``sample_XX.mid/.png/.wav`` files of ``out_dir`` that this run did not write (an earlier
    run made more samples, or audio), so that the folder holds what generation.json lists."""
    stale = sorted(p.name for p in out_dir.iterdir()
                   if SAMPLE_FILE.fullmatch(p.name) and p.name not in written and not p.is_dir())
    for name in stale:
        (out_dir / name).unlink()
    return stale
