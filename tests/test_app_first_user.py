"""``musictx-app`` as a new musician meets it, without ``--model`` (each upload gets the shipped model chosen for
it): a broken or empty upload is refused in one line that names the file, never the server's temporary path or
the command line's options; an empty song box names the tab's own box; a negative seed start is refused in the
status line, naming its box; the Infill and Accompany tabs show the bars drawn so far while they write."""

from __future__ import annotations

import shutil

import pytest

from .helpers import SHARED_DATA, needs_shared
from .test_app import CHROMIUM, NO_APP_EXTRA, accompany_in_page, bad_files, clear_box, serving, upload_to_box
from .test_app_tabs import browser_page, finished

POP_SONG = SHARED_DATA / "pop" / "POP909" / "098" / "098.mid"  # 45 s, 3 tracks: the shortest main file
CLI_WORDS = ("seed_midi=", "Leave seed_midi unset", "/")  # a server path or a command-line option
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)")


@pytest.fixture(scope="module")
def cont(tmp_path_factory):
    from musictx.app.core import Continuer

    return Continuer(workdir=tmp_path_factory.mktemp("first_user"))  # no --model: the file decides


def test_a_broken_or_empty_upload_is_named_by_its_file_alone(cont, tmp_path):
    """The model choice reads the upload before anything else: its refusal of a damaged file or one without
    notes said ``seed_midi=/tmp/gradio/<hash>/cut.mid`` and told the user to leave an option unset."""
    from musictx.app.core import Settings, preview_request, run_request

    files = bad_files(tmp_path)
    for name, words in [("cut", "cut.mid: a damaged MIDI file: it starts like one"),
                        ("empty", "empty.mid: no notes")]:
        _, said = run_request(lambda p=files[name]: cont.continue_file(p, Settings(num_samples=1)))
        _, shown = preview_request(lambda p=files[name]: cont.preview_with_model(p))
        assert said.startswith(f"**Cannot continue:** {words}"), said
        assert shown.startswith(f"**Cannot preview:** {words}"), shown
        assert not any(w in said + shown for w in CLI_WORDS), (said, shown)


def test_an_empty_song_box_names_the_tabs_own_box(cont):
    from musictx.app.infill_tab import Filler
    from musictx.app.messages import task_request

    filler = Filler(cont)
    assert task_request(lambda: filler.fill(None, 5, 8), "fill")[1] == (
        "**Cannot fill:** no song file: upload a MIDI file in Song MIDI, or press Use the Continue tab's seed")
    assert task_request(lambda: filler.accompany(""), "accompany")[1] == (
        "**Cannot accompany:** no melody file: upload a MIDI file in Melody MIDI")


def test_infill_and_accompany_report_the_bars_drawn(cont):
    """The motif's bars 5-8 filled and its 8 bars accompanied: the progress counts up to every bar asked."""
    from musictx.app.infill_tab import Filler

    filler = Filler(cont)
    for work, bars in [(lambda report: filler.fill(cont.motif, 5, 8, report=report), 4),
                       (lambda report: filler.accompany(cont.motif, report=report), 8)]:
        seen = []
        work(lambda fraction, text, seen=seen: seen.append((fraction, text)))
        assert seen[0] == (0.0, f"generating: bar 0 of {bars}") and seen[-1] == (1.0, f"generating: bar {bars} of "
                                                                                      f"{bars}")
        assert [f for f, _ in seen] == sorted(f for f, _ in seen)


