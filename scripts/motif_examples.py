"""One listening example per model of the three-model motif table: the first motif seed of the test split,
the real music after it, and each network's continuation with the sampler, as MIDI and as .ogg (needs
``pip install soundfile``).

Reads the ``sample_ids`` that ``musictx-evaluate mode=motif`` saved (scripts/motif_table.py names the runs)
and the same seed again, so nothing is sampled twice:

    python scripts/motif_examples.py outputs/compare/motif docs/motif
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile

from musictx.checkpoints.model_store import load_model
from musictx.evaluation.motif import pick_motif_seeds
from musictx.io.audio import render_wav
from musictx.io.token_store import TokenArrays

RUNS = {"music_transformer": "mt", "vanilla": "vanilla", "lstm": "lstm"}


def write_example(tok, ids: np.ndarray, out: Path) -> None:
    """``ids`` as ``out``.mid and ``out``.ogg (rendered as WAV first, then compressed)."""
    tok.decode(ids).write(str(out.with_suffix(".mid")))
    with tempfile.TemporaryDirectory() as tmp:
        wav = render_wav(out.with_suffix(".mid"), Path(tmp) / "x.wav")
        audio, rate = soundfile.read(wav)
        # in blocks: libsndfile's Vorbis encoder crashes on one long write
        with soundfile.SoundFile(out.with_suffix(".ogg"), "w", rate, audio.shape[1], format="OGG",
                                 subtype="VORBIS") as ogg:
            for start in range(0, len(audio), 8192):
                ogg.write(audio[start:start + 8192])


def main(root: Path, dest: Path) -> None:
    _, tok, _ = load_model("piano")
    first = json.loads((root / "mt_sampler" / "metrics.json").read_text())["motif"]
    s = first["settings"]
    seeds = pick_motif_seeds(TokenArrays(Path("data/piano"), "test"), tok, int(s["num_seeds"]),
                             float(s["seed_seconds"]), float(s["length_seconds"]), int(s["ngram"]),
                             float(s["min_score"]), s["stride_seconds"], s["max_per_group"])
    seed = seeds[0]
    assert seed.name == first["seeds"][0], (seed.name, first["seeds"][0])
    dest.mkdir(parents=True, exist_ok=True)
    steps = np.cumsum(tok.shift_steps(seed.ids))  # the real music: the seed and what followed, as long
    limit = round((seed.seed.seconds + float(s["length_seconds"])) / tok.config.time_step)
    write_example(tok, seed.ids[: int(np.searchsorted(steps, limit, side="right"))], dest / "seed_0_real_60s")
    print(f"{dest}/seed_0_real_60s.ogg: {seed.name}, the real music")
    for name, run in RUNS.items():
        motif = json.loads((root / f"{run}_sampler" / "metrics.json").read_text())["motif"]
        new = np.asarray(motif["sample_ids"]["continuation"][0], dtype=np.int64)
        write_example(tok, np.concatenate([seed.seed.ids, new[new != tok.pad_id]]), dest / f"seed_0_{name}_sampler")
        print(f"{dest}/seed_0_{name}_sampler.ogg: {seed.name}, {name} with the sampler")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
