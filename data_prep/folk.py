"""Repetition-rich real music: the folk-tune collections of the music21 corpus, played as performances.

Why: performed classical piano rarely repeats literally, so a model trained on it learns to continue a
repeat once one has begun, but not to *start* one. Folk tunes are built of sections that come back at
phrase starts (AABB, written with repeat marks), which is the structure a continuation of a motif needs.

Each tune of an ABC collection (O'Neill's 1850, Ryan's Mammoth, Aird's Airs, the Essen folk songs ...)
becomes one MIDI file in a cache folder; musictx-prep then reads the folder as usual. The score becomes
a performance by these rules:
- repeat marks are played out (music21 ``expandRepeats``); a tune whose marks are malformed is kept as
  written, and counted in the summary line;
- tempo: the score's metronome mark if it has one (clipped to 40-240), else ``bpm`` quarter notes a minute;
- velocity by metric position: 84 on the first beat of a bar, 72 on other beats, 64 off the beat
  (the plain accents a fiddler or a pianist gives a dance tune);
- each note sounds 95% of its written length, so that repeated notes are struck again; grace notes
  (no written length) and chord symbols are left out;
- ``plays`` times through (musictx-prep's ``folk_plays``): a dance tune is played two or three times in a
  row at a session, and a song has verses, so with ``plays`` > 1 the tune starts again on the beat where
  its last bar ends. That is where the data shows a phrase coming back after a cadence.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from tqdm import tqdm

from data_prep.pool import TaskError, run_tasks

DOWNBEAT, ON_BEAT, OFF_BEAT = 84, 72, 64
LEGATO = 0.95
TEMPO_RANGE = (40.0, 240.0)
# Score formats music21 reads: the folk collections are ABC; the composers' folders (held-out music for
# evaluation: music no model here trained on) are MusicXML and Humdrum.
SCORE_SUFFIXES = (".abc", ".mxl", ".xml", ".musicxml", ".krn")
DONE = "export.json"  # per score file: what was written from it, so a second run only reads the MIDI files


def _corpus_root() -> Path:
    """The folder of music21's corpus: its collections ship inside the music21 package."""
    try:
        from music21 import corpus
    except ImportError as err:
        raise ImportError("source=folk needs music21: pip install 'musictx[corpus]'") from err
    return Path(corpus.__file__).parent


def collection_files(collections) -> list[tuple[str, Path]]:
    """(collection, score file) for every file of the named music21 corpus collections, sorted."""
    root = _corpus_root()
    out = []
    for name in collections:
        folder = root / name
        if not folder.is_dir():
            known = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_"))
            raise FileNotFoundError(f"folk_collections: {name!r} is not a music21 corpus collection "
                                    f"(there are: {', '.join(known)})")
        out += [(name, p) for p in sorted(folder.rglob("*")) if p.suffix.lower() in SCORE_SUFFIXES]
    return out


def one_format_each(files: list[tuple[str, Path]]) -> tuple[list[tuple[str, Path]], list[str]]:
    """``files`` with one file per work: where a work ships in two formats (beethoven/opus18no1/movement3 is
    both .krn and .mxl) the first of SCORE_SUFFIXES' order is kept, so no music is counted twice; returns
    the files kept and the names of those left out."""
    rank = {suffix: i for i, suffix in enumerate(SCORE_SUFFIXES)}
    best: dict[tuple[str, Path], tuple[str, Path]] = {}
    for c, p in files:
        key = (c, p.with_suffix(""))
        if key not in best or rank[p.suffix.lower()] < rank[best[key][1].suffix.lower()]:
            best[key] = (c, p)
    chosen = set(best.values())
    kept = [f for f in files if f in chosen]
    left = [f"{_cache_folder(Path(), c, p)}{p.suffix}" for c, p in files if (c, p) not in chosen]
    return kept, left


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text or "").strip("_")[:40] or "untitled"


