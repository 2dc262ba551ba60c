"""``musictx-app`` for real: the served page in a subprocess on a free local port, driven over HTTP with
gradio_client and, end to end, in a headless Chromium (upload, Continue, piano roll, audio, MIDI download); and
the helpers the other app tests share. `Continuer` without a server: `tests/test_app_continuer.py`."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pretty_midi
import pytest

from musictx.app.core import MOTIF
from musictx.io.audio import RELEASE_TAIL_SECONDS, read_wav

NO_APP_EXTRA = "the app extra is not installed (pip install 'musictx[app]'; `make test` installs it)"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def end_time(path) -> float:
    return pretty_midi.PrettyMIDI(str(path)).get_end_time()


def bad_files(folder: Path) -> dict[str, Path]:
    """A text file named .mid, a MIDI file without notes, the motif cut in half and a WAV named .mid."""
    folder.mkdir(parents=True, exist_ok=True)
    not_midi = folder / "not_midi.mid"
    not_midi.write_text("this is not a MIDI file\n")
    empty = folder / "empty.mid"
    pm = pretty_midi.PrettyMIDI()
    pm.instruments.append(pretty_midi.Instrument(program=0))
    pm.write(str(empty))
    cut = folder / "cut.mid"
    cut.write_bytes(MOTIF.read_bytes()[:len(MOTIF.read_bytes()) // 2])
    wav = folder / "song.mid"
    wav.write_bytes(b"RIFF" + bytes(4) + b"WAVEfmt " + bytes(64))
    return {"not_midi": not_midi, "empty": empty, "cut": cut, "wav": wav}


# What the upload messages say: the app's words, never the MIDI libraries' (symusic's "Invaild", class names).
UPLOAD_MESSAGES = {"not_midi": "not_midi.mid: not a MIDI file (it does not start with a MIDI header)",
                   "empty": "empty.mid: no notes", "cut": "cut.mid: a damaged MIDI file: it starts like one",
                   "wav": "song.mid: an audio file, not a MIDI file"}
LIBRARY_WORDS = ("Invaild", "MiniMidi", "RuntimeError", "iostream", "unreadable MIDI (")
PINNED = "Model `piano`: chosen with --model."  # what each result's status says of the pinned model


# ----- the served page ------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(tmp: Path, *args: str, env: dict | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """``python -m musictx.app`` on a free port with ``args``, Gradio's files under ``tmp/gradio``; (its URL,
    the process) while it answers. Stopped with SIGTERM at the end unless the caller already stopped it."""
    port = free_port()
    env = {**os.environ, "GRADIO_TEMP_DIR": str(tmp / "gradio"), "OMP_NUM_THREADS": "1", **(env or {})}
    log = open(tmp / "server.log", "w")  # noqa: SIM115  (closed below)
    proc = subprocess.Popen([sys.executable, "-m", "musictx.app", "--port", str(port), "--threads", "1", *args],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 150
        while True:
            if proc.poll() is not None:
                pytest.fail(f"musictx-app exited ({proc.returncode}):\n{(tmp / 'server.log').read_text()}")
            try:
                urllib.request.urlopen(url, timeout=5).read()
                break
            except urllib.error.HTTPError:  # answering, with a login page in front
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"musictx-app did not answer in time:\n{(tmp / 'server.log').read_text()}")
                time.sleep(0.5)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``python -m musictx.app --model piano`` on a free port; its URL while it answers."""
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    with serving(tmp_path_factory.mktemp("server"), "--max-upload-mb", "1", "--model", "piano") as (url, _):
        yield url


@pytest.fixture
def client(server, tmp_path):
    """A gradio_client session with the served page; downloads go to the test's folder."""
    gradio_client = pytest.importorskip("gradio_client", reason=NO_APP_EXTRA)
    return gradio_client.Client(server, verbose=False, download_files=str(tmp_path))


def upload(path):
    from gradio_client import handle_file

    return handle_file(str(path))


def take_names(out) -> list[str]:
    """The names in the page's list of takes (the last output), newest first."""
    return [Path(f).name for f in out[-1]["value"]]


