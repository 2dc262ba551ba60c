"""The HTTP API beside the page (docs/app-api.md), against a running ``musictx-app``: the documented curl
commands and the documented Python example, each run as written (the address swapped for the test server's),
give a continuation, an infill and an accompaniment of a real POP909 song; bad requests get one line."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from symusic import Score

from musictx.app.api import Busy, Queue

from .helpers import SHARED_DATA
from .test_app import NO_APP_EXTRA, serving

DOC = Path(__file__).resolve().parents[1] / "docs" / "app-api.md"
API_SONG = SHARED_DATA / "pop" / "POP909" / "098" / "098.mid"  # 45 s, 3 tracks: the shortest main file
needs_pop = pytest.mark.skipif(not API_SONG.is_file(), reason=f"POP909 not found at {API_SONG} (CI and dev machines)")
DOC_URL = "http://127.0.0.1:7860"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    """(the server's address, a folder holding song.mid and melody.mid as the docs name them)."""
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    if not API_SONG.is_file():
        pytest.skip(f"POP909 not found at {API_SONG}")
    tmp = tmp_path_factory.mktemp("api")
    shutil.copyfile(API_SONG, tmp / "song.mid")
    melody = Score(str(API_SONG))
    melody.tracks = [t for t in melody.tracks if t.name.upper() == "MELODY"]
    melody.dump_midi(str(tmp / "melody.mid"))
    with serving(tmp) as (url, _):
        yield url.rstrip("/"), tmp


def _seconds(path: Path) -> float:
    import pretty_midi

    return pretty_midi.PrettyMIDI(str(path)).get_end_time()


def _notes(path: Path) -> dict[str, int]:
    return {t.name: len(t.notes) for t in Score(str(path)).tracks}


@needs_pop
@pytest.mark.slow  # 8-15 s of real runs; in `make test-all` (the fast suite stays under 10 min)
def test_the_documented_curl_commands_continue_fill_and_accompany_a_song(api):
    url, folder = api
    if shutil.which("curl") is None:
        pytest.skip("no curl on PATH")
    lines = [line for line in _blocks("bash")[0].splitlines() if line.startswith("curl")]
    assert len(lines) == 4
    for line in lines:
        done = subprocess.run(line.split("#")[0].replace(DOC_URL, url), shell=True, cwd=folder, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
    assert _seconds(folder / "continued.mid") > 20 + 20 - 3  # the 20 s seed (the default) and 20 s new, in whole bars
    filled, accompanied = _notes(folder / "filled.mid"), _notes(folder / "accompanied.mid")
    assert set(filled) == {"MELODY", "BRIDGE", "PIANO"} and set(accompanied) >= {"MELODY", "PIANO"}
    assert '"ok":true' in done.stdout.replace(" ", "")  # the health line, last


@needs_pop
def test_a_fill_without_bars_says_where_it_stopped(api):
    """Empty bar fields fill from bar 1 as far as one request may (16 bars); the song is longer, and the response's
    X-Musictx-Said header says so as the page's title does."""
    url, folder = api
    if shutil.which("curl") is None:
        pytest.skip("no curl on PATH")
    shutil.copyfile(API_SONG.parents[1] / "007" / "007.mid", folder / "long.mid")  # 4 minutes: far over 16 bars
    cmd = ["curl", "-sf", "-D", "-", "-o", "whole.mid", "-F", "file=@long.mid", url + "/api/infill"]
    done = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if line.lower().startswith("x-musictx-said:")]
    assert len(said) == 1 and re.search(r"bars 1-16 of \d+ \(at most 16 bars at a time\)", said[0]), done.stdout


@needs_pop
def test_seed_from_end_continues_the_uploads_last_seconds(api):
    """seed_from=end, as musictx-generate takes it: the seed is the upload's last seed_seconds, and the result is that
    seed and its continuation (so it ends well past the song's own length less the seed)."""
    url, folder = api
    if shutil.which("curl") is None:
        pytest.skip("no curl on PATH")
    cmd = ["curl", "-sf", "-D", "-", "-o", "end.mid", "-F", "file=@song.mid", "-F", "seed_from=end", "-F",
           "seed_seconds=6", "-F", "seconds=4", url + "/api/continue"]
    done = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    import pretty_midi

    def pitches(path: Path, start: float, end: float) -> set[tuple[str, int]]:
        pm = pretty_midi.PrettyMIDI(str(path))
        return {(i.name, n.pitch) for i in pm.instruments for n in i.notes if start <= n.start < end}

    song_end = _seconds(folder / "song.mid")
    seed = pitches(folder / "end.mid", 0.0, 4.0)  # the seed's first seconds, as the result has them
    near_end, start = pitches(folder / "song.mid", song_end - 8, song_end), pitches(folder / "song.mid", 0.0, 8.0)
    assert _seconds(folder / "end.mid") < 6 + 4 + 3  # the 6 s seed and 4 s new, in whole bars
    assert len(seed & near_end) > len(seed & start) and len(seed - near_end) <= len(seed) // 4, (seed, near_end)


@needs_pop
def test_the_documented_python_example_runs_as_written(api):
    url, folder = api
    code = _blocks("python")[0].replace(DOC_URL, url)
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _seconds(folder / "continued.mid") > 8 + 20 - 3


@needs_pop
@pytest.mark.parametrize("path, fields, status, said", [
    ("/api/continue", {}, 400, "error: continue: no MIDI file: send it as the form field 'file'"),
    ("/api/continue", {"seconds": "lots", "file": "song.mid"}, 400, "error: seconds=lots: not a float"),
    ("/api/continue", {"bpm": "120", "file": "song.mid"}, 400, "error: continue: unknown field(s) bpm"),
    ("/api/continue", {"seconds": "600", "file": "song.mid"}, 400, "error: seconds must be at most 60, got 600"),
    ("/api/continue", {"seconds": "0", "file": "song.mid"}, 400, "error: seconds must be > 0, got 0"),
    ("/api/continue", {"seed_seconds": "0", "file": "song.mid"}, 400, "error: seed_seconds must be > 0, got 0"),
    ("/api/continue", {"instruments": "zzz", "file": "song.mid"}, 400, "error: instruments=zzz: give TRACK=PROGRAM"),
    ("/api/continue", {"seed_from": "-3", "file": "song.mid"}, 400, "error: seed_from must be 0 to 3600 seconds"),
    ("/api/infill", {"seed": "99999999999", "file": "song.mid"}, 400, "error: seed must be a whole number in [0, "),
    ("/api/continue", {"seed": "99999999999", "file": "song.mid"}, 400, "error: seed must be a whole number in [0, "),
    ("/api/continue", {"drums": "groove", "file": "song.mid"}, 400, "error: drums=groove: give one of loop, seed"),
    ("/api/infill", {"first": "900", "file": "song.mid"}, 400, "outside the song's bars"),
    ("/api/infill", {"first": "3", "last": "2", "file": "song.mid"}, 400, "bars 3-2: first comes after last"),
    ("/api/accompany", {"first": "x", "file": "song.mid"}, 400, "error: first: 'x' is not a bar number"),
    ("/api/infill", {"last": "0", "file": "song.mid"}, 400, "error: last: '0' is not a bar number"),
    ("/api/infill", {"beats": "30", "file": "song.mid"}, 400, "error: beats: give a whole number from 1 to 16"),
    ("/api/infill", {"file": "notes.txt"}, 400, "error: "),
    ("/api/remix", {"file": "song.mid"}, 404, "error: no endpoint /api/remix; there are continue, infill, accompany"),
])
def test_a_bad_request_gets_one_line(api, path, fields, status, said):
    """One line, naming the API's form fields: never the page's boxes (From bar) or the command's options."""
    url, folder = api
    (folder / "notes.txt").write_text("not a MIDI file\n")
    files = {k: v for k, v in fields.items() if k == "file"}
    form = [f"-F{k}={v}" for k, v in fields.items() if k != "file"] + [f"-Ffile=@{v}" for v in files.values()]
    cmd = ["curl", "-s", "-X", "POST", "-o", "-", "-w", "\n%{http_code}", *form, url + path]
    if shutil.which("curl") is None:
        pytest.skip("no curl on PATH")
    body, code = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=120).stdout.rsplit("\n", 1)
    assert int(code) == status and said in body and len(body.strip().splitlines()) == 1, (code, body)
    page_words = r"From bar|To bar|Beats per bar|length_seconds|programs=|seconds to add|or null|Seed starts|Random"
    assert not re.search(page_words, body), body


