"""Byte-identical inputs (the same file under two names), found before the split so they share one.

A folder gathered from several places often holds one file twice (``song.mid`` and ``song (1).mid``, a
piece in two collections). The split hash sees two names and may send one copy to train and the other to
test: the test set would then be trained on. So the files are hashed (only those whose size another file
shares: reading them all would cost a folder of large files its time for nothing) and each group of
identical files joins the split group of its members (`data_prep.sources.piece_key`): the piece keys of a
group, and of any group linked to it through another copy, all draw their split by one key, the smallest.
Copies are kept, not merged (the user is told, in one line), as a folder of identical files is the user's
to tidy.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from collections.abc import Callable, Iterable

from musictx.listed import listed

_CHUNK = 1 << 20


def file_digest(path: str) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def identical_groups(files: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Groups (2 or more relative names, sorted) of byte-identical files among ``(path, rel)`` pairs. Empty
    files are not grouped (the prep skips each as empty), nor files that cannot be read (the tokenizer says
    why for each)."""
    by_size: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for path, rel in files:
        try:
            size = os.stat(path).st_size
        except OSError:
            continue
        if size:
            by_size[size].append((path, rel))
    by_digest: dict[str, list[str]] = defaultdict(list)
    for same_size in by_size.values():
        for path, rel in same_size if len(same_size) > 1 else ():
            try:
                by_digest[file_digest(path)].append(rel)
            except OSError:
                continue
    return sorted(sorted(g) for g in by_digest.values() if len(g) > 1)


def shared_keys(groups: list[list[str]], key: Callable[[str], str]) -> dict[str, str]:
    """{piece key: the key its split is drawn by} for the piece keys ``groups`` link (``key`` gives a name's
    piece key): each set of linked keys draws by its smallest key, so identical files share a split. Keys
    that no group names are not in the map (they keep their own)."""
    parent: dict[str, str] = {}

    def root(k: str) -> str:
        while parent.setdefault(k, k) != k:
            parent[k] = parent[parent[k]]  # path halving: later look-ups are short
            k = parent[k]
        return k

    for group in groups:
        first, *rest = (root(key(rel)) for rel in group)
        for other in rest:
            a, b = sorted((root(first), root(other)))
            parent[b] = a
    return {k: root(k) for k in list(parent)}


def describe(groups: list[list[str]], note: str) -> str:
    """The one line a run prints about ``groups`` (names made printable by the caller), naming a few groups
    and a few names of each (`musictx.listed`); ``note`` says what was done with them."""
    names = listed((listed(g, " = ", most=3) for g in groups), most=4)
    return (f"{len(groups)} group(s) of byte-identical input files ({sum(len(g) for g in groups)} files), "
            f"{note}: {names}")
