"""The job behind ``musictx-prep`` (the command line is `musictx.commands.prep`): tokenize every MIDI file
in parallel and write memory-mappable token arrays. It takes `data_prep.options.PrepOptions`, never a Hydra
config, so tests and benches run it without Hydra.

Writes the format described in ``musictx.io.token_store``. A file that cannot be used (corrupt, empty,
only drums, too long, hangs, exhausts memory) is listed in ``skipped.tsv`` with the reason and the run
goes on; so is each POP909 version left out (`data_prep.report` says what the user is told, and which
dataset a re-run replaced).
Byte-identical inputs share a split (`data_prep.identical`). Output is byte-identical on re-runs, and
written atomically: an interrupted run leaves the previous complete dataset (or nothing), never half of
one. Options and the output folder are checked before any work (``data_prep.safety``): only an empty
folder or a dataset musictx-prep wrote is ever replaced, never the input, and never by a dataset without
pieces (unless ``allow_empty=true``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from data_prep import identical, pop_versions, report, sources
from data_prep.bach import export_chorales
from data_prep.folk import export_folk
from data_prep.options import PrepOptions
from data_prep.pool import TaskError, run_tasks
from data_prep.report import PrepResult, SplitStats
from data_prep.safety import (
    SOURCES,
    PrepError,
    check_options,
    check_output_dir,
    check_replaceable,
    clean_stale,
    temp_name,
)
from data_prep.splits import Piece, choose_moves, move_pieces
from musictx.ctrl_c import remembered_ctrl_c
from musictx.io.midi_io import MidiReadError
from musictx.io.ngram_index import INDEX_FILE, build_index, position_ngrams, save_index
from musictx.io.token_store import SPLITS, SplitWriter, TokenArrays, read_file_names
from musictx.io.tokenizer import EventTokenizer
from musictx.io.tokenizers import is_metrical, make_tokenizer, tokenizer_from_dict

_TOKENIZERS: dict[str, EventTokenizer] = {}


def read_with_fallback(tok: EventTokenizer, path: str, reader: str, fallback: str | None):
    """Notes of ``path``; a file the fast reader rejects gets a second chance with the fallback."""
    try:
        return tok.read(path, reader=reader)
    except MidiReadError as err:
        if not fallback or fallback == reader or not err.reason.startswith("unreadable"):
            raise
        try:
            return tok.read(path, reader=fallback)
        except MidiReadError as err2:
            raise MidiReadError(path, f"{err.reason}; {fallback}: {err2.reason}") from None


def tokenize_file(job: tuple[str, dict, str, str | None, float]) -> dict | TaskError:
    """Worker task: ids (uint16, ending in EOS) and counts of one file, or the reason it is unusable."""
    path, tok_dict, reader, fallback, max_seconds = job
    key = json.dumps(tok_dict, sort_keys=True)
    tok = _TOKENIZERS.get(key) or _TOKENIZERS.setdefault(key, tokenizer_from_dict(tok_dict))
    if is_metrical(tok):
        return _tokenize_metrical(tok, path, max_seconds)
    # A POP909 version is read as every file: its tracks become one stream, so their names (roles) change
    # nothing, and seconds have no bars for its melody to be checked against (`data_prep.pop_versions`).
    try:
        notes = read_with_fallback(tok, path, reader, fallback)
        seconds = notes.duration()
        if max_seconds and seconds > max_seconds:
            return TaskError(f"too long ({seconds:.0f} s > max_seconds={max_seconds:g})")
        ids = tok.encode_notes(notes)
    except MidiReadError as err:
        return TaskError(err.reason)
    if len(ids) == 0:
        return TaskError("no notes inside the tokenizer's pitch range")
    ids = np.append(ids, tok.eos_id).astype(np.uint16)
    return {"ids": ids, "notes": int(len(notes)), "seconds": seconds}


def _tokenize_metrical(tok, path: str, max_seconds: float) -> dict | TaskError:
    """The same for a metrical tokenizer: the bars come from a ``beat_midi.txt`` beside the file when there
    is one (POP909), else from the file's own meter. A POP909 version (listed only with
    ``pop_versions=train``) gets its tracks' roles and its song's beat file (`data_prep.pop_versions`)."""
    try:
        if sources.main_of(Path(path).as_posix()) is not None and pop_versions.main_path(path) is not None:
            version, shift = pop_versions.read_version(path)
            read, source = tok.read(version, beats=None), None
            chords = pop_versions.version_chords(path, version.ticks_per_quarter, shift) if tok.chords else None
        else:
            read, source, chords = tok.read(path), path, None
    except (MidiReadError, ValueError) as err:  # VersionSkipped too
        return TaskError(getattr(err, "reason", str(err)))
    except RuntimeError as err:  # symusic on a version it cannot parse
        return TaskError(f"unreadable MIDI ({str(err).strip() or type(err).__name__})")
    score = read.score
    seconds = float(score.to("second").end())
    if max_seconds and seconds > max_seconds:
        return TaskError(f"too long ({seconds:.0f} s > max_seconds={max_seconds:g})")
    if chords is None:  # with chord events: the chord file beside the song, else chords guessed from its notes
        ids = tok.encode_read(read, source)
    else:  # a version: its main file's chords
        ids = tok.add_chords(tok.encode_score(score), score.ticks_per_quarter, *chords)
    if len(ids) == 0:
        return TaskError("no notes inside the tokenizer's pitch range")
    ids = np.append(ids, tok.eos_id).astype(np.uint16)
    return {"ids": ids, "notes": int(score.note_num()), "seconds": seconds}


def split_stats(pieces: list[Piece]) -> dict[str, SplitStats]:
    stats = {name: SplitStats() for name in SPLITS}
    for piece in pieces:
        stats[piece.split].add(piece)
    return stats


@dataclass
class Listing:
    """The inputs of a run before tokenizing, each file with its split."""

    root: Path
    files: list[sources.SourceFile]
    skipped: list[tuple[str, str]]  # known to be unusable already (not a regular file, missing...)
    left_out: list[tuple[str, str]]  # POP909 versions not used (`pop_versions.choose_versions`)
    identical: list[list[str]]  # groups of byte-identical files (`data_prep.identical`)
    shared: dict[str, str]  # piece key -> the key its split is drawn by, for the keys identical files link

    def split_key(self, group_by: str):
        """The split key of a file's relative name (`data_prep.sources.split_key`)."""
        return lambda rel: sources.split_key(rel, group_by, self.shared)