@needs_pop
@pytest.mark.parametrize("method, path, args, status, said", [
    ("GET", "/api/continue", [], 405, "error: /api/continue takes POST"),
    ("POST", "/api/health", [], 405, "error: /api/health takes GET"),
    ("PUT", "/api/health", [], 405, "error: /api/health takes GET"),
    ("POST", "/api/continue/x", [], 404, "error: no endpoint /api/continue/x; there are continue, infill, accompany"),
    ("GET", "/api/nothing", [], 404, "error: no endpoint /api/nothing"),
    ("POST", "/api/continue", ["-Ffile=@song.mid", "-Ffile=@song.mid"], 400, "error: continue: Too many files"),
    ("POST", "/api/continue", ["-H", "Content-Type: multipart/form-data; boundary=xyz", "--data-binary", "garbage"],
     400, "error: continue: "),
])
def test_a_wrong_method_or_path_or_form_gets_one_line_too(api, method, path, args, status, said):
    """Whatever reaches /api/ is answered in the API's words, one line: a wrong method 405 (the one it takes named), a
    path under no endpoint 404, a form the server's own parser refuses 400 with its reason, never a 500."""
    url, folder = api
    if shutil.which("curl") is None:
        pytest.skip("no curl on PATH")
    cmd = ["curl", "-s", "-X", method, "-o", "-", "-w", "\n%{http_code}", *args, url + path]
    body, code = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=120).stdout.rsplit("\n", 1)
    assert int(code) == status and body.startswith(said) and len(body.strip().splitlines()) == 1, (code, body)


