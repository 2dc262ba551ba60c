"""One line for every refusal (issue 68): the hostile cases a tester found on main, each run as the user runs it.

Each must end in exactly one ``<prog>: error: ...`` line naming the file or option, with status 1 (2 for an
old entry point), no traceback, nothing half-written: a seed past 32 bits, ``tokenizer=`` on the generate
command line, evaluate's Performance-event modes on a REMI model and a Performance model on REMI data, the copy
fit's Performance model and bad counts, bench's negative seconds and a pickled checkpoint, the old ``python -m``
places of moved commands, a ``seed_from`` past a short file's end; a tempo of 0 is said in one warning; and a
full output disk (a real 64 kB tmpfs) names the output file and that disk, and leaves no claim behind. The
runs share one process per batch (tests/fuzz_runner.py); about 25 s on one busy core.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import symusic
import torch

from musictx.io.midi_io import read_notes
from musictx.io.token_store import write_split
from musictx.safe_output import claim_numbered, claim_path, sweep_leftovers

from .helpers import needs_shared, small_tmpfs
from .test_fuzz_commands import POP, REPO, RUNNER, assert_one_line, tempo_zero

pytestmark = needs_shared
GENERATE = ("musictx.commands.generate", "musictx-generate")
EVALUATE = ("musictx.commands.evaluate", "musictx-evaluate")
COPY_FIT = ("bench.__main__", "python -m bench copy_fit")
HUGE_SEED = "99999999999999999999"


def runner_env() -> dict:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
    env.pop("MUSICTX_DEBUG", None)
    return env


def run_cases(cases: list[dict], cwd: Path) -> list[dict]:
    """Each case (``module``, ``prog``, ``argv``, optional ``as_main``) run by tests/fuzz_runner.py, one process."""
    (cwd / "cases.json").write_text(json.dumps(cases))
    done = subprocess.run([sys.executable, str(RUNNER), str(cwd / "cases.json")], cwd=cwd, env=runner_env(),
                          capture_output=True, text=True, timeout=600)
    (cwd / "cases.json").unlink()
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(cases), done.stderr[-3000:]
    return results


def case(command: tuple[str, str], *argv: str) -> dict:
    return {"module": command[0], "prog": command[1], "argv": list(argv)}


def remi_data(folder: Path) -> Path:
    """A prepared-looking folder of the pop model's REMI tokenizer: two POP909 songs in each split (their ids
    are not read: every run here is refused before it reads them)."""
    from musictx.checkpoints.model_store import load_model

    folder.mkdir(parents=True)
    names = ["003/003.mid", "006/006.mid"]
    for split in ("train", "validation", "test"):
        write_split(folder, split, [np.array([1, 2, 3])] * len(names), names)
    load_model("pop")[1].save(folder / "tokenizer.json")
    (folder / "manifest.json").write_text(json.dumps({"input_dir": str(POP), "splits": {}}))
    return folder


def short_song(path: Path, seconds: float = 20.0) -> Path:
    """POP909 song 003 cut to its first ``seconds``."""
    score = symusic.Score(str(POP / "003" / "003.mid"), ttype="second")
    for track in score.tracks:
        track.notes = [n for n in track.notes if n.time < seconds]
    score.dump_midi(str(path))
    return path


def refusal_cases(tmp_path: Path) -> list[tuple[dict, str]]:
    """(case, a word its one line must hold): every refusal the tester found, but the moved entry points."""
    data, song = remi_data(tmp_path / "remi"), short_song(tmp_path / "short20.mid")
    torch.save({"state_dict": {}, "code": print}, tmp_path / "pickled.ckpt")  # a pickle of a function: refused
    out = ["num_samples=1", "audio=false", f"output_dir={tmp_path / 'gen'}"]
    ev = [f"data.dir={data}", "progress=false", f"output_dir={tmp_path / 'ev'}"]
    cf = ["copy_fit", "--data", str(data), "--songs", "1"]
    return [
        (case(GENERATE, f"seed={HUGE_SEED}", *out), f"got {HUGE_SEED}"),
        (case(GENERATE, "seed=-1", *out), "seed must be"),
        (case(GENERATE, f"tokenizer={data}", *out), f"tokenizer={data}: musictx-generate has no tokenizer"),
        (case(GENERATE, "checkpoint=pop", f"seed_midi={song}", "seed_from=3000", *out),
         f"seed_from=3000: seed_midi={song} is only"),
        (case(("musictx.commands.train", "musictx-train"), f"seed={HUGE_SEED}", f"hydra.run.dir={tmp_path / 'tr'}"),
         "seed must be"),
        (case(EVALUATE, "mode=nll", "checkpoint=piano", *ev),
         f"checkpoint=piano: tokenizer mismatch with data.dir={data}: this model reads Performance events, data.dir="
         f"{data} holds REMI tokens"),
        *[(case(EVALUATE, f"mode={mode}", "checkpoint=pop", *ev), f"checkpoint=pop: mode={mode} measures Performance")
          for mode in ("token_continuation", "motif", "all")],
        (case(EVALUATE, "mode=motif", f"motif.seed={HUGE_SEED}", *ev), "motif.seed"),
        (case(EVALUATE, "mode=two_sample", "two_sample.cv_seed=-3", *ev), "two_sample.cv_seed"),
        (case(COPY_FIT, *cf, "--checkpoint", "piano"), "--checkpoint piano: a Performance-event model"),
        (case(COPY_FIT, *cf, "--checkpoint", "pop"), "the fit needs a model fine-tuned on the infill format"),
        (case(COPY_FIT, *cf, "--bars", "0"), "argument --bars"),
        (case(COPY_FIT, "copy_fit", "--data", str(data), "--songs", "0", "--skip", "5"),
         "--skip 5 leaves none of its 2"),
        (case(COPY_FIT, *cf, "--songs", "x"), "argument --songs"),
        (case(("bench.__main__", "python -m bench realtime"), "realtime", "--seconds", "-1"),
         "argument --seconds"),
        (case(("bench.__main__", "python -m bench realtime"), "realtime", "--model",
              str(tmp_path / "pickled.ckpt")), "pickled.ckpt: not a usable musictx checkpoint"),
    ]


def test_each_refusal_the_tester_found_is_one_line(tmp_path):
    cases = refusal_cases(tmp_path)
    results = run_cases([c for c, _ in cases], tmp_path)
    for result, (one, word) in zip(results, cases, strict=True):
        assert_one_line(result, one["prog"])
        assert result["status"] == 1 and word in result["stderr"].splitlines()[-1], (one["argv"], result["stderr"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pickled.ckpt", "remi", "short20.mid"]  # no output


def test_a_tempo_of_zero_is_said_once_and_its_notes_keep_their_times(tmp_path, capsys):
    from musictx.io.midi_timing import read_timing
    from musictx.io.score_io import read_score

    song = tempo_zero(tmp_path / "tempo0.mid")
    line = f"warning: {song}: 1 tempo event(s) of 0 left out (no clock can play them); the tempo before each holds on"
    assert read_notes(song).start.max() > 60  # the tempo before the zero holds on; the zero put every note at 0 s
    assert all(t.mspq > 0 for t in read_score(song).tempos) and all(t.mspq > 0 for t in read_timing(song).tempos)
    assert capsys.readouterr().err.splitlines() == [line]  # three readers, one line
    result = run_cases([case(GENERATE, "checkpoint=piano", f"seed_midi={song}", "length_seconds=1", "num_samples=1",
                             "audio=false", f"output_dir={tmp_path / 'out'}")], tmp_path)[0]
    assert_one_line(result, "musictx-generate")
    assert result["status"] == 0 and [x for x in result["stderr"].splitlines() if x.startswith("warning:")] == [line]


def test_the_app_refuses_a_seed_past_32_bits_before_sampling(tmp_path):
    from musictx.app.core import MOTIF, Continuer, Settings, run_request

    cont = Continuer("piano", workdir=tmp_path / "app")
    results, message = run_request(lambda: cont.continue_file(MOTIF, Settings(seed=int(HUGE_SEED))))
    said = "**Cannot continue:** Random seed (seed) must be a whole number in [0, 4294967295]"
    assert results is None and message.startswith(said)


# ----- a full output disk --------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A real 64 kB file system (tmpfs), filled to its last byte; skipped where mounting is not allowed."""
    with small_tmpfs(tmp_path / "disk", "64k") as disk:
        (disk / "out").mkdir()
        with open(disk / "filler", "wb") as f:
            try:
                f.write(bytes(128 * 1024))
            except OSError:
                pass  # full: what it wanted
        yield disk


