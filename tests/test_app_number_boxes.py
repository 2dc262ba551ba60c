"""The page's number boxes, for real: a value a box cannot take is refused in its tab's status line, naming the box
and its range, and the box keeps what was typed (`musictx.app.boxes`). Gradio's slider set its number box back
into range when the box lost focus (pressing Continue does that), so 500 seed seconds ran as 30, -3 seconds to add
as 1, 9 samples as 4 and an emptied box as its minimum, and nothing said so; 2.5 samples reached the handler and
ran as 2, and Gradio's whole-number box rounded a random seed of 2.5 to 2 on every tab."""

from __future__ import annotations

import pytest

from musictx.app.core import MOTIF
from musictx.decoding import GenerateError

from .test_app import CHROMIUM, NO_APP_EXTRA, serving, upload
from .test_app_tabs import browser_page

needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)")
ENDED = r"/ready|Done|went wrong/"  # a request that ran: on the old page, the clamped or rounded value was used
# (the slider's label starts with, what is typed, what the status line says after "Cannot continue: ")
CONTINUE_CASES = [("Seed seconds", "500", "Seed seconds must be a number from 1 to 30, got 500"),
                  ("Seconds to add", "-3", "Seconds to add must be a number from 1 to 60, got -3"),
                  ("Temperature", "9", "Temperature must be a number from 0 to 1.5, got 9"),
                  ("Top-p", "0.1", "Top-p must be a number from 0.5 to 1, got 0.1"),
                  ("Samples", "2.5", "Samples must be a whole number from 1 to 4, got 2.5"),
                  ("Samples", "9", "Samples must be a whole number from 1 to 4, got 9"),
                  ("Samples", "", "Samples is empty: give a whole number from 1 to 4"),
                  ("Come back to the seed", "7", "Come back to the seed must be a number from 0 to 2, got 7")]
SEED_SAID = "Random seed (seed) must be a whole number, got 2.5"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """The app as a user starts it, without --model; its URL."""
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    with serving(tmp_path_factory.mktemp("boxes")) as (url, _):
        yield url


def answer(page, status: str, said: str | None = None) -> str:
    """The status line once it says ``said`` or a request has run (the last refusal is still there before); a
    toast, Gradio's refusal before the handler ran, fails with its words."""
    page.wait_for_function(f"([said, ended]) => {{ const t = document.querySelector('#{status}')?.innerText.trim() "
                           "?? ''; return (said !== null && t === said) || new RegExp(ended).test(t) "
                           "|| document.querySelector('.toast-body') !== null }", arg=[said, ENDED.strip("/")])
    toast = page.locator(".toast-body")
    assert not toast.count(), f"the page refused the request: {toast.first.inner_text()}"
    return page.locator(f"#{status}").inner_text().strip()


def slider_box(page, label: str):
    return page.locator(f"input[aria-label^='number input for {label}']")


@needs_chromium
def test_browser_continue_refuses_what_a_slider_cannot_take(app):
    """Each slider of the Continue tab given a value out of its range (or 2.5 samples, or nothing): Continue says
    so, naming the box, and the box still shows what was typed; then a random seed of 2.5; then the boxes put
    right, Continue runs."""
    with browser_page(app) as page:
        for label, typed, said in CONTINUE_CASES:
            box = slider_box(page, label)
            before = box.input_value()
            box.fill(typed)
            page.locator("#continue").click()
            assert answer(page, "status", f"Cannot continue: {said}") == f"Cannot continue: {said}", (label, typed)
            assert box.input_value() == typed
            box.fill(before)
        seed = page.locator("#random-seed input")
        seed.fill("2.5")
        page.locator("#continue").click()
        assert answer(page, "status", f"Cannot continue: {SEED_SAID}") == f"Cannot continue: {SEED_SAID}"
        seed.fill("3")
        for label, typed in [("Seconds to add", "2"), ("Samples", "1")]:
            slider_box(page, label).fill(typed)
        page.locator("#continue").click()
        assert answer(page, "status").startswith("1 continuation(s) ready")


@needs_chromium
def test_browser_fill_and_write_refuse_a_random_seed_of_two_and_a_half(app):
    """Fill, Retry and Write with 2.5 in the tab's Random seed box: each is refused in the status line, naming the
    box (Gradio rounded it to 2 and the take was made, its title saying "random seed 2"); the arcs' "Last notes
    that ask" slider at 100 is refused under Draw arcs (it ran as 48)."""
    with browser_page(app) as page:
        for tab, prefix, buttons, verb in [("Infill", "infill", ("go", "retry"), "fill"),
                                           ("Accompany", "accompany", ("go",), "accompany")]:
            page.get_by_role("tab", name=tab).click()
            page.locator(f"#{prefix}-seed input").fill("2.5")
            for button in buttons:
                page.locator(f"#{prefix}-keep").click()  # another line in the status, so that each answer is new
                page.locator(f"#{prefix}-status").get_by_text("nothing to keep yet").wait_for()
                page.locator(f"#{prefix}-{button}").click()
                said = f"Cannot {verb}: {SEED_SAID}"
                assert answer(page, f"{prefix}-status", said) == said, (tab, button)
            assert page.locator(f"#{prefix}-seed input").input_value() == "2.5"
        page.get_by_role("tab", name="Continue").click()
        page.locator("#arcs").get_by_text("attention arcs").click()  # open the panel
        slider_box(page, "Last notes that ask").fill("100")
        page.locator("#draw-arcs").click()
        said = "Cannot draw: Last notes that ask must be a whole number from 1 to 48, got 100"
        page.wait_for_function("() => document.querySelector('#arcs-message')?.innerText.includes('Cannot draw')")
        assert page.locator("#arcs-message").inner_text().strip() == said


def test_http_an_api_caller_gets_the_same_line(app, tmp_path):
    """gradio_client sends what it is given: 9 samples was Gradio's "Value 9 is greater than maximum value 4." (an
    error raised in the caller, not naming the setting); now it is the status line the page shows."""
    from gradio_client import Client

    client = Client(app, verbose=False, download_files=str(tmp_path))
    out = client.predict(upload(MOTIF), 20, 15, 1.0, 0.95, 9, 0, api_name="/continue_seed")
    assert out[0] == "**Cannot continue:** Samples must be a whole number from 1 to 4, got 9"
    out = client.predict(upload(MOTIF), "5", "8", "", True, 2.5, "", api_name="/infill_bars")
    assert out[0] == f"**Cannot fill:** {SEED_SAID}"


def test_a_box_refuses_what_is_not_a_number_in_its_range():
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    from musictx.app.boxes import LENGTH, SAMPLES

    assert SAMPLES.check(3.0) == 3 and isinstance(SAMPLES.check(3.0), int) and LENGTH.check(2.5) == 2.5
    for box, value, said in [(SAMPLES, True, "got 1"), (SAMPLES, "abc", "got 'abc'"), (LENGTH, float("nan"), "got nan"),
                             (LENGTH, " ", "Seconds to add is empty"), (LENGTH, 61, "got 61")]:
        with pytest.raises(GenerateError, match=said):
            box.check(value)
