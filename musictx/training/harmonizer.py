"""Trains the melody harmonizer (`musictx.models.harmonizer`) on a prepared POP909 folder's songs
(the command: `musictx.commands.harmonizer`).

Each half bar of each training song is one example per pitch class: the melody's features rotated to that
pitch class, and whether the annotated chord sounding at the half bar's start (``chord_midi.txt`` beside
the song) holds it. Half bars without a chord (``N``) are left out. The validation split's songs report
how often the most likely pitch class (and the two, three most likely) are chord tones. About a minute on
2 CPU threads.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from musictx.io.chord_labels import Chords
from musictx.io.score_prep import ROLE_PROGRAMS
from musictx.io.token_store import DatasetFormatError, TokenArrays, folder_problem, load_manifest, load_tokenizer
from musictx.models.harmonizer import half_bar_lines
from musictx.safe_output import atomic_path, check_target, claim, command_run
from musictx.tasks.accompany import CHORD_PROBE_S, harmony_features
from musictx.tasks.song_bars import read_song

PROG = "python -m musictx.commands.harmonizer"


def song_examples(tok, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(features (H, 12, F), chord tones (H, 12)) of the song's half bars that have a chord."""
    song = read_song(tok, path)
    if not any(t.program == ROLE_PROGRAMS["MELODY"] for t in song.read.score.tracks):
        raise ValueError(f"{path}: no melody track")
    features = harmony_features(song, {ROLE_PROGRAMS["MELODY"]})
    bar_s = song.line_seconds(list(range(song.n_bars + 1)))
    starts = half_bar_lines(bar_s)[:-1]  # a half bar's start in seconds, halfway between bar lines
    chords = Chords.read(path.with_name("chord_midi.txt"), strict=False)
    tones = np.zeros((len(starts), 12), dtype=np.float32)
    for h, t in enumerate(starts):
        tones[h, list(chords.at(float(t) + CHORD_PROBE_S))] = 1.0
    keep = tones.any(axis=1)
    return features[keep], tones[keep]


def split_examples(tok, data: Path, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The examples of the split's songs; a song that cannot be used (no melody, no chord file, a damaged
    file) is skipped with one line giving its reason, and the others go on."""
    root = Path(load_manifest(data).get("input_dir") or "")
    pairs, skipped = [], 0
    names = TokenArrays(data, split).files
    for name in tqdm(names, desc=split):
        try:
            pairs.append(song_examples(tok, root / name))
        except Exception as err:  # noqa: BLE001 - one bad song never ends the training
            skipped += 1
            tqdm.write(f"skipped {root / name}: {' '.join(str(err).split()) or type(err).__name__}")
    if skipped:
        print(f"{split}: skipped {skipped} of {len(names)} song(s), each said above with its reason")
    if not pairs:
        raise DatasetFormatError(f"--data {data}: no song of its {split} split could be used "
                                 f"({len(names)} listed, {skipped} skipped)")
    return (torch.as_tensor(np.concatenate([f for f, _ in pairs])),
            torch.as_tensor(np.concatenate([t for _, t in pairs])))


def precision_at(probs: torch.Tensor, tones: torch.Tensor, ks=(1, 2, 3)) -> list[float]:
    """The share of chord tones among each half bar's k most likely pitch classes."""
    order = probs.argsort(dim=-1, descending=True)
    return [float(tones.gather(1, order[:, :k]).mean()) for k in ks]


def train(x: torch.Tensor, y: torch.Tensor, hidden: int = 64, epochs: int = 12, seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[-1], hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                              torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
    opt = torch.optim.Adam(net.parameters(), 2e-3, weight_decay=1e-5)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for _ in tqdm(range(epochs), desc="epochs"):
        for batch in torch.randperm(len(x)).split(512):
            loss = loss_fn(net(x[batch]).squeeze(-1), y[batch])  # (B, 12): every pitch class of a half bar
            opt.zero_grad()
            loss.backward()
            opt.step()
    return net.eval()


def save(net: torch.nn.Sequential, out: Path) -> None:
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    arrays = {}
    for k, m in enumerate(linears):
        arrays[f"w{k}"] = m.weight.detach().T.numpy().astype(np.float32)  # (in, out)
        arrays[f"b{k}"] = m.bias.detach().numpy().astype(np.float32)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out, "--out") as tmp:  # never over a file this run did not write (overwrite: --overwrite)
        np.savez(tmp, **arrays)


def run(data: Path, out: Path, overwrite: bool = False) -> list[float]:
    """Train on ``data``'s training songs, report on its validation songs, write the weights to ``out``
    (refused before any work inside the package, or over a file, unless ``overwrite``)."""
    with command_run(overwrite, "--overwrite"):
        check_target(out.parent, "--out")
        claim(out, "--out")
        check_data(data)
        return _train_and_save(data, out)


def check_data(data: Path) -> None:
    """DatasetFormatError naming --data unless it is a prepared folder whose songs can be found."""
    if problem := folder_problem(data):
        raise DatasetFormatError(f"--data {data}: {problem} (a folder musictx-prep wrote from POP909)")
    kind = load_tokenizer(data).kind
    if kind != "remi":  # each song was skipped, one by one, with an AttributeError of the tokenizer
        what = {"performance": "Performance events"}.get(kind, f"{kind} tokens")
        raise DatasetFormatError(f"--data {data}: holds {what}; the harmonizer reads songs on a beat grid with "
                                 "their chord_midi.txt: a POP909 folder prepared with tokenizer=remi (data/pop)")
    root = load_manifest(data).get("input_dir")
    if not root or not Path(root).is_dir():
        raise DatasetFormatError(f"--data {data}: its manifest names no input folder that exists ({root}); the "
                                 "harmonizer reads the songs and their chord_midi.txt there")


def _train_and_save(data: Path, out: Path) -> list[float]:
    tok = load_tokenizer(data)
    x, y = split_examples(tok, data, "train")
    net = train(x, y)
    xv, yv = split_examples(tok, data, "validation")
    with torch.no_grad():
        prec = precision_at(torch.sigmoid(net(xv).squeeze(-1)), yv)
    print(f"{len(x):,} training half bars; validation ({len(xv):,} half bars): the most likely pitch class is a "
          f"chord tone {prec[0]:.3f}, the two most likely {prec[1]:.3f}, the three {prec[2]:.3f}")
    save(net, out)
    print(f"wrote {out}")
    return prec
