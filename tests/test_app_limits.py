"""``musictx-app``'s bounds, for real: the work folder (one folder, also Gradio's cache) kept under its caps
across requests, the queue that refuses what it cannot hold, the warning for a host other than loopback, the
login, and a SIGTERM that leaves nothing behind. The shipped model and tiny requests throughout."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pretty_midi
import pytest

from musictx.app.cli import AUTH_ENV, host_warning, parse_args, parse_auth
from musictx.app.core import MOTIF, Continuer, Settings, run_request
from musictx.app.disk import Limits, folder_bytes, results_count
from tests.test_app import NO_APP_EXTRA, serving, upload

TINY = Settings(seed_seconds=2, length_seconds=1, num_samples=2, seed=0)
LOGIN = ("ann", "a:secret")  # a colon in the password: only the first one splits


def run_folders(workdir: Path) -> list[str]:
    return sorted(p.name for p in workdir.glob("run_*"))


# ----- the request logic, without a server ---------------------------------------------------------------
@pytest.fixture(scope="module")
def continuer(tmp_path_factory) -> Continuer:
    return Continuer(workdir=tmp_path_factory.mktemp("app"))


@pytest.fixture(autouse=True)
def default_limits(continuer):
    """Each test starts and ends with the default limits: one that changes them does not leak into the next."""
    continuer.limits = Limits()
    yield
    continuer.limits = Limits()


def test_oldest_results_go_first_and_the_newest_stay(continuer):
    continuer.limits = Limits(keep_results=3)
    shown = []
    for _ in range(4):
        results = continuer.continue_file(MOTIF, TINY)
        assert all(r.midi.is_file() and r.png.is_file() for r in results)  # what the caller gets is there
        assert results_count(continuer.workdir) <= 3
        shown.append(results)
    assert run_folders(continuer.workdir)[-1] == shown[-1][0].midi.parent.name
    first = shown[0][0].midi
    assert not first.exists() and all(str(first) not in table for table in (continuer.takeovers, continuer.lineage,
                                                                          continuer.ids))
    results, message = run_request(lambda: continuer.continue_further(first, TINY))
    assert results is None and message == (f"**Cannot continue:** {first.name}: removed from the server to keep its "
                                            "disk use bounded (it keeps the newest 3 results); upload it again")
    assert continuer.motif.is_file()  # the page's default seed is never pruned


def test_the_byte_cap_spares_only_the_newest_request(continuer):
    continuer.continue_file(MOTIF, TINY)
    one_run = folder_bytes(continuer.workdir / run_folders(continuer.workdir)[-1])
    continuer.limits = Limits(keep_results=1000, max_disk_mb=2.5 * one_run / 2**20)
    for _ in range(4):
        [result, _] = continuer.continue_file(MOTIF, TINY)
        assert result.wav is None or result.wav.is_file()
        assert folder_bytes(continuer.workdir) <= continuer.limits.max_bytes
    assert len(run_folders(continuer.workdir)) <= 2
    # less than one request: the newest results are kept, and a new request is refused before any work
    continuer.limits = Limits(keep_results=1000, max_disk_mb=0.001)
    before = set(continuer.workdir.rglob("*"))
    results, message = run_request(lambda: continuer.continue_file(MOTIF, TINY))
    assert results is None and message.startswith("**Cannot continue:** the server's disk allowance is used up")
    assert set(continuer.workdir.rglob("*")) <= before and len(run_folders(continuer.workdir)) == 1


def test_settings_over_the_apps_bounds_are_refused(continuer, tmp_path):
    for settings, said in [(Settings(num_samples=5), "samples must be 1 to 4, got 5"),
                           (Settings(length_seconds=61), "seconds to add must be at most 60, got 61"),
                           (Settings(seed_seconds=31), "seed seconds must be at most 30, got 31")]:
        results, message = run_request(lambda s=settings: continuer.continue_file(MOTIF, s))
        assert results is None and message == f"**Cannot continue:** {said}"
    long = pretty_midi.PrettyMIDI()  # a note a second for 130 s: "all of it" as the seed is too long
    long.instruments.append(pretty_midi.Instrument(program=0))
    long.instruments[0].notes += [pretty_midi.Note(80, 60 + k % 12, k, k + 0.5) for k in range(131)]
    long.write(str(tmp_path / "long.mid"))
    results, message = run_request(lambda: continuer.continue_file(tmp_path / "long.mid", Settings(seed_seconds=None)))
    # on a beat grid, it goes to pop, whose seed is whole bars (132 s); a performance model's would be 130 s
    assert results is None and message == ("**Cannot continue:** long.mid: a seed of 132 s is longer than the 120 s "
                                           "allowed; give seed seconds (at most 30)")
    piano = Continuer("piano", workdir=tmp_path / "piano")
    results, message = run_request(lambda: piano.continue_file(tmp_path / "long.mid", Settings(seed_seconds=None)))
    assert results is None and "long.mid: a seed of 130 s is longer than the 120 s allowed" in message


def test_the_built_page_bounds_its_queue_and_says_so(continuer):
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    from musictx.app.page import build_page

    page = build_page(continuer, max_queue=3)
    assert page._queue.max_size == 3
    text = " ".join(str(getattr(block, "value", "")) for block in page.blocks.values())
    assert "at most 3 wait" in text and "keeps the newest" in text


# ----- the command line -----------------------------------------------------------------------------------
def test_login_and_host_warning_rules():
    assert parse_auth("ann:a:secret") == LOGIN and parse_auth(None) is None
    for bad in ("ann", ":pw", "ann:"):
        with pytest.raises(ValueError, match="USER:PASSWORD"):
            parse_auth(bad)
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert host_warning(host, None) is None
    for host in ("0.0.0.0", "192.168.1.5", "::", "myhost.example"):
        assert "has no login" in host_warning(host, None) and host_warning(host, LOGIN) is None
    args = parse_args(["--keep-results", "5", "--max-disk-mb", "100", "--max-queue", "2"])
    assert (args.keep_results, args.max_disk_mb, args.max_queue) == (5, 100.0, 2)


def test_a_public_host_prints_one_warning_line(tmp_path):
    """The real command with --host 0.0.0.0: the warning comes first, before any work (here the model fails to
    load, so nothing is bound), and the work folder it made is gone at exit."""
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "musictx.app", "--host", "0.0.0.0", "--model", str(tmp_path / "none")],
                          capture_output=True, text=True, env=env, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert lines[0] == ("musictx-app: warning: --host 0.0.0.0 lets other machines reach the app, and it has no login: "
                        f"anyone who can reach it can use it (add one with --auth USER:PASSWORD or ${AUTH_ENV})")
    assert done.returncode == 1 and lines[-1].startswith("musictx-app: error: --model ")
    assert list(tmp_path.glob("musictx-app-*")) == []


# ----- the served page ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    """A server keeping 3 results and at most 1 waiting request, behind a login given by the environment:
    (its URL, the folder Gradio was told to use)."""
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    tmp = tmp_path_factory.mktemp("capped")
    with serving(tmp, "--keep-results", "3", "--max-disk-mb", "40", "--max-queue", "1",
                 env={AUTH_ENV: ":".join(LOGIN)}) as (url, _):
        yield url, tmp / "gradio"


def capped_client(url: str, folder: Path):
    from gradio_client import Client

    return Client(url, verbose=False, auth=LOGIN, download_files=str(folder))


def test_http_requests_keep_one_bounded_folder(capped, tmp_path):
    url, gradio_dir = capped
    client = capped_client(url, tmp_path)
    for k in range(5):
        out = client.predict(upload(MOTIF), 2, 1, 1.0, 0.95, 2, k, api_name="/continue_seed")
        assert out[0].startswith("2 continuation(s) ready. Model `pop`:")  # the motif is on a beat grid
        assert Path(out[5]["value"]).is_file()  # downloaded: the server still had what it just made
    [workdir] = list(gradio_dir.iterdir())  # Gradio's files and the app's are one folder
    assert workdir.name.startswith("musictx-app-")
    assert results_count(workdir) <= 3 and folder_bytes(workdir) <= 40 * 2**20
    served = [p for p in workdir.rglob("*_cont_*") if not p.parent.name.startswith("run_")]
    assert served == []  # no second copy of any result in Gradio's cache


def test_http_login_is_required(capped):
    url, _ = capped
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url + "config", timeout=30)
    assert refused.value.code == 401


@pytest.mark.slow  # ~30 s: a real flood; test_the_built_page_bounds_its_queue_and_says_so checks the bound itself
def test_http_a_full_queue_says_busy(capped, tmp_path):
    """One request runs, one waits (--max-queue 1): of six sent at once, the later ones are refused at once
    with the busy answer while the first is still generating 60 s of music (the longest a request may ask
    for: seconds of work on a loaded machine, a wide margin over the submissions' milliseconds)."""
    from gradio_client.utils import QueueError

    url, _ = capped
    client = capped_client(url, tmp_path)
    jobs = [client.submit(upload(MOTIF), 2, 60, 1.0, 0.95, 1, k, api_name="/continue_seed") for k in range(6)]
    outcomes = []
    for job in jobs:
        try:
            outcomes.append(job.result(timeout=600)[0])
        except QueueError as err:
            outcomes.append(f"refused: {err}")
    assert sum(o.startswith("1 continuation(s) ready. Model `") for o in outcomes) >= 2  # the model it chose
    assert "refused: Queue is full! Please try again." in outcomes


@pytest.mark.slow  # 12-25 s of subprocesses on a Zen 3; make test-all runs it
def test_sigterm_leaves_no_work_folder(tmp_path):
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    with serving(tmp_path) as (url, proc):
        from gradio_client import Client

        out = Client(url, verbose=False, download_files=str(tmp_path / "client")).predict(
            upload(MOTIF), 2, 1, 1.0, 0.95, 1, 0, api_name="/continue_seed")
        assert out[0].startswith("1 continuation(s) ready. Model `pop`")  # the motif is metrical: pop
        [workdir] = list((tmp_path / "gradio").iterdir())
        assert results_count(workdir) == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    assert list((tmp_path / "gradio").iterdir()) == []


@pytest.mark.slow  # ~20 s: a server started and stopped mid-request
def test_sigterm_while_a_request_generates_exits_0(tmp_path):
    """SIGTERM (docker stop, systemd) while a continuation is being drawn: the app stops at once, exits 0 and leaves
    no work folder. The interpreter's shutdown stopped the generating thread inside torch, and the process aborted:
    "terminate called without an active exception", killed by SIGABRT."""
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    from gradio_client import Client
    from gradio_client.utils import Status

    with serving(tmp_path) as (url, proc):
        client = Client(url, verbose=False, download_files=str(tmp_path / "client"))
        job = client.submit(upload(MOTIF), 20, 60, 1.0, 0.95, 4, 0, api_name="/continue_seed")  # the most one asks
        deadline = time.monotonic() + 120
        while job.status().code != Status.PROGRESS:  # the model is loaded and the seed read: drawing starts
            assert time.monotonic() < deadline and not job.done(), job.status()
            time.sleep(0.1)
        time.sleep(2)
        assert not job.done()  # four minutes of music: still drawing
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    log = (tmp_path / "server.log").read_text()
    assert "musictx.app: stopping" in log and "terminate called" not in log, log
    assert list((tmp_path / "gradio").iterdir()) == []
