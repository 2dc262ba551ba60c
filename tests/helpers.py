"""Test helpers: real MIDI files made with pretty_midi, and the shared real-data folder."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pretty_midi
import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PIANO_DIR = SHARED_DATA / "piano"
EDGE_DIR = SHARED_DATA / "edge"

needs_shared = pytest.mark.skipif(
    not PIANO_DIR.is_dir(),
    reason=f"real MIDI data not found at {SHARED_DATA} (only present beside the repo in CI and dev machines)",
)


def piano_files() -> list[Path]:
    return sorted(PIANO_DIR.rglob("*.mid"))


def random_pretty_midi(rng: np.random.Generator, n_notes: int = 40, seconds: float = 8.0,
                       pedal: bool = True, drums: bool = False) -> pretty_midi.PrettyMIDI:
    """A random but valid piano performance, optionally with sustain pedal and a drum track."""
    pm = pretty_midi.PrettyMIDI(initial_tempo=100.0)
    piano = pretty_midi.Instrument(program=0)
    starts = np.sort(rng.uniform(0, seconds, n_notes))
    for s in starts:
        dur = float(rng.uniform(0.02, 1.5))
        piano.notes.append(pretty_midi.Note(velocity=int(rng.integers(1, 128)), pitch=int(rng.integers(21, 109)),
                                            start=float(s), end=float(s) + dur))
    if pedal:
        t = 0.0
        while t < seconds:
            down, up = t + rng.uniform(0.1, 1.0), t + rng.uniform(1.2, 2.5)
            piano.control_changes += [pretty_midi.ControlChange(64, 100, down), pretty_midi.ControlChange(64, 0, up)]
            t = up
    pm.instruments.append(piano)
    if drums:
        kit = pretty_midi.Instrument(program=0, is_drum=True)
        kit.notes += [pretty_midi.Note(100, 36, float(t), float(t) + 0.1) for t in np.arange(0, seconds, 0.5)]
        pm.instruments.append(kit)
    return pm


def write_random_midi(path: Path, seed: int, **kwargs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    random_pretty_midi(np.random.default_rng(seed), **kwargs).write(str(path))
    return path


def held_out_pop_continuations(net, tok, sampling_options: dict, songs=(6, 18)):
    """(seed, new music) of each sample when the shipped pop model continues POP909 songs of the prep split's
    validation files (10 s seed from 25 s, 12 s new, 2 samples, the i-th song with seed i) under
    `SamplingOptions(**sampling_options)`: what the echo tests compare with the echo on and off."""
    from musictx.decoding.sampling_options import SamplingOptions
    from musictx.evaluation import scorecard as sc

    opts = {"seed_seconds": 10, "seed_from": 25, "length_seconds": 12, "num_samples": 2}
    out = []
    for k, n in enumerate(songs):
        song = SHARED_DATA / "pop" / "POP909" / f"{n:03d}" / f"{n:03d}.mid"
        cont = sc.continue_metrical(net, tok, song, opts, SamplingOptions(seed=k, **{"best_of": 1, **sampling_options}))
        out += [(s.window(cont.seed_start, cont.seed_end), s.window(cont.seed_end, 1e9)) for s in cont.samples]
    return out


def started_on_bars(hook, tok, bars: list[list[str]]):
    """``hook`` (a metrical sampler hook) started on the token strings of ``bars`` and the Bar id that opens
    the first new bar, as the sampler's prompt."""
    import torch

    tokens = [t for bar in bars for t in bar] + ["Bar_None"]
    hook.start(torch.tensor([[tok.vocab[t] for t in tokens]]))
    return hook


def step(hook, tok, *tokens: str) -> None:
    """Feed ``hook`` the ids of ``tokens``, one draw each."""
    import torch

    for t in tokens:
        hook.update(torch.tensor([tok.vocab[t]]))


def bonused(hook, tok) -> set[str]:
    """The tokens ``hook`` raises from flat logits."""
    import torch

    out = hook(torch.zeros(1, tok.vocab_size))[0]
    return {tok.id_to_token(int(i)) for i in torch.nonzero(out).flatten()}


def remi_bar(*onsets: tuple[int, list[tuple[int, int, str]]]) -> list[str]:
    """A 4/4 REMI bar's token strings: (position, [(program, pitch, duration), ...]) for each onset."""
    out = ["Bar_None", "TimeSig_4/4"]
    for pos, notes in onsets:
        out.append(f"Position_{pos}")
        for program, pitch, duration in notes:
            out += [f"Program_{program}", f"Pitch_{pitch}", "Velocity_95", f"Duration_{duration}"]
    return out


@contextmanager
def small_tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A real file system of ``size`` (a tmpfs, e.g. "64k") mounted at ``folder`` (made here) while the block
    runs, for tests of a full disk; the test skips where mounting is not allowed (it needs root; CI has it)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a {size} tmpfs here (needs root): {done.stderr.strip() or done.returncode}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
