"""Shared fixtures: a tiny prepared dataset built from random MIDI (no downloads) and the real configs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pretty_midi
import pytest

from musictx.io.token_store import SPLITS, write_split
from musictx.io.tokenizer import EventTokenizer
from musictx.paths import CONF_DIR

# Seconds of music per piece; the 0.4 s pieces are far shorter than any training window in the tests.
PIECE_SECONDS = {"train": [12.0, 8.0, 0.4, 15.0, 5.0], "validation": [6.0, 0.4], "test": [7.0, 3.0]}


def random_midi(path: Path, seconds: float, rng: np.random.Generator) -> None:
    """A piano track of random notes, pitches 36..84 (so a +-3 transposition never drops a note)."""
    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(program=0)
    t = 0.0
    while t < seconds:
        dur = float(rng.uniform(0.05, 0.6))
        inst.notes.append(pretty_midi.Note(velocity=int(rng.integers(20, 120)), pitch=int(rng.integers(36, 85)),
                                           start=t, end=min(t + dur, seconds + 0.5)))
        t += float(rng.choice([0.0, 0.05, 0.1, 0.12, 0.25]))  # 0.0: a chord
    pm.instruments.append(inst)
    pm.write(str(path))


def make_prepared_dataset(out_dir: Path, seed: int = 0, seconds: dict | None = None) -> Path:
    """Write MIDI files, encode them and store them in the prepared-dataset format of `token_store`."""
    rng = np.random.default_rng(seed)
    tok = EventTokenizer()
    midi_dir = out_dir / "midi"
    midi_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"tokenizer": tok.to_dict(), "splits": {}}
    for split in SPLITS:
        pieces, files = [], []
        for i, sec in enumerate((seconds or PIECE_SECONDS)[split]):
            path = midi_dir / f"{split}_{i}.mid"
            random_midi(path, sec, rng)
            pieces.append(np.append(tok.encode(path), tok.eos_id))
            files.append(path.name)
        write_split(out_dir, split, pieces, files)
        manifest["splits"][split] = {"files": len(pieces), "tokens": int(sum(len(p) for p in pieces))}
    tok.save(out_dir / "tokenizer.json")
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return out_dir


@pytest.fixture(scope="session")
def prepared_dir(tmp_path_factory) -> Path:
    """A prepared dataset (tokenizer.json, arrays, manifest.json); read-only for the tests."""
    return make_prepared_dataset(tmp_path_factory.mktemp("prepared"))


@pytest.fixture(scope="session")
def conf_dir() -> Path:
    return Path(CONF_DIR)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Every test runs torch on one thread: the tensors of the tests are tiny, and on a few shared, busy
    cores OpenMP threads waiting on each other make them up to 100x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True, scope="session")
def no_installed_models(tmp_path_factory):
    """The tests see the shipped models only: a model installed on this machine (pop-large in
    ~/.local/share/musictx/models) would change which model a name picks and what an error lists."""
    import os

    before = os.environ.get("MUSICTX_MODELS")
    os.environ["MUSICTX_MODELS"] = str(tmp_path_factory.mktemp("installed_models"))
    yield
    if before is None:
        os.environ.pop("MUSICTX_MODELS", None)
    else:
        os.environ["MUSICTX_MODELS"] = before