def _list_files(opts: PrepOptions) -> tuple[Path, list[sources.SourceFile], list[tuple[str, str]]]:
    """(input root, files without splits but MAESTRO's, files already known to be unusable)."""
    skipped: list[tuple[str, str]] = []
    if opts.source == "bach":
        root = Path(opts.bach_cache_dir)
        skipped = export_chorales(root, num_workers=opts.num_workers, timeout=max(opts.timeout_s, 120),
                                  limit=opts.bach_limit)
        files = sources.list_folder(root)
        if opts.bach_limit:
            files = files[: opts.bach_limit]
    elif opts.source == "folk":
        root = Path(opts.folk_cache_dir)
        skipped = export_folk(root, list(opts.folk_collections), bpm=opts.folk_bpm, num_workers=opts.num_workers,
                              timeout=max(opts.timeout_s, 600), limit=opts.folk_limit,
                              plays=opts.folk_plays)
        files = sources.list_folder(root)
    elif opts.source == "folder":
        root = _input_dir(opts)
        files, skipped = sources.scan_folder(root)
    elif opts.source == "maestro":
        root = _input_dir(opts)
        files, skipped = sources.list_maestro(root)
    else:
        raise PrepError(f"source must be one of {', '.join(SOURCES)}; got {opts.source!r}")
    return root, files, skipped


def list_sources(opts: PrepOptions) -> Listing:
    """The inputs with their splits: byte-identical files share one (but where MAESTRO's CSV decides), and
    POP909's versions are kept or left out by ``pop_versions`` (`data_prep.pop_versions.choose_versions`)."""
    root, files, skipped = _list_files(opts)
    s = opts.split
    # with pop_versions=skip no version is read: it need not share a split with anything
    versions = pop_versions.versions_of(files) if opts.pop_versions != "train" else set()
    groups = identical.identical_groups((f.path, f.rel) for f in files if f.rel not in versions)
    by_key = identical.shared_keys(groups, lambda rel: sources.piece_key(rel, s.group_by))
    shared = {} if opts.source == "maestro" else by_key  # the CSV's splits are the user's: never changed
    files = sources.assign_splits(files, s.validation, s.test, s.group_by, shared)
    files, left_out = pop_versions.choose_versions(files, opts.pop_versions)
    return Listing(root, files, skipped, left_out, groups, shared)


def with_versions(files: list[sources.SourceFile], mode: str) -> list[sources.SourceFile]:
    """``files`` with POP909's versions left out (``skip``) or kept in their train songs' split (``train``)."""
    return pop_versions.choose_versions(files, mode)[0]


