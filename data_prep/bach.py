"""The embedded default dataset: J.S. Bach's chorales from the music21 corpus, exported to MIDI.

music21 ships the corpus inside its PyPI package, so this needs no download. Chorale names carry a
dot (``bwv144.3``): the exported file keeps the whole name (``bwv144.3.mid``) so that two chorales of
one cantata never collide. Exports are cached: a second run only reads the MIDI files.
"""

from __future__ import annotations

import os
from pathlib import Path

from tqdm import tqdm

from data_prep.pool import TaskError, run_tasks


def chorale_names() -> list[str]:
    """Names of the Riemenschneider chorales in the music21 corpus (e.g. ``bach/bwv144.3``)."""
    try:
        from music21 import corpus
    except ImportError as err:
        raise ImportError("source=bach needs music21: pip install 'musictx[corpus]'") from err
    # The iterator lists some chorales twice (one file under two Riemenschneider numbers).
    return sorted(set(corpus.chorales.Iterator(returnType="filename")))


def _export_one(job: tuple[str, str]) -> str:
    name, out_path = job
    from music21 import corpus

    score = corpus.parse(name)
    tmp = f"{out_path}.tmp-{os.getpid()}"
    score.write("midi", fp=tmp)
    os.replace(tmp, out_path)  # never leave a half-written MIDI in the cache
    return out_path


def export_chorales(cache_dir: str | Path, num_workers: int = 1, timeout: float = 120.0,
                    limit: int | None = None) -> list[tuple[str, str]]:
    """Export the chorales to ``cache_dir`` (skipping ones already there); returns (name, reason) for
    every chorale that failed to export."""
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    names = chorale_names()[:limit]
    jobs = [(n, str(cache / f"{Path(n).name}.mid")) for n in names]
    todo = [j for j in jobs if not os.path.exists(j[1])]
    failures = []
    if todo:
        bar = tqdm(total=len(todo), desc="export chorales", unit="file")
        for i, result in run_tasks(_export_one, todo, num_workers=num_workers, timeout=timeout):
            if isinstance(result, TaskError):
                failures.append((todo[i][0], f"music21 could not export: {result.reason}"))
            bar.update()
        bar.close()
    return failures
