"""Checks that run before musictx-prep does any work, and the care it takes with the output folder.

musictx-prep replaces ``output_dir`` as a whole, so it must never be pointed at something that is not
a dataset it wrote: the input files, a parent of them, or any other folder. Options are checked up
front, so that a typo (``reader=symusik``, ``timeout_s=0``) fails in a second with a message instead
of skipping every file. Temporary folders are named ``.<output>.tmp-<host>-<pid>`` so that a later
run can tell those of dead processes (killed with ``kill -9``, a lost node) and remove them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
from numbers import Real
from pathlib import Path

from musictx.io.midi_io import READERS
from musictx.io.token_store import SPLITS
from musictx.io.tokenizers import KINDS
from musictx.paths import conf_values

SOURCES = ("bach", "folder", "folk", "maestro")
DATASET_FILES = {"tokenizer.json", "manifest.json", "skipped.tsv", "ngram_index.npy"} | {
    f"{s}{ext}" for s in SPLITS for ext in (".bin", ".idx.npy", ".files.txt")}


class PrepError(ValueError):
    """An option or an output folder that musictx-prep refuses; the message says why and what to do."""


def check_option_names(cfg: dict) -> None:
    """Refuse keys prepare.yaml does not have (a ``+typo=...`` would otherwise be ignored) and keys it has that
    ``cfg`` lacks, nested ones included."""
    tokenizer = cfg.get("tokenizer")
    kind = tokenizer.get("kind", "performance") if isinstance(tokenizer, dict) else "performance"
    if kind not in KINDS:
        raise PrepError(f"tokenizer.kind={kind!r}: use tokenizer=<one of {', '.join(KINDS)}>")
    known = conf_values("prepare", tokenizer=kind)  # the chosen tokenizer's keys
    unknown = _extra_keys(cfg, known)
    if unknown:
        raise PrepError(f"unknown option(s): {', '.join(unknown)} (see musictx/conf/prepare.yaml for the options)")
    missing = _extra_keys(known, cfg)
    if missing:
        raise PrepError(f"missing option(s): {', '.join(missing)} (see musictx/conf/prepare.yaml for the options)")


def check_options(cfg: dict) -> None:
    """Refuse out-of-range values before any work. ``cfg``: musictx-prep's options as a plain dict
    (`data_prep.options.PrepOptions.to_mapping`); their names were checked when the options were built
    (`PrepOptions.from_mapping` calls `check_option_names`), a dataclass cannot gain or lose one since."""
    if cfg["source"] not in SOURCES:
        raise PrepError(f"source must be one of {', '.join(SOURCES)}; got {cfg['source']!r}")
    if cfg["reader"] not in READERS:
        raise PrepError(f"reader={cfg['reader']!r} is not a MIDI reader; choose one of {', '.join(sorted(READERS))}")
    if cfg.get("fallback_reader") is not None and cfg["fallback_reader"] not in READERS:
        raise PrepError(f"fallback_reader={cfg['fallback_reader']!r} is not a MIDI reader; choose one of "
                        f"{', '.join(sorted(READERS))} or null")
    if cfg["pop_versions"] not in ("skip", "train"):
        raise PrepError(f"pop_versions must be skip or train; got {cfg['pop_versions']!r}")
    _check_number(cfg, "num_workers", lambda v: v >= 0 and v == int(v), "a whole number >= 0")
    _check_number(cfg, "timeout_s", lambda v: v > 0, "> 0 seconds")
    _check_number(cfg, "max_memory_gb", lambda v: v >= 0, ">= 0 (0 = no limit)")
    _check_number(cfg, "max_seconds", lambda v: v >= 0, ">= 0 (0 = no limit)")
    _check_number(cfg, "folk_plays", lambda v: v >= 1 and v == int(v), "a whole number >= 1 (times through each tune)")
    _check_split(cfg)


def _extra_keys(given: dict, known: dict, prefix: str = "") -> list[str]:
    """The dotted names of the keys of ``given`` that ``known`` lacks."""
    out = []
    for key, value in given.items():
        if key not in known:
            out.append(f"{prefix}{key}")
        elif isinstance(value, dict) and isinstance(known[key], dict):
            out += _extra_keys(value, known[key], f"{prefix}{key}.")
    return out


def _check_number(cfg: dict, key: str, ok, wanted: str) -> None:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, Real) or not ok(value):
        raise PrepError(f"{key} must be {wanted}; got {value!r}")


def _check_split(cfg: dict) -> None:
    s = cfg["split"]
    for key in ("validation", "test"):
        value = s[key]
        if isinstance(value, bool) or not isinstance(value, Real) or not 0 <= value < 1:
            raise PrepError(f"split.{key} must be a fraction in [0, 1); got {value!r}")
    if s["validation"] + s["test"] >= 1:
        raise PrepError(f"split fractions must sum below 1 (train gets the rest); got validation={s['validation']} "
                        f"+ test={s['test']}")
    if s["group_by"] not in ("file", "parent"):
        raise PrepError(f"split.group_by must be 'file' or 'parent'; got {s['group_by']!r}")
    # MAESTRO's CSV fixes the splits; elsewhere a validation fraction of 0 makes a dataset training refuses.
    if cfg["source"] != "maestro" and s["validation"] == 0 and not cfg.get("allow_empty"):
        raise PrepError("split.validation=0 leaves no validation split, and musictx-train needs one; "
                        "give a fraction such as split.validation=0.1 (or allow_empty=true to write it anyway)")


def check_output_dir(out_dir: Path, inputs: dict[str, Path]) -> None:
    """Refuse an output folder that overlaps an input (``inputs``: option name -> folder) or that exists
    and is neither empty nor a dataset written by musictx-prep."""
    out = out_dir.resolve()
    for name, folder in inputs.items():
        inp = folder.resolve()
        if _same(out, inp) or any(_same(out, p) for p in inp.parents):
            where = "is" if _same(out, inp) else "is a parent of"
            raise PrepError(f"output_dir={out_dir} {where} {name}={folder}: musictx-prep replaces output_dir "
                            f"as a whole and would delete the input; choose another output_dir")
        if any(_same(inp, p) for p in out.parents):
            raise PrepError(f"output_dir={out_dir} is inside {name}={folder}: the dataset would mix with the "
                            f"input files; choose an output_dir outside it")
    check_replaceable(out_dir)


def _same(a: Path, b: Path) -> bool:
    """One folder, also under two spellings that resolve() keeps apart (case-insensitive file systems)."""
    try:
        return a == b or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def check_replaceable(out_dir: Path) -> None:
    """Refuse an existing ``out_dir`` that musictx-prep may not replace."""
    if not (out_dir.exists() or out_dir.is_symlink()):
        return
    if not out_dir.is_dir():
        raise PrepError(f"output_dir={out_dir} exists and is not a folder; choose another output_dir")
    entries = sorted(p.name for p in out_dir.iterdir())
    if not entries:
        return
    if not is_dataset_dir(out_dir):
        raise PrepError(f"output_dir={out_dir} is not a musictx dataset (no manifest.json written by musictx-prep)"
                        f" and not empty, so it is not replaced; choose another output_dir or empty it yourself")
    foreign = [n for n in entries if n not in DATASET_FILES]
    if foreign:
        raise PrepError(f"output_dir={out_dir} holds files musictx-prep did not write ({', '.join(foreign[:5])}"
                        f"{', ...' if len(foreign) > 5 else ''}), which replacing it would delete; move them first")


def is_dataset_dir(folder: Path) -> bool:
    """Whether ``folder`` holds a manifest.json as musictx-prep writes it."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and {"tokenizer", "splits"} <= manifest.keys()


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


def temp_name(out_dir: Path, kind: str) -> Path:
    """The hidden sibling of ``out_dir`` this process writes into (``kind`` "tmp") or moves it to ("old")."""
    return out_dir.parent / f".{out_dir.name}.{kind}-{_host()}-{os.getpid()}"


def clean_stale(out_dir: Path) -> list[Path]:
    """Remove the temporary siblings of ``out_dir`` left by dead processes of this host; returns them.

    A run killed between its two renames leaves the previous dataset as ``.old-*`` and no ``out_dir``:
    that one is moved back rather than removed.
    """
    if not out_dir.parent.is_dir():
        return []
    pattern = re.compile(rf"\.{re.escape(out_dir.name)}\.(tmp|old)-(?:(.+)-)?(\d+)")
    removed = []
    for path in sorted(out_dir.parent.iterdir()):
        m = pattern.fullmatch(path.name)
        if not m or (m[2] is not None and m[2] != _host()) or _alive(int(m[3])):
            continue
        if m[1] == "old" and not out_dir.exists() and is_dataset_dir(path):
            os.replace(path, out_dir)
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process, or not a pid we can ask about: leave its folder alone
    return True