@needs_chromium
@pytest.mark.slow  # 6-24 s of real processes; in `make test-all` (the fast suite stays under 10 min)
def test_browser_refusals_are_one_line_in_the_status(tmp_path):
    """In the page: a damaged upload's preview note and Continue name the file alone; a seed start of -3 is
    refused in the status line, naming the box (Gradio's own refusal was a toast, "Value -3 is less than minimum
    value 0.", over the last request's message); an empty Song box names that box."""
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    cut = bad_files(tmp_path / "bad")["cut"]
    with serving(tmp_path) as (url, _), browser_page(url) as page:
        clear_box(page)
        upload_to_box(page, "seed-file", cut)
        note = page.locator("#seed-roll-note")
        note.get_by_text("Cannot preview").wait_for()
        assert note.inner_text().startswith("Cannot preview: cut.mid: a damaged MIDI file"), note.inner_text()
        page.locator("#continue").click()
        status = finished(page, "status")
        assert status.startswith("Cannot continue: cut.mid: a damaged MIDI file") and "/" not in status, status
        page.get_by_role("button", name="Use the bundled motif").click()
        page.wait_for_function("() => document.querySelector('#seed-roll img')?.src.endsWith('_motif.png')")
        start = page.get_by_label("Seed starts at (seconds into the file)")
        start.fill("-3")
        page.locator("#continue").click()
        assert said(page, "status", "Seed starts at") == ("Cannot continue: Seed starts at (seed_from) must be 0 to "
                                                          "3600 seconds into the file, got -3")
        page.get_by_role("tab", name="Infill").click()
        clear_box(page, "infill-song")
        page.locator("#infill-go").click()
        assert said(page, "infill-status", "no song file").startswith("Cannot fill: no song file: upload a MIDI file "
                                                                      "in Song MIDI")


def said(page, status: str, words: str) -> str:
    """The status text once it holds ``words`` (the last request's refusal is still there before); a toast,
    Gradio's refusal before the handler ran, fails with its words."""
    page.wait_for_function(f"() => document.querySelector('#{status}')?.innerText.includes({words!r}) "
                           "|| document.querySelector('.toast-body') !== null")
    toast = page.locator(".toast-body")
    assert not toast.count(), f"the page refused the request: {toast.first.inner_text()}"
    return page.locator(f"#{status}").inner_text()


@needs_shared
@needs_chromium
@pytest.mark.slow  # 6-24 s of real processes; in `make test-all` (the fast suite stays under 10 min)
def test_browser_accompany_shows_the_bars_drawn(tmp_path):
    """12 bars of a POP909 song (of its 14, read without its beat file) accompanied anew: the status under Write
    counts the bars while they are drawn (it showed only Gradio's seconds counter, "processing | 78.7/2.0s" for a
    long piece), then says Done."""
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    if not POP_SONG.is_file():
        pytest.skip(f"real MIDI data not found at {SHARED_DATA}")
    song = tmp_path / "pop_song.mid"
    shutil.copyfile(POP_SONG, song)
    with serving(tmp_path) as (url, _), browser_page(url) as page:
        accompany_in_page(page, song, "1", "12")
        page.locator("#accompany-status").get_by_text("generating: bar").first.wait_for()
        page.wait_for_function("() => /^Done/.test(document.querySelector('#accompany-status')?.innerText ?? '')")
        assert "bars 1-12" in page.locator("#accompany-title").inner_text()


@needs_shared
def test_a_pickup_left_out_of_the_seed_is_said_on_the_page(cont):
    """POP909 003 opens with a pickup of 2 notes before its first full bar; the seed starts at that bar, so the
    results have no pickup, which only the server's log said (the page showed "model from 20.49 s")."""
    from musictx.app.core import Settings, run_request

    song = SHARED_DATA / "pop" / "POP909" / "003" / "003.mid"
    _, said = run_request(lambda: cont.continue_file(song, Settings(seed_seconds=20, length_seconds=2, num_samples=1)))
    assert said.endswith("The seed is bars 2-8, from its first full bar: the 2 notes of the pickup before it are left "
                         "out."), said
    _, later = run_request(lambda: cont.continue_file(song, Settings(seed_seconds=8, length_seconds=2, num_samples=1,
                                                                       seed_from=10)))
    assert "pickup" not in later, later  # a seed from later in the song leaves no pickup out
