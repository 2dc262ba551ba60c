"""Where ``musictx-generate`` puts its files, so that a run never deletes or overwrites a file it did not write.

A musician often continues a result in the folder it came from (``seed_midi=D/sample_03.mid output_dir=D``)
or keeps their own files beside the samples. So a run adds to its folder and never replaces: its samples
take the numbers after the highest ``sample_NN`` name already there (``sample_04``, ``sample_05`` ... above a
``sample_03``, whatever that file is), and its record is ``generation.json``, or ``generation_2.json``,
``generation_3.json`` ... when that name is taken. Each number is claimed by creating its ``.mid`` file
exclusively (``O_EXCL``), so two runs writing into one folder at once cannot take the same one either.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from musictx.generation.seeds import GenerateError
from musictx.safe_output import mark_created, target_problem

# Any name that starts like a sample's (sample_07.mid, sample_07.png, sample_07_arcs_mean-mean_12.png, ...)
# holds its number: new samples are numbered after the highest of them.
SAMPLE_NAME = re.compile(r"sample_(\d+)")
RECORD = "generation.json"


def check_output_dir(output_dir: str | os.PathLike) -> None:
    """Raise GenerateError unless ``output_dir`` is a folder or can be made one, outside the installed
    package: checked before the model runs, so that a typo does not cost the generation."""
    out = Path(output_dir)
    problem = target_problem(out)  # the package, /, the home folder itself (musictx.safe_output)
    if problem:
        raise GenerateError(f"output_dir={out}: {problem}")
    for path in (out, *out.parents):
        if path.is_dir():
            if not os.access(path, os.W_OK | os.X_OK):
                raise GenerateError(f"output_dir={out}: {path} is not writable")
            return
        if os.path.lexists(path):
            what = "is" if path == out else f"is inside {path}, which is"
            raise GenerateError(f"output_dir={out}: {what} a file, not a folder")


def sample_name(number: int) -> str:
    """The stem of a sample's files: ``sample_00``, ``sample_01``, ... (three digits from 100 on)."""
    return f"sample_{number:02d}"


def claim_sample_numbers(out_dir: Path, count: int) -> list[int]:
    """``count`` sample numbers, each after the highest already used in ``out_dir``, each claimed by
    creating its empty ``sample_NN.mid`` (which the caller then writes): nothing there is replaced."""
    used = [int(m.group(1)) for name in os.listdir(out_dir) if (m := SAMPLE_NAME.match(name))]
    number, claimed = max(used, default=-1) + 1, []
    while len(claimed) < count:
        if _create_new(out_dir / f"{sample_name(number)}.mid"):
            claimed.append(number)
        number += 1
    return claimed


def release_numbers(out_dir: Path, numbers: list[int]) -> None:
    """Remove the files of samples this run claimed but did not finish (its empty ``sample_NN.mid``, a
    half-written piano roll or WAV): the numbers were claimed by this run alone, so nothing else has them."""
    for number in numbers:
        for suffix in (".mid", ".png", ".wav"):
            (out_dir / f"{sample_name(number)}{suffix}").unlink(missing_ok=True)


def drop_empty_claims(out_dir: Path, numbers: list[int], record: Path) -> None:
    """After a failed write: remove the empty files this run claimed (a sample's ``.mid``, the record) and
    nothing else; what was written whole stays (each file is written atomically, `musictx.safe_output`)."""
    for path in [out_dir / f"{sample_name(n)}.mid" for n in numbers] + [record]:
        try:
            if path.stat().st_size == 0:
                path.unlink()
        except FileNotFoundError:
            pass


def claim_record_path(out_dir: Path) -> Path:
    """``generation.json``, or the first free ``generation_N.json`` (N = 2, 3, ...), created empty."""
    path, n = out_dir / RECORD, 1
    while not _create_new(path):
        n += 1
        path = out_dir / f"generation_{n}.json"
    return path


def _create_new(path: Path) -> bool:
    """Create ``path`` empty; False when something (a file, a folder, a link) already has that name."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    except FileExistsError:
        return False
    mark_created(path)  # this run's own name: its writer may replace the empty file
    return True


def describe_reuse(out_dir: Path, numbers: list[int], record: Path) -> str | None:
    """One line when the run's files are not the first names of an empty folder; None when they are."""
    if numbers[0] == 0 and record.name == RECORD:
        return None
    first, last = sample_name(numbers[0]), sample_name(numbers[-1])
    span = first if first == last else f"{first} to {last}"
    return (f"{out_dir} already holds earlier files: this run writes {span} and {record.name} beside them "
            "(nothing there is replaced or removed)")
