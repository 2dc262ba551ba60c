"""Each tab of ``musictx-app`` from a fresh page, in a headless Chromium, as a musician meets it: one app started
without ``--model`` serves Continue, Infill and Accompany in turn (no restart), with a real POP909 song and a
real piano performance from ../shared/data. Each tab is used at its first state (only Continue's length and
samples are shortened, through the page's own fields), its main button pressed, and a MIDI file downloaded;
the page says which model it chose (pop_infill for Infill, pop for Accompany and for a song on a beat grid,
piano for a performance), and the progress text sits under the pressed button."""

from __future__ import annotations

import shutil
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest
from symusic import Score

from .helpers import SHARED_DATA, needs_shared
from .test_app import CHROMIUM, CHROMIUM_ARGS, NO_APP_EXTRA, clear_box, end_time, serving, upload_to_box

POP_SONG = SHARED_DATA / "pop" / "POP909" / "098" / "098.mid"  # 45 s, 3 tracks: the shortest main file
BACH_PRELUDE = SHARED_DATA / "piano" / "asap" / "Bach" / "Prelude" / "bwv_860" / "ZhangH04M.mid"  # 50 s, pedalled
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)")
DONE = r"/ready|Done|Cannot|went wrong/"  # a request's last word in a tab's status line


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """The app as a user starts it, without --model: (its URL, its log)."""
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    tmp = tmp_path_factory.mktemp("tabs")
    with serving(tmp) as (url, _):
        yield url, tmp / "server.log"


@pytest.fixture(scope="module")
def browser_uploads(tmp_path_factory) -> dict[str, Path]:
    """Uploads as a user has them, away from POP909's beat files: the song and the performance."""
    if not POP_SONG.is_file() or not BACH_PRELUDE.is_file():
        pytest.skip(f"real MIDI data not found at {SHARED_DATA}")
    folder = tmp_path_factory.mktemp("uploads")
    song, performance = folder / "pop_song.mid", folder / "bach_prelude.mid"
    shutil.copyfile(POP_SONG, song)
    shutil.copyfile(BACH_PRELUDE, performance)
    return {"song": song, "performance": performance}


@contextmanager
def browser_page(url: str):
    """A fresh page of ``url`` in a headless Chromium, closed after the block."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (dev extra)")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield fresh_page(browser, url)
        finally:
            browser.close()


def fresh_page(browser, url):
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page.set_default_timeout(120_000)  # generous for a loaded machine; each step takes seconds
    page.goto(url)
    return page


def finished(page, status: str) -> str:
    """The status text once a request has ended; a refusal before the handler ran (Gradio's own toast, as the
    out-of-range bar boxes gave) fails with the toast's words."""
    page.wait_for_function(f"() => {DONE}.test(document.querySelector('#{status}')?.innerText ?? '') "
                           "|| document.querySelector('.toast-body') !== null")
    toast = page.locator(".toast-body")
    assert not toast.count(), f"the page refused the request: {toast.first.inner_text()}"
    return page.locator(f"#{status}").inner_text()


def download(page, button: str, folder: Path) -> Path:
    """Press a download button; the saved file."""
    with page.expect_download() as got:
        page.locator(f"#{button}").click()
    saved = folder / got.value.suggested_filename
    got.value.save_as(saved)
    return saved


def near(page, first: str, second: str, most: float = 250) -> bool:
    """Whether the two elements sit within ``most`` pixels of each other, top to top (the same place on screen)."""
    a, b = page.locator(f"#{first}").bounding_box(), page.locator(f"#{second}").bounding_box()
    return abs(a["y"] + a["height"] - b["y"]) < most or abs(b["y"] + b["height"] - a["y"]) < most


def continue_tab(page, path: Path, model: str, folder: Path) -> Path:
    """Continue ``path`` with 2 s added and one sample (the page's fields); the rest at the first state."""
    page.get_by_role("tab", name="Continue").click()
    clear_box(page)
    upload_to_box(page, "seed-file", path)
    for label, value in [("Seconds to add", "2"), ("Samples", "1")]:
        box = page.locator(f"input[aria-label^='number input for {label}']")
        box.fill(value)
        box.press("Enter")
    page.locator("#continue").click()
    status = finished(page, "status")
    assert status.startswith("1 continuation(s) ready") and f"Model {model}:" in status, status
    assert near(page, "continue", "status")
    return download(page, "midi-0", folder)


