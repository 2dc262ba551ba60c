"""A folder of seeds in one run: ``musictx-generate seed_midi=my_sketches/ output_dir=out/``.

Each MIDI file under the folder (its subfolders too, in name order) is continued as if given alone, into
``output_dir/<its path without the suffix>/``, with one progress bar over the files and one summary line. A
file that cannot be continued (unreadable, too short, refused by its model) is skipped with its reason, said
in one line and listed in ``seeds.json`` beside the results; the run goes on, and fails only when no file
could be continued. The model is chosen per file when ``checkpoint`` is null, as for one file.

A second run into the same ``output_dir`` keeps the first's files, as a run of one seed does: its samples take the
next free numbers, and its summary the next free name (``seeds_2.json``), reserved before any seed is continued.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from musictx.decoding.errors import GenerateError
from musictx.io.chord_labels import ChordFileError
from musictx.io.midi_io import MidiReadError, file_problem
from musictx.safe_output import claim_numbered, release_name, write_text

SUFFIXES = {".mid", ".midi"}
SUMMARY = "seeds.json"
# what one file can fail with and the run still go on: the errors a user fixes from their message
PER_FILE_ERRORS = (GenerateError, MidiReadError, ChordFileError)


def seed_files(folder: Path) -> list[Path]:
    """The MIDI files under ``folder`` (any depth, suffix in any case), in name order; links not followed."""
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in SUFFIXES and not p.is_symlink()
                  and p.is_file())


def summary_name(number: int) -> str:
    """``seeds.json``, then ``seeds_2.json``, ``seeds_3.json`` ... (N = 2, 3, ...): the summary of each run."""
    return SUMMARY if number == 1 else f"seeds_{number}.json"


def run_seed_folder(opts, run_one: Callable) -> dict:
    """Continue every file of the folder ``opts.seed_midi`` with ``run_one(options)`` (`continue_midi.run`'s
    work for one seed); return the summary written to ``seeds.json`` (or the next free name)."""
    folder, out = Path(opts.seed_midi), Path(opts.output_dir)
    files = seed_files(folder)
    if not files:
        raise GenerateError(f"seed_midi={folder}: a folder without .mid or .midi files in it")
    out.mkdir(parents=True, exist_ok=True)
    [[number]] = claim_numbered(out, (summary_name, lambda _names: 1, 1))  # before any work: the end cannot refuse
    path = out / summary_name(number)
    try:
        done, skipped = _continue_each(files, folder, out, opts, run_one)
        summary = {"folder": str(folder), "continued": done, "skipped": skipped}
        write_text(path, json.dumps(summary, indent=1), key="output_dir")
    finally:
        release_name(path)
    kept = f" ({SUMMARY} of an earlier run kept: this run's is {path.name})" if number > 1 else ""
    print(f"seeds: {len(done)} of {len(files)} files of {folder} continued into {out}{kept}"
          + (f"; {len(skipped)} skipped (their reasons above and in {path})" if skipped else ""))
    if not done:
        raise GenerateError(f"seed_midi={folder}: no file could be continued; the first: {skipped[0]['reason']}")
    return summary


def _continue_each(files: list[Path], folder: Path, out: Path, opts, run_one: Callable) -> tuple[list, list]:
    """Each file continued into ``out/<its path without the suffix>``: (what was continued, what was skipped and
    why), the reason of each skip said in one line."""
    done, skipped = [], []
    bar = tqdm(files, desc="seeds", unit=" file", file=sys.stdout, disable=not opts.progress_every_s)
    for path in bar:
        rel = path.relative_to(folder).with_suffix("")
        one = replace(opts, seed_midi=str(path), output_dir=str(out / rel), progress_every_s=None)
        problem = file_problem(path)
        try:
            if problem:
                raise MidiReadError(str(path), problem)
            record = run_one(one)
        except PER_FILE_ERRORS as err:
            reason = " ".join(str(err).split())
            skipped.append({"seed": str(path), "reason": reason})
            tqdm.write(f"skipped: {reason}", file=sys.stdout)  # the reason names the file
            continue
        done.append({"seed": str(path), "output_dir": str(out / rel), "checkpoint": record["checkpoint"],
                     "samples": [s["midi"] for s in record["samples"]]})
    return done, skipped