def test_http_continue_then_continue_further(client):
    out = client.predict(upload(MOTIF), 3, 2, 1.0, 0.95, 2, 7, api_name="/continue_seed")
    status, first = out[0], out[2:6]  # out: status, seed file, then (title, png, wav, midi) per slot
    assert status == f"2 continuation(s) ready. {PINNED}" and first[0].startswith("**Sample 1:")
    assert Path(first[1]).read_bytes()[:4] == b"\x89PNG"
    midi = Path(first[3]["value"])
    assert abs(end_time(midi) - 5.0) < 1.5
    rate, x = read_wav(first[2])
    assert rate == 44100 and abs(len(x) / rate - (end_time(midi) + RELEASE_TAIL_SECONDS)) < 0.25
    assert out[10] == "" and out[11] is None  # the third slot stays empty
    assert midi.name.startswith("motif_cont_") and take_names(out) == [Path(out[9]["value"]).name, midi.name]
    again = client.predict(2, 1.0, 0.95, 1, 3, api_name="/continue_further_0")  # seed seconds: 8 (all of it)
    assert again[0] == f"1 continuation(s) ready. {PINNED}\n\nSeed: all {end_time(midi):.1f} s of {midi.name}."
    assert Path(again[1]).name == midi.name  # the seed box
    assert end_time(again[5]["value"]) > end_time(midi) + 1.0
    tail = client.predict(2, 1.0, 0.95, 1, 3, 1.5, api_name="/continue_further_0")  # its last 1.5 s
    assert tail[0].split("\n\n")[1].startswith("Seed: the last ") and end_time(tail[5]["value"]) < 4.5
    assert len(take_names(tail)) == 4 and take_names(tail)[0] == Path(tail[5]["value"]).name
    png, line = client.predict(upload(MOTIF), api_name="/preview_seed")
    assert Path(png).read_bytes()[:4] == b"\x89PNG"
    assert line == f"{MOTIF.name}, as the model `piano` reads it (chosen with --model)."
    png, message = client.predict("1", "mean", "0", 6, api_name="/draw_arcs")  # of the last take on the page
    assert Path(png).read_bytes()[:4] == b"\x89PNG" and message.startswith("Each orange note")
    png, message = client.predict("4", "mean", "mean", 6, api_name="/draw_arcs")  # only one result now
    assert png is None and message.startswith("**Cannot draw:**")


