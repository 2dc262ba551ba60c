"""Issue 39, cases 6 and 7: a full disk and a bounded app disk.

A full disk is a real small tmpfs where the test may mount one (root with CAP_SYS_ADMIN; skipped with the
reason otherwise), and a fault injected at the WAV writer's write call where it may not: either way the
command ends with one line naming the file and the free space, the files finished before stay whole, the
partial one is gone, and nothing that was there before changed. The app refuses an upload or a request that
its disk allowance cannot hold, before the work."""

from __future__ import annotations

import errno
import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import torch

from musictx.app.core import Continuer, Settings, run_request
from musictx.app.disk import Limits, folder_bytes
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io import wav_io
from musictx.io.audio import audio_unavailable
from musictx.paths import BUNDLED_MOTIF
from musictx.safe_output import OutputError, atomic_path, command_run, write_bytes
from musictx.training.checkpoint_io import AtomicCheckpointIO

from .helpers import small_tmpfs
from .test_app import NO_APP_EXTRA, serving
from .test_output_safety import refused, run_cmd, tree_hashes

needs_audio = pytest.mark.skipif(audio_unavailable() is not None, reason=f"no audio renderer: {audio_unavailable()}")


@pytest.fixture
def small_disk(tmp_path):
    """A 160 kB tmpfs at tmp_path/disk: room for a sample's MIDI and piano roll, not for its WAV (skipped where
    mounting is not allowed; test_full_disk_injected_at_the_wav_writer covers the same case)."""
    with small_tmpfs(tmp_path / "disk", "160k") as disk:
        yield disk


def earlier_files(out: Path) -> None:
    """What a user already keeps in the output folder: it must come out unchanged."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "notes.txt").write_text("my notes\n")
    (out / "sample_00.mid").write_bytes(BUNDLED_MOTIF.read_bytes())


def check_after_full_disk(out: Path, before: dict[str, str], line: str) -> None:
    wav = out / "sample_01.wav"
    assert f"cannot write {wav}: the disk is full (" in line and " free)" in line
    after = tree_hashes(out)
    assert {k: after.get(k) for k in before} == before  # the earlier files are untouched
    new = sorted(set(after) - set(before))
    assert new == ["sample_01.mid", "sample_01.png"], new  # finished whole; no WAV, no temporaries
    assert all((out / n).stat().st_size > 0 for n in new)  # no empty claim of sample_02 or generation.json


@needs_audio
def test_full_disk_on_a_real_small_disk(small_disk, tmp_path):
    out = small_disk / "out"
    earlier_files(out)
    before = tree_hashes(out)
    done = run_cmd("generate", "checkpoint=piano", f"seed_midi={BUNDLED_MOTIF}", "seed_seconds=4", "length_seconds=2",
                   "num_samples=2", f"output_dir={out}", cwd=tmp_path)
    check_after_full_disk(out, before, refused(done, "generate"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk"]  # no run folder left


@needs_audio
def test_full_disk_injected_at_the_wav_writer(tmp_path, monkeypatch):
    """Where no small disk can be mounted: the WAV writer's write call fails as a full disk does."""
    out = tmp_path / "out"
    earlier_files(out)
    before = tree_hashes(out)

    def full(self, audio):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(wav_io.WavWriter, "write", full)
    opts = GenerateOptions(checkpoint="piano", seed_midi=str(BUNDLED_MOTIF), seed_seconds=4, length_seconds=2,
                           num_samples=2, output_dir=str(out), progress_every_s=None)
    with pytest.raises(OutputError) as err, command_run():
        run(opts)
    check_after_full_disk(out, before, str(err.value))


def test_a_checkpoint_save_that_fills_the_disk_keeps_the_previous_one(small_disk):
    last = small_disk / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint({"step": 1}, last)
    before = last.read_bytes()
    with pytest.raises(OutputError, match=rf"cannot write {last}: the disk is full \("):
        AtomicCheckpointIO().save_checkpoint({"step": 2, "weights": torch.zeros(100_000)}, last)
    assert last.read_bytes() == before and sorted(p.name for p in small_disk.iterdir()) == ["last.ckpt"]


def test_an_atomic_write_leaves_the_whole_file_or_the_old_one(tmp_path):
    with command_run():
        path = write_bytes(tmp_path / "a.json", b"{}\n")
        with pytest.raises(RuntimeError), atomic_path(path) as tmp:  # this run's own file: it may replace it
            tmp.write_bytes(b'{"half":')
            raise RuntimeError("killed mid-write")
    assert path.read_bytes() == b"{}\n" and [p.name for p in tmp_path.iterdir()] == ["a.json"]
    with command_run(), pytest.raises(OutputError, match="already exists and this run did not write it; pass "
                                                         "overwrite=true"):
        write_bytes(path, b"[]\n")  # a later run did not write it: refused, and untouched
    assert path.read_bytes() == b"{}\n"
    with command_run(overwrite=True):
        assert write_bytes(path, b"[]\n").read_bytes() == b"[]\n"
    assert write_bytes(path, b"{}\n").read_bytes() == b"{}\n"  # the library outside a command: its caller decides


# ----- 7: the app weighs each request and each upload against its disk allowance ---------------------------
@pytest.fixture(scope="module")
def continuer(tmp_path_factory) -> Continuer:
    return Continuer(workdir=tmp_path_factory.mktemp("app"))


def test_the_app_refuses_a_request_its_allowance_cannot_hold(continuer):
    tiny = Settings(seed_seconds=2, length_seconds=1, num_samples=1, seed=0)
    continuer.limits = Limits()
    try:
        [result] = continuer.continue_file(BUNDLED_MOTIF, tiny)  # room: done
        continuer.limits = Limits(max_disk_mb=folder_bytes(continuer.workdir) / 2**20 * 0.9)
        before = tree_hashes(continuer.workdir)
        results, message = run_request(lambda: continuer.continue_file(BUNDLED_MOTIF, tiny))
        assert results is None and message.startswith("**Cannot continue:** the server's disk allowance is used up")
        assert tree_hashes(continuer.workdir) == before and result.midi.is_file()  # nothing written or lost
    finally:
        continuer.limits = Limits()


def _multipart(size: int) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.mid\"\r\n"
            "Content-Type: audio/midi\r\n\r\n").encode()
    body = head + b"MThd" + bytes(size - 4) + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


@pytest.mark.slow  # 12-25 s of subprocesses on a Zen 3; make test-all runs it
def test_http_an_upload_over_the_allowance_is_refused_before_it_is_written(tmp_path):
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    with serving(tmp_path, "--max-disk-mb", "1", "--max-upload-mb", "5") as (url, _):
        [workdir] = list((tmp_path / "gradio").iterdir())
        before = folder_bytes(workdir)
        body, kind = _multipart(3 * 2**20)
        request = urllib.request.Request(url + "gradio_api/upload", data=body, headers={"Content-Type": kind})
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(request, timeout=60)
        assert answer.value.code == 413
        detail = json.loads(answer.value.read())["detail"]
        assert detail.startswith("Upload refused: the server's disk allowance is used up")
        assert folder_bytes(workdir) <= max(before, 2**20)  # its bytes were never written
        small, kind = _multipart(1000)  # one that fits is taken
        with urllib.request.urlopen(urllib.request.Request(url + "gradio_api/upload", data=small,
                                                           headers={"Content-Type": kind}), timeout=60) as ok:
            assert ok.status == 200