def _accent(in_bar: float, beat_ql: float) -> int:
    """Velocity of a note ``in_bar`` quarter notes after its bar line, in a metre of ``beat_ql`` beats."""
    on_beat = abs(in_bar / beat_ql - round(in_bar / beat_ql)) < 1e-6
    return DOWNBEAT if abs(in_bar) < 1e-6 else ON_BEAT if on_beat else OFF_BEAT


def _timed_notes(played) -> list[tuple[float, float, int, tuple]]:
    """(start in quarter notes, length in quarter notes, velocity, pitches) of every note of a score,
    accented by its place in the bar (see the module docstring)."""
    from music21 import harmony, meter

    out = []
    for part in played.parts:
        sig = next(iter(part.recurse().getElementsByClass(meter.TimeSignature)), None)
        beat_ql = float(sig.beatDuration.quarterLength) if sig else 1.0
        bar_ql = float(sig.barDuration.quarterLength) if sig else 4.0
        measures = list(part.getElementsByClass("Measure"))
        # Some ABC barlines leave a part without measures: then the bar lines are every bar_ql from the start.
        bars = [(m, float(m.paddingLeft or 0)) for m in measures] or [(part.flatten(), None)]
        for bar, padding in bars:
            if padding is not None and bar.timeSignature is not None:
                beat_ql = float(bar.timeSignature.beatDuration.quarterLength) or 1.0
            for el in bar.notes:
                if isinstance(el, harmony.Harmony) or el.quarterLength <= 0:
                    continue
                # a pickup bar starts part-way through: its padding is the part of the bar it lacks
                in_bar = float(el.offset) + padding if padding is not None else float(el.offset) % bar_ql
                start = float(el.offset) + (float(part.offset + bar.offset) if padding is not None else 0.0)
                out.append((start, float(el.quarterLength), _accent(in_bar, beat_ql), el.pitches))
    return out


def tune_to_midi(score, default_bpm: float, plays: int = 1):
    """One music21 score -> (pretty_midi.PrettyMIDI, repeats played out?), played ``plays`` times through."""
    import pretty_midi
    from music21 import repeat, tempo
    from music21.exceptions21 import StreamException

    try:
        played, expanded = score.expandRepeats(), True
    except (repeat.ExpanderException, StreamException):  # malformed or unreadable repeat marks
        played, expanded = score, False
    played.stripTies(inPlace=True)  # a tied note is one struck note (played is ours: a copy, or unused)
    marks = list(played.recurse().getElementsByClass(tempo.MetronomeMark))
    bpm = marks[0].getQuarterBPM() if marks and marks[0].getQuarterBPM() else default_bpm
    beat_s = 60.0 / min(max(bpm, TEMPO_RANGE[0]), TEMPO_RANGE[1])  # seconds per quarter note
    piano = pretty_midi.Instrument(program=0, name="folk melody")  # a tune: the melody role for metrical tokens
    notes = _timed_notes(played)
    # One time through lasts until its last bar line (a pickup's missing beats are in the last bar).
    length_ql = max([float(played.highestTime)] + [s + n for s, n, _, _ in notes])
    for k in range(plays):
        for start_ql, note_ql, velocity, pitches in notes:
            start = (start_ql + k * length_ql) * beat_s
            end = start + max(note_ql * beat_s * LEGATO, 0.05)
            piano.notes += [pretty_midi.Note(velocity=velocity, pitch=p.midi, start=start, end=end)
                            for p in pitches if 0 <= p.midi <= 127]
    pm = pretty_midi.PrettyMIDI(initial_tempo=60.0 / beat_s)
    pm.instruments.append(piano)
    return pm, expanded


