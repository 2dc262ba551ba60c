"""What a ``musictx-prep`` run tells its user: the summary it prints, ``skipped.tsv``, and the refusals of a
dataset with an empty split, each in one line that says why.

Two kinds of inputs go unused and both are listed in ``skipped.tsv``: files that cannot be used (corrupt,
empty, too long...: named one a line in the summary, as each is a problem to look at) and files left out by
choice (POP909's versions, `data_prep.pop_versions.choose_versions`: counted in one line by cause, as
there are hundreds and none is a problem).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from data_prep import pop_versions
from data_prep.safety import PrepError
from data_prep.splits import Piece
from musictx.io.jsonio import read_json_object

SHOWN = 10  # unusable files the summary names one a line


@dataclass
class SplitStats:
    files: int = 0
    notes: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def add(self, piece: Piece) -> None:
        self.files += 1
        self.notes += piece.notes
        self.tokens += piece.tokens
        self.seconds += piece.seconds


@dataclass
class PrepResult:
    """What a run wrote and left out: `print_summary` says it."""

    out_dir: Path
    stats: dict[str, SplitStats] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # unusable inputs, with the reason
    wall_s: float = 0.0
    moved: dict[str, str] = field(default_factory=dict)  # split key -> the empty split it was moved to
    left_out: list[tuple[str, str]] = field(default_factory=list)  # POP909 versions not used, with why
    notes: list[str] = field(default_factory=list)  # one line each: identical files, moves, empty splits


def printable(name: str) -> str:
    """``name`` on one line, for people: bytes that are not UTF-8 as ``\\xff``, tabs, line breaks and
    other control characters as escapes (the exact names are in ``<split>.files.txt``)."""
    name = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in name)


def write_skipped(path: Path, skipped: list[tuple[str, str]]) -> None:
    rows = "".join(f"{printable(p)}\t{printable(r)}\n" for p, r in skipped)
    path.write_text("path\treason\n" + rows, encoding="utf-8")


def kept(out_dir: Path) -> str:
    return "the previous dataset there is kept" if out_dir.exists() else "nothing was written"


def what_hash_sent(split: str, sent: list[str], inputs: str, reasons: dict[str, str]) -> str:
    """Why ``split`` got no usable piece from the split hash: it sent the split none of the ``inputs`` (how
    many, in words), or only ``sent``, which were all skipped (their most common reason)."""
    if not sent:
        return f"the split hash sent {split} none of the {inputs}"
    (reason, n), = Counter(reasons.get(rel, "?") for rel in sent).most_common(1)
    return (f"the split hash sent {split} {len(sent)} input file(s), all skipped "
            f"({'' if n == len(sent) else f'{n} of them: '}{printable(reason)})")


def train_spare(pieces: list[Piece], key: Callable[[str], str]) -> str:
    """Why no train piece was moved to fill a split: train keeps one split group (`data_prep.splits`: a file,
    or a folder with ``split.group_by=parent``, with its POP909 versions and byte-identical copies)."""
    train = [p.name for p in pieces if p.split == "train"]
    groups = len({key(name) for name in train})
    return f"train had none to spare (its {len(train)} piece(s) make {groups} split group(s), and it keeps one)"


def moved(key: str, split: str, n: int, why: str) -> str:
    """The line about a split key moved from train to fill ``split`` with its ``n`` pieces."""
    more = f" with {n - 1} more piece(s) of its split group" if n > 1 else ""
    return f"moved {printable(key)}{more} from train to {split}: {why}"


def most_often(skipped: list[tuple[str, str]]) -> str:
    """`` (most often: 2 x reason; ...)`` of the skipped inputs, '' for none: a refused run writes no skipped.tsv,
    so its one line is the only place a user learns why their files were not used."""
    common = "; ".join(f"{n} x {printable(reason)}" for reason, n in Counter(r for _, r in skipped).most_common(3))
    return f" (most often: {common})" if common else ""


def check_not_empty(stats: dict[str, SplitStats], skipped: list[tuple[str, str]], out_dir: Path) -> None:
    total = sum(s.files for s in stats.values())
    if total and stats["train"].files:
        return
    what = "no piece at all" if not total else f"no piece in the train split ({total} in the others)"
    raise PrepError(f"the new dataset for {out_dir} has {what}: {len(skipped)} input(s) skipped"
                    f"{most_often(skipped)}; {kept(out_dir)}. Pass allow_empty=true to write it anyway")


def empty_splits(fractions: dict[str, float], stats: dict[str, SplitStats], why: Callable[[str], str]) -> dict:
    """{split: one line} for each split asked for (fraction > 0) that still has no piece after the moves;
    ``why(split)`` says what the hash sent it and why train gave it nothing."""
    return {split: f"split.{split}={fraction} left the {split} split without a piece: {why(split)}"
            for split, fraction in fractions.items() if fraction > 0 and not stats[split].files}


def refuse_empty_splits(empty: dict[str, str], stats: dict[str, SplitStats], skipped: list, out_dir: Path) -> None:
    """Refuse a dataset where a split asked for still has no piece (`empty_splits`), with the numbers."""
    for split, line in empty.items():
        counts = ", ".join(f"{s.files} {name}" for name, s in stats.items())
        other = "" if split == "validation" else f", set split.{split}=0"
        raise PrepError(f"{line}; {sum(s.files for s in stats.values())} usable piece(s) ({counts}), {len(skipped)} "
                        f"input(s) skipped{most_often(skipped)}; {kept(out_dir)}. Add pieces{other}, or pass "
                        "allow_empty=true to write it anyway")


def previous_manifest(folder: Path) -> dict | None:
    """The manifest.json of the dataset in ``folder``, or None when there is none to read."""
    try:
        return read_json_object(folder / "manifest.json", "a dataset manifest")
    except (OSError, ValueError):
        return None


def replaced(out_dir: Path, old: dict | None, new: dict | None) -> list[str]:
    """The line about the dataset a run replaces (``old``: its manifest), naming what it was made with where
    ``new`` differs: the default output_dir (data/<source>) is the same for every folder, so a second run
    from another folder or with another tokenizer silently took the place of the first."""
    if old is None:
        return []
    new = new or {}
    was = [f"{key}={printable(str(old.get(key)))}" for key in ("source", "input_dir", "pop_versions")
           if old.get(key) != new.get(key)]
    kind = (old.get("tokenizer") or {}).get("kind")
    if kind != (new.get("tokenizer") or {}).get("kind"):
        was.append(f"tokenizer={kind}")
    elif old.get("tokenizer") != new.get("tokenizer"):
        was.append("other tokenizer settings")
    return [f"replaced the dataset that was in {out_dir}" + (f" (made with {', '.join(was)})" if was else "")]


def print_summary(res: PrepResult) -> None:
    print(f"\nwrote {res.out_dir} in {res.wall_s:.1f} s")
    print(f"{'split':<11}{'files':>7}{'notes':>11}{'tokens':>12}{'hours':>8}")
    for name, s in res.stats.items():
        print(f"{name:<11}{s.files:>7}{s.notes:>11}{s.tokens:>12}{s.seconds / 3600:>8.2f}")
    for line in res.notes:
        print(line)
    if not res.skipped and not res.left_out:
        return
    head = f"skipped {len(res.skipped) + len(res.left_out)} file(s), reasons in {res.out_dir / 'skipped.tsv'}"
    if res.left_out:  # versions left out by choice: counted by cause, never one a line (hundreds of them)
        head += f": {pop_versions.summary(res.left_out)}" + (f", {len(res.skipped)} unusable" if res.skipped else "")
    print(head + (":" if res.skipped else ""))
    for p, r in res.skipped[:SHOWN]:
        print(f"  {printable(p)}: {printable(r)}")
    if len(res.skipped) > SHOWN:
        print(f"  ... and {len(res.skipped) - SHOWN} more")