def song_tab(page, tab: str, prefix: str, path: Path, model: str, folder: Path) -> tuple[Score, str]:
    """Infill or Accompany at its first state: upload, the main button, the take downloaded."""
    page.get_by_role("tab", name=tab).click()
    bars = [page.locator(f"#{prefix}-{end}").locator("input, textarea").input_value() for end in ("from", "to")]
    assert bars == (["5", "8"] if prefix == "infill" else ["", ""])  # the first state; Accompany's: empty, not 0
    box = "infill-song" if prefix == "infill" else "accompany-melody"
    clear_box(page, box)  # the tab opens on the bundled motif
    upload_to_box(page, box, path)
    page.locator(f"#{prefix}-go").click()
    status = finished(page, f"{prefix}-status")
    assert status.startswith("Done") and f"Model {model}:" in status, status
    assert near(page, f"{prefix}-go", f"{prefix}-status")
    title = page.locator(f"#{prefix}-title").inner_text()
    return Score(str(download(page, f"{prefix}-midi", folder))), title


def pitched(score: Score) -> dict[str, int]:
    return {t.name: len(t.notes) for t in score.tracks}


@needs_shared
@needs_chromium
def test_browser_every_tab_from_a_fresh_page(app, browser_uploads, tmp_path):
    """The default suite's run: a performance continued (piano), a song filled (pop_infill), the song accompanied
    anew over the whole piece (pop: the bar boxes start empty), in one page of one app."""
    with browser_page(app[0]) as page:
        made = continue_tab(page, browser_uploads["performance"], "piano", tmp_path)
        assert made.name == "bach_prelude_cont_00.mid" and end_time(made) > 20.5  # the 20 s seed, then new notes
        filled, title = song_tab(page, "Infill", "infill", browser_uploads["song"], "pop_infill", tmp_path)
        assert "bars 5-8" in title and len(filled.tracks) == 3
        # the whole song: its own accompaniment replaced by a new one written for its melody
        written, title = song_tab(page, "Accompany", "accompany", browser_uploads["song"], "pop", tmp_path)
        assert "BRIDGE, PIANO written for bars 1-" in title.replace(" (no notes)", "")  # a silent one is marked
        assert "own BRIDGE and PIANO replaced" in title
        counts = pitched(written)
        assert set(counts) == {"MELODY", "BRIDGE", "PIANO"} and counts["PIANO"] > 0, counts
    started = app[1].read_text()  # the start-up line names the app's option, not the command's checkpoint=
    assert "musictx.app: model chosen for each upload and tab" in started and "checkpoint=" not in started


@pytest.mark.slow
@needs_shared
@needs_chromium
def test_browser_every_tab_with_the_other_files(app, browser_uploads, tmp_path):
    """The other file in each tab: the song continued (pop, its three tracks kept apart), the performance filled
    and accompanied (its one track taken as the melody)."""
    with browser_page(app[0]) as page:
        made = continue_tab(page, browser_uploads["song"], "pop", tmp_path)
        assert [t.name for t in Score(str(made)).tracks] == ["MELODY", "BRIDGE", "PIANO"]
        filled, title = song_tab(page, "Infill", "infill", browser_uploads["performance"], "pop_infill", tmp_path)
        assert "bars 5-8" in title and sum(pitched(filled).values()) > 0
        written, title = song_tab(page, "Accompany", "accompany", browser_uploads["performance"], "pop", tmp_path)
        assert "BRIDGE, PIANO written for bars 1-" in title.replace(" (no notes)", "") and len(written.tracks) == 3


@needs_chromium
def test_every_tab_works_from_its_first_click_and_sigterm_stops_the_app(tmp_path):
    """A fresh page, nothing chosen: each tab opens on the bundled motif (the Infill tab with its roll, bars 5-8
    shaded) and its button writes a take. Then SIGTERM with the page open: the app closes the page's heartbeat
    connection first and stops (Gradio's own wait closed only the server, which then waited 5 s for it) and
    removes its work folder."""
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    with serving(tmp_path) as (url, proc), browser_page(url) as page:
        page.get_by_role("tab", name="Infill").click()
        page.wait_for_function("() => document.querySelector('#infill-band img')?.src.endsWith('_motif_bars.png')")
        page.locator("#infill-go").click()
        status = finished(page, "infill-status")
        assert status.startswith("Done") and "Model pop_infill:" in status, status
        assert page.locator("#infill-title").inner_text().startswith("motif_fill_00: bars 5-8")
        page.get_by_role("tab", name="Accompany").click()
        page.locator("#accompany-go").click()
        assert finished(page, "accompany-status").startswith("Done")
        title = page.locator("#accompany-title").inner_text().replace(" (no notes)", "")  # a silent track is marked
        assert title.startswith("motif_acc_00: BRIDGE, PIANO written for")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    log = (tmp_path / "server.log").read_text()
    assert "musictx.app: stopping" in log and "Keyboard interruption" not in log, log
    assert list((tmp_path / "gradio").iterdir()) == []
