"""JSON records that are always valid JSON.

``json.dumps`` writes a float NaN or infinity as the bare words ``NaN`` / ``Infinity``, which strict JSON
readers (``jq``, JavaScript, most other languages) reject. Records written by the commands go through
`to_json`: such numbers become ``null`` and the caller learns where they were.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from musictx.safe_output import write_text


def finite_only(obj, where: str = "", found: list[str] | None = None):
    """A copy of ``obj`` (dicts, lists, tuples, numbers, numpy scalars) with every NaN or infinity replaced
    by None; the dotted paths of the replaced values are appended to ``found``."""
    if isinstance(obj, dict):
        return {k: finite_only(v, f"{where}.{k}" if where else str(k), found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_only(v, f"{where}[{i}]", found) for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        if found is not None:
            found.append(where or "<value>")
        return None
    return obj


def to_json(obj, indent: int = 2) -> tuple[str, list[str]]:
    """(strict JSON text ending with a newline, paths of the non-finite numbers written as null)."""
    found: list[str] = []
    text = json.dumps(finite_only(obj, found=found), indent=indent, allow_nan=False)
    return text + "\n", found


def write_json(path: str | os.PathLike, obj, what: str = "record") -> Path:
    """Write ``obj`` as strict JSON; warn (one line on stdout) when non-finite numbers became null."""
    text, found = to_json(obj)
    path = write_text(path, text)  # atomic: a failure leaves the whole record or none
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        print(f"warning: {path}: non-finite {what} value(s) written as null: {shown}")
    return path


def read_json_object(path: str | os.PathLike, what: str) -> dict:
    """The JSON object in the file ``path``; ValueError naming the file and ``what`` it should be when it is not
    one (a README given as a tokenizer file raised a bare JSONDecodeError, no file named)."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not {what} (not JSON: {err})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: not {what} (JSON, but a {type(obj).__name__}, not an object)")
    return obj