def test_a_full_output_disk_names_the_file_and_its_disk_and_leaves_no_claim(small_disk, tmp_path):
    out = small_disk / "out"
    argv = [f"seed_midi={REPO / 'musictx/assets/motif.mid'}", "checkpoint=piano", "length_seconds=1", "audio=false",
            f"output_dir={out}"]
    full = run_cases([case(GENERATE, *argv, "num_samples=4")], tmp_path)[0]
    assert_one_line(full, "musictx-generate")
    assert full["status"] == 1 and full["stderr"].splitlines()[-1].startswith(
        f"musictx-generate: error: cannot write {out / 'sample_00.mid'}: the disk is full (0 bytes free)")
    assert os.listdir(out) == []  # its claims went with it (an empty one nobody could sweep, before)
    (small_disk / "filler").unlink()
    from musictx.generation.output_folder import Claims

    assert Claims(out, 1).numbers == [0]  # the next run into the empty folder writes sample_00, not sample_03


def test_an_abandoned_empty_claim_is_swept_and_a_fresh_one_kept(tmp_path):
    from musictx.generation.output_folder import first_free_number, sample_midi_name

    old, fresh = claim_path(tmp_path / "a" / "sample_02.mid"), claim_path(tmp_path / "b" / "sample_05.mid")
    for claim in (old, fresh):
        claim.parent.mkdir()
        claim.touch()  # empty: made, its text not yet written (fresh), or never (old: killed, or a full disk)
    os.utime(old, (time.time() - 600, time.time() - 600))
    (numbers,) = claim_numbered(old.parent, (sample_midi_name, first_free_number, 1))
    assert numbers == [0] and sorted(os.listdir(old.parent)) == [".sample_00.mid.claim"]  # the next is sample_00
    assert sweep_leftovers(fresh.parent) == [] and fresh.exists()  # perhaps a live run's, a moment old