def _identical_note(opts: PrepOptions, listing: Listing) -> list[str]:
    """The line about byte-identical inputs, when there are any."""
    if not listing.identical:
        return []
    if opts.source == "maestro":
        split_of = {f.rel: f.split for f in listing.files}
        across = sum(len({split_of.get(rel) for rel in g}) > 1 for g in listing.identical)
        note = f"split as MAESTRO's CSV says ({across} group(s) across splits: check the CSV)"
    else:
        note = "each group kept in one split (copies are not merged)"
    return [identical.describe([[report.printable(rel) for rel in g] for g in listing.identical], note)]


def _input_dir(opts: PrepOptions) -> Path:
    if not opts.input_dir:
        raise PrepError(f"source={opts.source} needs input_dir=<folder of MIDI files>")
    return Path(opts.input_dir)


def check_before_work(opts: PrepOptions) -> Path:
    """Validate the options and the output folder; returns the output folder (symlinks resolved)."""
    check_options(opts.to_mapping())
    caches = {"bach": "bach_cache_dir", "folk": "folk_cache_dir"}
    key = caches.get(opts.source)
    inputs = {key: Path(getattr(opts, key))} if key else {"input_dir": _input_dir(opts)}
    check_output_dir(Path(opts.output_dir), inputs)
    return Path(opts.output_dir).resolve()


def tokenize_all(files, tok: EventTokenizer, opts: PrepOptions, out_dir: Path, progress: bool = True):
    """Tokenize in parallel and stream the pieces, in input order, into one writer per split; returns the
    pieces written and the files skipped."""
    writers = {name: SplitWriter(out_dir, name) for name in SPLITS}
    pieces, skipped, pending, next_i = [], [], {}, 0
    jobs = [(f.path, tok.to_dict(), opts.reader, opts.fallback_reader, opts.max_seconds) for f in files]
    bar = tqdm(total=len(jobs), desc="tokenize", unit="file", disable=not progress)
    for i, result in run_tasks(tokenize_file, jobs, num_workers=opts.num_workers, timeout=opts.timeout_s,
                               max_memory_gb=opts.max_memory_gb):
        pending[i] = result
        # Results arrive in completion order; write them in input order for byte-identical output.
        while next_i in pending:
            res, f = pending.pop(next_i), files[next_i]
            if isinstance(res, TaskError):
                skipped.append((f.rel, res.reason))
            else:
                writers[f.split].add(res["ids"], f.rel)
                pieces.append(Piece(f.split, f.rel, len(res["ids"]), res["notes"], res["seconds"]))
            next_i += 1
        bar.update()
        bar.set_postfix(skipped=len(skipped))
    bar.close()
    for w in writers.values():
        w.close()
    return pieces, skipped