def test_http_bad_uploads_give_messages_and_the_app_keeps_serving(server, client, tmp_path):
    for name, path in bad_files(tmp_path / "bad").items():
        out = client.predict(upload(path), 3, 2, 1.0, 0.95, 1, 0, api_name="/continue_seed")
        assert out[0].startswith("**Cannot continue:**") and path.name in out[0], name
    huge = b"MThd" + bytes(2 * 2**20)  # over the server's --max-upload-mb 1
    body = (b"--b\r\nContent-Disposition: form-data; name=\"files\"; filename=\"huge.mid\"\r\n"
            b"Content-Type: audio/midi\r\n\r\n" + huge + b"\r\n--b--\r\n")
    request = urllib.request.Request(server + "gradio_api/upload", data=body, method="POST",
                                     headers={"Content-Type": "multipart/form-data; boundary=b"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 413
    out = client.predict(upload(MOTIF), 2, 1, 1.0, 0.95, 1, 0, 3000, api_name="/continue_seed")  # seed start
    assert out[0].startswith(f"**Cannot continue:** {MOTIF.name}: no note starts at or after 3000 s (its last note")
    assert out[0].endswith("; lower Seed starts at.")  # the page's box, not the command's seed_from
    out = client.predict(upload(MOTIF), 2, 1, 1.0, 0.95, 1, 0, api_name="/continue_seed")
    assert out[0] == f"1 continuation(s) ready. {PINNED}"
    # the guidance, passed last; it needs a seed longer than its 64 recent tokens (8 s of the motif)
    guided, alone = (client.predict(upload(MOTIF), 8, 2, 1.0, 0.95, 1, 0, 0, *w, api_name="/continue_seed")
                     for w in ((), (0.0,)))
    assert guided[0] == alone[0] == f"1 continuation(s) ready. {PINNED}"
    assert Path(alone[5]["value"]).read_bytes() != Path(guided[5]["value"]).read_bytes()  # same seed, other music


def clear_box(page, box: str = "seed-file", tries: int = 3) -> None:
    """Clear the file box ``#box`` until its file input shows. The page opens with the shipped motif in each song
    box (the Continue tab's seed, the Infill tab's song, the Accompany tab's melody), so
    first wait for that file and its Clear button: before the page has rendered its value, an empty box with
    an input can show for a moment, and the motif then replaces it (a fresh-clone CI run saw the input go
    and waited 120 s for it). A click that lands before the page has wired its handlers does nothing, so the
    click is repeated while the Clear button is still there."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    clear = page.locator(f"#{box} button[aria-label=Clear]")
    clear.wait_for()
    for attempt in range(tries):
        if clear.count():
            clear.click()
        try:
            page.locator(f"#{box} input[type=file]").wait_for(state="attached", timeout=30_000)
            return
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise


def upload_in_page(page, path: Path, tries: int = 3) -> None:
    """Choose ``path`` in the Continue tab's seed box (`upload_to_box`)."""
    upload_to_box(page, "seed-file", path, tries)


def accompany_in_page(page, song: Path, first: str, last: str) -> None:
    """On the Accompany tab: ``song`` uploaded as the melody file, bars ``first``-``last`` asked, Write pressed."""
    page.get_by_role("tab", name="Accompany").click()
    clear_box(page, "accompany-melody")
    upload_to_box(page, "accompany-melody", song)
    page.locator("#accompany-from input").fill(first)
    page.locator("#accompany-to input").fill(last)
    page.locator("#accompany-go").click()


def upload_to_box(page, box: str, path: Path, tries: int = 3) -> None:
    """Choose ``path`` in the file input of the box ``#box`` and wait until the box lists it: its preview row,
    found by its aria-label, since Gradio writes the name's stem and extension in two spans (the text
    "pop_song.mid" is not on the page once the upload is done; a wait for it failed on loaded machines). The
    input is re-rendered after Clear, and a file set on the old element while that happens is lost, so the
    choice is repeated, after a Clear where a file came back."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    chooser = page.locator(f"#{box} input[type=file]")
    listed = page.locator(f"#{box}").get_by_label(path.name, exact=True).first
    clear = page.locator(f"#{box} button[aria-label=Clear]")
    for attempt in range(tries):
        try:
            chooser.wait_for(state="attached", timeout=30_000)
            chooser.set_input_files(str(path))
            listed.wait_for(timeout=60_000)
            return
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
            if clear.count():  # a file came back: clear it again
                clear.click()


def continue_further_in_page(page) -> None:
    """Continue the first result (about 10 s) from its last 3 s: the status says so, the new results are the
    session's third and fourth takes of my_seed, the seed preview shows the result, and the takes list has all four."""
    box = page.locator("input[aria-label^='number input for Seed seconds']")
    box.fill("3")
    box.press("Enter")
    page.locator("#further-0").click()
    page.locator("#status").get_by_text("Seed: the last").wait_for()
    assert "of my_seed_cont_00.mid (from " in page.locator("#status").inner_text()
    assert page.locator("#result-0 img").get_attribute("src").endswith("/my_seed_cont_02.png")
    page.wait_for_function("() => document.querySelector('#seed-roll img')?.src.endsWith('_my_seed_cont_00.png')")
    takes = page.locator("#takes a[download]")
    takes.nth(3).wait_for()
    hrefs = [takes.nth(k).get_attribute("href") for k in range(takes.count())]
    assert [h.rsplit("/", 1)[-1] for h in hrefs] == [f"my_seed_cont_0{k}.mid" for k in (3, 2, 1, 0)]  # newest first


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)")
def test_browser_upload_continue_listen_download(server, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (dev extra)")
    seed = tmp_path / "my_seed.mid"
    shutil.copyfile(MOTIF, seed)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
            page.set_default_timeout(120_000)  # generous for a loaded machine; each step takes seconds
            page.goto(server)
            clear_box(page)
            upload_in_page(page, seed)
            page.wait_for_function("() => document.querySelector('#seed-roll img')?.src.endsWith('_my_seed.png')")
            for label, value in [("Seed seconds", "6"), ("Seconds to add", "4"), ("Samples", "2")]:
                box = page.locator(f"input[aria-label^='number input for {label}']")
                box.fill(value)
                box.press("Enter")
            page.locator("#continue").click()
            page.locator("#result-0 img").wait_for()
            assert "/my_seed_cont_00.png" in page.locator("#result-0 img").get_attribute("src")
            player = page.locator("#audio-0")
            assert player.locator("a[download]").get_attribute("href").endswith("/my_seed_cont_00.wav")
            # the browser fetched and decoded the WAV: its player shows the length (6 s seed + 4 s new + the tail)
            page.wait_for_function("() => /^0:1[012]$/.test("
                                   "document.querySelector('#audio-0 #duration')?.textContent.trim() ?? '')")
            assert page.locator("#status").inner_text().strip() == f"2 continuation(s) ready. {PINNED.replace('`', '')}"
            with page.expect_download() as download:
                page.locator("#midi-0").click()
            saved = tmp_path / download.value.suggested_filename
            download.value.save_as(saved)
            assert saved.name == "my_seed_cont_00.mid" and end_time(saved) > 6.5
            page.locator("#arcs").get_by_text("attention arcs").click()  # open the panel
            page.locator("#draw-arcs").click()
            page.locator("#arcs-image img").wait_for()
            assert "_arcs_mean-mean_12.png" in page.locator("#arcs-image img").get_attribute("src")
            continue_further_in_page(page)
            page.screenshot(path=os.environ.get("MUSICTX_APP_SCREENSHOT", str(tmp_path / "app.png")), full_page=True)
        finally:
            browser.close()