def _export_file(job: tuple[str, str, str, float, int]) -> dict:
    """Export every tune of one score file (an ABC file may hold hundreds); returns what was written, and
    tunes that failed with their reason."""
    collection, score_path, out_dir, bpm, plays = job
    from music21 import converter

    parsed = converter.parse(score_path)
    scores = list(parsed.scores) if hasattr(parsed, "scores") else [parsed]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.mid"):  # rendered with other settings: this file's tunes are all written again
        stale.unlink()
    record = {"written": [], "failed": [], "not_expanded": 0, "plays": plays, "bpm": bpm}
    for i, score in enumerate(scores):
        number = getattr(score.metadata, "number", None) or i + 1
        name = f"{int(number) if str(number).isdigit() else i + 1:05d}_{_slug(score.metadata.title)}.mid"
        try:
            pm, expanded = tune_to_midi(score, bpm, plays)
        except Exception as err:  # one odd tune must not lose the rest of its collection
            record["failed"].append([name, f"music21 could not play it: {type(err).__name__}: {err}"])
            continue
        if not pm.instruments[0].notes:
            record["failed"].append([name, "no notes"])
            continue
        tmp = out / f".{name}.tmp-{os.getpid()}"
        pm.write(str(tmp))
        os.replace(tmp, out / name)  # never leave a half-written MIDI in the cache
        record["written"].append(name)
        record["not_expanded"] += not expanded
    (out / DONE).write_text(json.dumps(record))
    return record


def _exported_as(done: Path, bpm: float, plays: int) -> bool:
    """Whether a score file's folder holds its tunes rendered with these settings (a record from before
    ``plays`` existed was rendered once through, at an unrecorded bpm: taken as the default's)."""
    if not done.exists():
        return False
    record = json.loads(done.read_text())
    return record.get("plays", 1) == plays and record.get("bpm", bpm) == bpm


def _cache_folder(cache: Path, collection: str, path: Path) -> Path:
    """Where one score file's renders go: its path inside the collection, without the suffix (movements of
    one work share a file name, e.g. beethoven/opus59no1/movement1 and opus59no2/movement1)."""
    inside = path.relative_to(_corpus_root() / collection)
    return cache / collection / inside.with_suffix("")


def export_folk(cache_dir: str | Path, collections: list[str], bpm: float, num_workers: int = 1,
                timeout: float = 600.0, limit: int | None = None, plays: int = 1) -> list[tuple[str, str]]:
    """Export the tunes of ``collections`` (music21 corpus folders; musictx-prep's ``folk_collections``) to
    ``cache_dir/<collection>/<score file>/``, each played ``plays`` times through (files already exported
    with the same bpm and plays are skipped; others are exported again); returns (name, reason) for every
    score file or tune that failed. ``limit``: only the first N score files of each collection."""
    if plays < 1:
        raise ValueError(f"folk_plays must be >= 1 (times through each tune), got {plays}")
    cache = Path(cache_dir)
    files, twins = one_format_each(collection_files(collections))
    if limit:
        files = [f for c in collections for f in [x for x in files if x[0] == c][:limit]]
    jobs = [(c, str(p), str(_cache_folder(cache, c, p)), float(bpm), int(plays)) for c, p in files]
    todo = [j for j in jobs if not _exported_as(Path(j[2]) / DONE, float(bpm), int(plays))]
    failures: list[tuple[str, str]] = []
    if todo:
        bar = tqdm(total=len(todo), desc="export scores", unit="file")
        for i, result in run_tasks(_export_file, todo, num_workers=num_workers, timeout=timeout):
            if isinstance(result, TaskError):
                where = f"{todo[i][0]}/{Path(todo[i][1]).name}"
                failures.append((where, f"music21 could not read it: {result.reason}"))
            bar.update()
        bar.close()
    not_expanded = written = 0
    for c, p in files:
        done = _cache_folder(cache, c, p) / DONE
        if done.exists():
            record = json.loads(done.read_text())
            written += len(record["written"])
            not_expanded += record["not_expanded"]
            failures += [(f"{_cache_folder(Path(), c, p)}/{name}", reason) for name, reason in record["failed"]]
    twice = f"; {len(twins)} left out as a second format of a work kept ({', '.join(twins)})" if twins else ""
    print(f"folk: {written} tunes from {len(files)} score files, played {plays}x through; {not_expanded} kept as "
          f"written (their repeat marks are malformed), {len(failures)} failed (listed in skipped.tsv){twice}")
    return failures