def write_dataset(opts: PrepOptions, progress: bool = True) -> PrepResult:
    """The whole job; writes into a temporary folder and swaps it into place at the end. Raises PrepError
    (bad options, output folder, or no usable piece) or FileNotFoundError (no input) with a message."""
    t0 = time.perf_counter()
    out_dir = check_before_work(opts)
    tok = make_tokenizer(dict(opts.tokenizer))
    clean_stale(out_dir)  # may move back a dataset a killed run left aside: read what is replaced after it
    before = report.previous_manifest(out_dir)
    listing = list_sources(opts)
    if not listing.files:
        raise FileNotFoundError(f"no MIDI files (.mid/.midi) found for source={opts.source} under {listing.root}")
    tmp = temp_name(out_dir, "tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:  # from the mkdir on: a Ctrl-C right after it must not leave the empty folder behind
        tmp.mkdir(parents=True)
        # A Ctrl-C that Python swallowed in a GC callback ("Exception ignored") is remembered and acted on
        # here: a fresh-clone CI run saw an interrupted prep finish and swap its dataset in, three times.
        with remembered_ctrl_c() as pressed:
            pieces, bad = tokenize_all(listing.files, tok, opts, tmp, progress)
            if pressed():
                raise KeyboardInterrupt
        res = _settle_splits(opts, listing, pieces, sorted(listing.skipped + bad), tmp, out_dir)
        res.notes += _versions_note(opts, tok, listing, tmp)
        if is_metrical(tok):
            write_memorization_index(tok, tmp, progress)
        tok.save(tmp / "tokenizer.json")
        rows = sorted(res.skipped + res.left_out)  # skipped.tsv names every input not used
        _write_manifest(tmp / "manifest.json", opts, tok, res.stats, len(rows), res.moved)
        report.write_skipped(tmp / "skipped.tsv", rows)
        res.notes += report.replaced(out_dir, before, report.previous_manifest(tmp))
        _swap_into_place(tmp, out_dir)
    except BaseException:  # Ctrl-C included: drop the partial output, keep the previous dataset
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    res.wall_s = time.perf_counter() - t0
    return res


def _versions_note(opts: PrepOptions, tok: EventTokenizer, listing: Listing, tmp: Path) -> list[str]:
    """The line about the POP909 versions the performance tokenizer merged into one stream (none for REMI,
    which maps their roles and lists each version it leaves out)."""
    if is_metrical(tok) or opts.pop_versions != "train":
        return []
    versions = pop_versions.versions_of(listing.files)
    return pop_versions.one_stream_note([n for n in read_file_names(tmp / "train.files.txt") if n in versions])


def _settle_splits(opts: PrepOptions, listing: Listing, pieces: list[Piece], skipped: list[tuple[str, str]],
                   tmp: Path, out_dir: Path) -> PrepResult:
    """Fill the splits the hash left empty (`data_prep.splits`) and refuse those that stay empty (unless
    ``allow_empty``); the result, with a line for each move, each empty split and the identical inputs."""
    fractions = {"validation": opts.split.validation, "test": opts.split.test}
    key = listing.split_key(opts.split.group_by)
    reasons = dict(skipped)
    inputs = f"{len(listing.files)} input file(s) in {len({key(f.rel) for f in listing.files})} split group(s)"

    def sent(split: str) -> str:
        rels = [f.rel for f in listing.files if f.split == split]
        return report.what_hash_sent(split, rels, inputs, reasons)

    moves, dropped, notes = {}, [], _identical_note(opts, listing)
    if opts.source != "maestro":  # MAESTRO's CSV decides its splits: nothing is moved there
        versions = frozenset(pop_versions.versions_of(listing.files))
        moves = choose_moves(pieces, fractions, key, versions)
        pieces, dropped = move_pieces(tmp, pieces, moves, key, versions)
        notes += [report.moved(k, split, sum(key(p.name) == k for p in pieces), sent(split))
                  for k, split in moves.items()]
    left_out = sorted(listing.left_out + [(p.name, pop_versions.held_out(p.split, moved=True)) for p in dropped])
    stats = split_stats(pieces)
    empty = {} if opts.source == "maestro" else report.empty_splits(
        fractions, stats, lambda split: f"{sent(split)}, and {report.train_spare(pieces, key)}")
    if not opts.allow_empty:
        report.check_not_empty(stats, skipped, out_dir)
        report.refuse_empty_splits(empty, stats, skipped, out_dir)
    notes += [f"{line}; written anyway (allow_empty=true)" for line in empty.values()]
    return PrepResult(out_dir, stats, skipped, 0.0, moves, left_out, notes)


def write_memorization_index(tok, out_dir: Path, progress: bool = True) -> None:
    """``ngram_index.npy``: every 8 consecutive (pitch, position in bar) notes of the train split, hashed, for
    the scorecard's memorization check (`musictx.io.ngram_index`)."""
    arrays = TokenArrays(out_dir, "train")
    hashes = [position_ngrams(*tok.pitch_positions(arrays.piece(i)))
              for i in tqdm(range(len(arrays)), desc="memorization index", unit="piece", disable=not progress)]
    save_index(build_index(hashes), out_dir / INDEX_FILE)


def _write_manifest(path: Path, opts: PrepOptions, tok, stats, n_skipped: int, moved: dict[str, str]) -> None:
    manifest = {
        "source": opts.source,
        "input_dir": os.path.abspath(opts.input_dir) if opts.input_dir and opts.source != "bach" else None,  # anywhere
        "reader": opts.reader,
        "split": asdict(opts.split),
        "pop_versions": opts.pop_versions,
        "tokenizer": tok.to_dict(),
        "splits": {k: {**vars(v), "seconds": round(v.seconds, 3)} for k, v in stats.items()},
        "skipped": n_skipped,
        "moved_to_empty_splits": moved,
    }
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _swap_into_place(tmp: Path, out_dir: Path) -> None:
    check_replaceable(out_dir)  # again: the folder may have changed during the run
    old = temp_name(out_dir, "old")
    if out_dir.exists():
        os.replace(out_dir, old)
    os.replace(tmp, out_dir)
    shutil.rmtree(old, ignore_errors=True)


def run(opts: PrepOptions) -> PrepResult:
    """What ``musictx-prep`` does: write the dataset with a progress bar, then print its summary."""
    res = write_dataset(opts)
    report.print_summary(res)
    return res
