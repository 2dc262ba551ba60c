"""A folder as a few files of bounded size, and back: how a GPU call's trained models travel home.

The device tool brings back at most 8 files of at most 16 MiB each. A training run exports a folder
(config.json, the fp16 shards, train.json); `write_bundle` packs it into an uncompressed tar cut into parts
``NAME.tar.K-of-N`` under ``max_part_mb`` each, so three runs side by side fit in 7 files. `read_bundle`
puts the parts back together and unpacks them, refusing a set whose parts are missing or from two exports.
"""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

PART = re.compile(r"^(?P<name>.+)\.tar\.(?P<k>\d+)-of-(?P<n>\d+)$")


def write_bundle(folder: Path, target: Path, max_part_mb: float) -> list[Path]:
    """Pack ``folder``'s files into ``target.tar.K-of-N`` parts of at most ``max_part_mb`` (each written to a
    temporary name and renamed, so a part is whole or absent); parts of an older export with another N go."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
            tar.add(path, arcname=str(path.relative_to(folder)))
    data = buf.getvalue()
    size = max(int(max_part_mb * 2**20), 1)
    n = max(1, -(-len(data) // size))
    target.parent.mkdir(parents=True, exist_ok=True)
    parts = []
    for k in range(n):
        part = target.parent / f"{target.name}.tar.{k + 1}-of-{n}"
        tmp = part.with_name("." + part.name + ".tmp")
        tmp.write_bytes(data[k * size:(k + 1) * size])
        tmp.replace(part)
        parts.append(part)
    for *_, old in bundle_parts(target.parent, target.name):
        if old not in parts:
            old.unlink(missing_ok=True)
    return parts


def bundle_parts(where: Path, name: str) -> list[tuple[int, int, Path]]:
    """(N, K, path) of every part of bundle ``name`` in ``where``, whatever its N, in order."""
    found = []
    for path in Path(where).glob(f"{name}.tar.*-of-*"):
        m = PART.match(path.name)
        if m and m["name"] == name:
            found.append((int(m["n"]), int(m["k"]), path))
    return sorted(found)


def bundle_names(where: Path) -> list[str]:
    """The bundles in ``where`` (each name once)."""
    return sorted({m["name"] for p in Path(where).iterdir() if (m := PART.match(p.name))})


def read_bundle(where: Path, name: str, dest: Path) -> Path:
    """Unpack bundle ``name`` found in ``where`` into ``dest``; a clear error when a part is missing, two
    exports' parts are mixed, or the tar is cut short."""
    parts = bundle_parts(where, name)
    if not parts:
        raise FileNotFoundError(f"{where}: no parts of bundle {name!r} ({name}.tar.K-of-N)")
    counts = sorted({n for n, _, _ in parts})
    if len(counts) != 1:
        raise ValueError(f"{where}: bundle {name!r} has parts of two exports (of-{counts})")
    n = counts[0]
    have = [k for _, k, _ in parts]
    if have != list(range(1, n + 1)):
        missing = sorted(set(range(1, n + 1)) - set(have))
        raise ValueError(f"{where}: bundle {name!r} misses part(s) {missing} of {n} (the call was cut?)")
    data = b"".join(path.read_bytes() for *_, path in parts)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, EOFError) as err:
        raise ValueError(f"{where}: bundle {name!r} is not a whole tar ({err}): parts from two exports?") from err
    return dest
