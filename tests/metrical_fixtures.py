"""Fixtures for the metrical (REMI) stage tests: band songs written here (two named tracks on one program, a
meter and a tempo of their own), a dataset prepared from them by the real musictx-prep, and a tiny model
trained on it with the real configs and Lightning Trainer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pretty_midi
import pytest

from data_prep.options import prep_options
from data_prep.prepare import write_dataset

from .gen_fixtures import train_tiny


def band_song(path: Path, bars: int = 12, bpm: float = 100.0, beats_per_bar: int = 3, seed: int = 0,
              names: tuple[str, str] = ("Melody", "Piano")) -> Path:
    """A song of two named tracks, both program 0: a melody of eighths and quarters over a chord a bar,
    every onset on the eighth grid, ``beats_per_bar``/4 at ``bpm``."""
    rng = np.random.default_rng(seed)
    pm = pretty_midi.PrettyMIDI(initial_tempo=bpm)
    pm.time_signature_changes.append(pretty_midi.TimeSignature(beats_per_bar, 4, 0.0))
    beat = 60.0 / bpm
    melody, piano = pretty_midi.Instrument(0, name=names[0]), pretty_midi.Instrument(0, name=names[1])
    scale = [60, 62, 64, 65, 67, 69, 71, 72]
    for bar in range(bars):
        t0 = bar * beats_per_bar * beat
        root = [48, 53, 55, 50][bar % 4]
        for p in (root, root + 4, root + 7):
            piano.notes.append(pretty_midi.Note(70, p, t0, t0 + beats_per_bar * beat * 0.95))
        t = 0.0
        while t < beats_per_bar - 1e-9:
            d = float(rng.choice([0.5, 1.0]))
            melody.notes.append(pretty_midi.Note(90, int(rng.choice(scale)), t0 + t * beat, t0 + (t + d * 0.9) * beat))
            t += d
    pm.instruments += [melody, piano]
    pm.write(str(path))
    return path


@pytest.fixture(name="band_dir", scope="session")
def fixture_band_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("band_songs")
    for i in range(8):
        band_song(folder / f"song_{i}.mid", bars=16, bpm=90 + 5 * i, beats_per_bar=3 if i % 2 else 4, seed=i)
    return folder


@pytest.fixture(name="remi_dir", scope="session")
def fixture_remi_dir(band_dir, tmp_path_factory) -> Path:
    """The band songs prepared with tokenizer=remi by the real prep (2 validation, 1 test song at least)."""
    out = tmp_path_factory.mktemp("remi_prep") / "data"
    opts = prep_options(source="folder", input_dir=str(band_dir), output_dir=str(out), tokenizer="remi",
                        num_workers=0, split={"validation": 0.2, "test": 0.2, "group_by": "file"})
    write_dataset(opts, progress=False)
    return out


@pytest.fixture(name="remi_checkpoint", scope="session")
def fixture_remi_checkpoint(remi_dir, tmp_path_factory) -> Path:
    """last.ckpt of a tiny Music Transformer (context 64) trained 30 steps on the remi dataset."""
    return train_tiny(remi_dir, tmp_path_factory.mktemp("remi_train"), seq_len=64, steps=30, val_every=30)