def test_the_queue_answers_busy_past_its_room():
    queue, started, release = Queue(waiting=1), threading.Event(), threading.Event()

    def hold():
        with queue:
            started.set()
            release.wait(10)

    workers = [threading.Thread(target=hold) for _ in range(2)]  # one works, one waits
    for w in workers:
        w.start()
    started.wait(10)
    while queue._count < 2:
        pass
    with pytest.raises(Busy, match="the server is busy"):
        with queue:
            pass
    release.set()
    for w in workers:
        w.join(10)
    with queue:  # room again
        pass


@needs_pop
def test_density_and_instruments_by_track_reach_the_written_file(api):
    url, folder = api
    if shutil.which("curl") is None:
        pytest.skip("no curl on PATH")
    done = subprocess.run(["curl", "-sf", "-F", "file=@song.mid", "-F", "seconds=20", "-F", "seed_from=20",
                           "-F", "density=PIANO=4", "-F", "instruments=MELODY=Flute, BRIDGE=40",
                           f"{url}/api/continue", "-o", "shaped.mid"], cwd=folder, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    import pretty_midi

    pm = pretty_midi.PrettyMIDI(str(folder / "shaped.mid"))
    assert {i.name: i.program for i in pm.instruments} == {"MELODY": 73, "BRIDGE": 40, "PIANO": 0}
    piano = next(i for i in pm.instruments if i.name == "PIANO")
    seed_end = 8 + 1  # the result opens with its seed (8 s, cut at bar lines), then 20 s new
    new = [n for n in piano.notes if n.start >= seed_end + 2]
    bars = (pm.get_end_time() - seed_end - 2) / (4 * 60 / pm.get_tempo_changes()[1][-1])
    assert 0 < len(new) / bars < 8  # asked 4 a bar; the song's own piano plays ~14
    bad = subprocess.run(["curl", "-s", "-F", "file=@song.mid", "-F", "density=DRUMS=4", f"{url}/api/continue"],
                         cwd=folder, capture_output=True, text=True, timeout=60)
    assert bad.stdout.startswith("error: density 'DRUMS=4': give TRACK=NOTES per bar for MELODY, BRIDGE or PIANO")


def test_an_uploads_name_cannot_climb_out_of_its_folder():
    from musictx.app.api import upload_name

    assert [upload_name(n) for n in ("song.mid", "../../etc/x.mid", "..", "", None, ".hidden.mid", "a b;c.mid")] == [
        "song.mid", "x.mid", "upload.mid", "upload.mid", "upload.mid", "upload.mid", "a_b_c.mid"]
