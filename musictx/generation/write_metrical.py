"""``musictx-generate`` for a metrical model: the seed cut at bar lines, whole bars sampled, and each
continuation written as MIDI with the seed's named tracks, tempo map and meter (+ piano roll, WAV, record).

Called by `musictx.generation.continue_midi.run` once the model it loaded turns out to read metrical tokens;
the options were checked there.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from musictx.generation.continue_metrical import bars_for, continuation_score, new_bars_seconds, sample_bars
from musictx.generation.generate_options import GenerateOptions
from musictx.generation.metrical_seed import MetricalSeed, metrical_seed
from musictx.generation.output_folder import claim_record_path, claim_sample_numbers, drop_empty_claims, sample_name
from musictx.generation.sampling import GenerationInterrupted
from musictx.generation.seeds import GenerateError
from musictx.io.audio import audio_unavailable, wav_beside
from musictx.io.jsonio import write_json
from musictx.io.midi_io import MidiReadError, Notes
from musictx.io.piano_roll import plot_piano_roll
from musictx.io.score_io import score_to_pretty_midi
from musictx.safe_output import atomic_path


def seed_of(tok, opts: GenerateOptions) -> MetricalSeed:
    if not opts.seed_midi:
        raise GenerateError("a metrical model continues a seed: give seed_midi=<file>")
    try:
        seed = metrical_seed(tok, opts.seed_midi, opts.seed_seconds, opts.seed_from)
    except ValueError as err:  # a broken beat file beside the seed
        raise MidiReadError(opts.seed_midi, str(err)) from None
    print(f"seed: bars {seed.first_bar + 1}-{seed.first_bar + seed.bars} of {opts.seed_midi} "
          f"({seed.seconds:.2f} s from {seed.origin_seconds:.2f} s, cut at bar lines); tracks kept apart: "
          f"{seed.tracks.describe()}")
    return seed


def run_metrical(opts: GenerateOptions, net, tok, meta: dict) -> dict:
    seed = seed_of(tok, opts)
    bars = bars_for(seed, opts.length_seconds, opts.length_bars)
    no_audio = audio_unavailable(opts.soundfont) if opts.audio else "audio=false"
    t0 = time.perf_counter()
    try:
        pieces = sample_bars(net, tok, seed, opts, num_samples=opts.num_samples, bars=bars,
                             max_tokens=opts.max_tokens, max_bar_repeats=opts.max_bar_repeats)
        cut_short = False
    except GenerationInterrupted as stop:
        pieces, cut_short = [r[len(seed.ids):] for r in stop.ids.cpu().numpy()], True
    wall = time.perf_counter() - t0
    out_dir = Path(opts.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if no_audio:
        print(f"no WAV files: {no_audio}")
    numbers = claim_sample_numbers(out_dir, len(pieces))
    record_path = claim_record_path(out_dir)
    samples = []
    try:
        for n, ids in zip(numbers, pieces, strict=True):
            samples.append(write_one(out_dir, n, tok, seed, ids, opts, no_audio is None and not cut_short))
    except OSError:  # a full disk (musictx.safe_output names the file): finished files stay
        drop_empty_claims(out_dir, numbers[len(samples):], record_path)
        raise
    record = {"settings": asdict(opts), "checkpoint": meta["ref"], "model_source": meta["source"],
              "model_path": str(Path(meta["path"]).resolve()), "model": meta["model"],
              "global_step": meta.get("global_step"), "tokenizer": tok.to_dict(),
              "seed": {"midi": seed.path, "seconds": seed.seconds, "bars": seed.bars, "first_bar": seed.first_bar + 1,
                       "starts_at_seconds": seed.origin_seconds, "tokens": len(seed.ids),
                       "tracks": seed.tracks.to_list()},
              "bars": bars, "samples": samples, "interrupted": cut_short, "generation_wall_s": wall,
              "new_tokens_per_s": sum(len(p) for p in pieces) / max(wall, 1e-9)}
    write_json(record_path, record, what="generation")
    for s in samples:
        print(f"{out_dir / s['midi']}: {s['notes']} notes in {s['tracks']}, {s['new_bars']} bars "
              f"({s['new_seconds']:.1f} s) new")
    if cut_short:
        raise KeyboardInterrupt(f"interrupted: wrote the {len(samples)} partial sample(s) so far to "
                                f"{out_dir.resolve()}")
    print(f"wrote {len(samples)} sample(s) and {record_path.name} to {out_dir.resolve()}")
    return record


def write_one(out_dir: Path, number: int, tok, seed: MetricalSeed, new_ids: np.ndarray, opts: GenerateOptions,
              audio: bool) -> dict:
    name = sample_name(number)
    score = continuation_score(tok, seed, new_ids, opts.include_seed)
    midi = out_dir / f"{name}.mid"
    with atomic_path(midi) as tmp:
        score.dump_midi(str(tmp))
    pm = score_to_pretty_midi(score)
    notes = Notes.concat([Notes(np.array([n.start for n in i.notes]), np.array([n.end for n in i.notes]),
                                np.array([n.pitch for n in i.notes], dtype=np.int64),
                                np.array([n.velocity for n in i.notes], dtype=np.int64)) for i in pm.instruments])
    takeover = seed.seconds if opts.include_seed else None
    plot_piano_roll(notes, out_dir / f"{name}.png", takeover=takeover, title=f"{name}: {len(notes)} notes")
    wav = wav_beside(midi, opts.soundfont) if audio else None
    tracks = {i.name: len(i.notes) for i in pm.instruments}
    return {"midi": midi.name, "png": f"{name}.png", "wav": wav, "new_tokens": len(new_ids),
            "new_bars": int((new_ids == tok.bar_id).sum()),
            "new_seconds": new_bars_seconds(seed, score, opts.include_seed), "total_seconds": pm.get_end_time(),
            "notes": len(notes), "tracks": tracks}
