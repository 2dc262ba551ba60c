"""The app's Infill and Accompany tabs for real: the served page (``--model`` the shipped pop model with rows
grown for the infill tokens, as tests/test_infill.py makes it) driven over HTTP with gradio_client. Outside
the bars asked for, the file comes back note for note; the melody is never touched; the piano roll shows the
range shaded; a refused range, a file without a melody and a model that cannot infill get one line."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pretty_midi
import pytest
from symusic import Score

from musictx.app.core import Continuer
from musictx.app.infill_tab import BAND_SHADE, Filler
from musictx.app.messages import task_request
from musictx.checkpoints.model_store import save_model_folder
from musictx.io.audio import RELEASE_TAIL_SECONDS, read_wav
from musictx.tasks.song_bars import read_song

from .metrical_fixtures import band_song
from .test_app import CHROMIUM, CHROMIUM_ARGS, NO_APP_EXTRA, clear_box, end_time, serving, upload
from .test_infill import SONG, check_outside_unchanged, fixture_grown, notes_of  # noqa: F401  (the fixture)
from .test_metrical import needs_pop


def band_pixels(png) -> int:
    """Pixels of the bar range's shade in a piano roll."""
    from matplotlib.colors import to_rgb
    from matplotlib.image import imread

    rgb = imread(png)[..., :3]
    return int((np.abs(rgb - np.array(to_rgb(BAND_SHADE))).max(axis=-1) < 0.01).sum())


@pytest.fixture(scope="module")
def grown_server(grown, tmp_path_factory):
    """The page served with the grown pop model saved as a model folder; (URL, tokenizer)."""
    pytest.importorskip("gradio", reason=NO_APP_EXTRA)
    net, tok = grown
    folder = tmp_path_factory.mktemp("grown") / "pop_grown"
    save_model_folder(net, tok, folder, dtype="float32")
    with serving(tmp_path_factory.mktemp("server"), "--model", str(folder)) as (url, _):
        yield url, tok


@pytest.fixture
def client(grown_server, tmp_path):
    gradio_client = pytest.importorskip("gradio_client", reason=NO_APP_EXTRA)
    return gradio_client.Client(grown_server[0], verbose=False, download_files=str(tmp_path))


@needs_pop
@pytest.mark.slow  # 8-15 s of real runs; in `make test-all` (the fast suite stays under 10 min)
def test_http_infill_a_pop909_song_retry_and_keep(grown_server, client, tmp_path):
    tok = grown_server[1]
    png, line = client.predict(upload(SONG), 9, 12, api_name="/infill_band")
    assert band_pixels(png) > 1000 and line.startswith("The shaded bars")
    out = client.predict(upload(SONG), 9, 12, "", True, 3, api_name="/infill_bars")
    status, seed, title, png, wav, midi = out[:6]
    assert status.startswith("Done") and seed == 3 and "bars 9-12 (every track) filled" in title
    midi = Path(midi["value"])
    assert midi.name == "003_fill_00.mid" and band_pixels(png) > 1000
    rate, x = read_wav(wav)  # the take plays in the page
    assert rate == 44100 and abs(len(x) / rate - (end_time(midi) + RELEASE_TAIL_SECONDS)) < 0.5
    # an upload comes without POP909's beat_midi.txt beside it: the app reads the file's own tempo map and meter
    alone = tmp_path / "003.mid"
    shutil.copyfile(SONG, alone)
    song = read_song(tok, alone)
    check_outside_unchanged(SONG, Score(str(midi)), song, 8, 12, None)
    again = client.predict(upload(SONG), 9, 12, "", False, 3, api_name="/retry_infill")
    assert again[1] == 4 and Path(again[5]["value"]).name == "003_fill_01.mid"  # the next random seed
    assert "filled, no copy cache" in again[2] and "copy" not in title  # the box unticked: the network alone
    assert Path(again[5]["value"]).read_bytes() != midi.read_bytes()
    status, takes = client.predict(api_name="/keep_infill")
    assert status.startswith("Kept 003_fill_01.mid") and [Path(t).name for t in takes["value"]] == ["003_fill_01.mid"]
    # a range outside the song: one line, the file's name, no server path
    refused = client.predict(upload(SONG), 500, 510, "", True, 0, api_name="/infill_bars")[0]
    assert refused.startswith("**Cannot fill:** 003.mid: bars 500-510 is outside the song's bars 1-")
    assert "\n" not in refused and "/" not in refused.split("**")[-1]
    assert client.predict(upload(SONG), 9, 12, "drums", True, 0, api_name="/infill_bars")[0].startswith(
        "**Cannot fill:** 003.mid: no track named drums")


def test_http_accompany_a_two_track_melody(grown_server, client, tmp_path):
    path = band_song(tmp_path / "tune.mid", bars=8, bpm=100, beats_per_bar=4, seed=3)  # Melody and Piano
    out = client.predict(upload(path), ["BRIDGE"], 1, 4, None, 2, api_name="/accompany_melody")
    assert out[0].startswith("Done") and "BRIDGE written for bars 1-4" in out[2]
    back, given = Score(out[5]["value"]), Score(str(path))
    assert [t.name for t in back.tracks] == ["Melody", "Piano", "BRIDGE"]
    for k in (0, 1):  # the given tracks, note for note
        assert notes_of(back.tracks[k]) == notes_of(given.tracks[k])
    bridge = back.tracks[2].notes.numpy()
    assert len(bridge["time"]) > 0 and band_pixels(out[3]) > 1000
    assert np.all(bridge["time"] + bridge["duration"] <= 4 * 4 * given.ticks_per_quarter)  # bars 1-4 only
    status, takes = client.predict(api_name="/keep_accompany")
    assert status.startswith("Kept tune_acc_00.mid")
    # no melody: two unnamed tracks; an already present track; bars out of range
    pm = pretty_midi.PrettyMIDI()
    for pitch in (60, 48):
        inst = pretty_midi.Instrument(0)
        inst.notes += [pretty_midi.Note(80, pitch, k * 0.5, k * 0.5 + 0.4) for k in range(8)]
        pm.instruments.append(inst)
    pm.write(str(tmp_path / "two.mid"))
    lines = [client.predict(upload(f), roles, a, b, None, 0, api_name="/accompany_melody")[0]
             for f, roles, a, b in ((tmp_path / "two.mid", [], None, None), (path, ["PIANO"], None, None),
                                    (path, [], 7, 12))]
    assert lines[0].startswith("**Cannot accompany:** two.mid: no melody track among")
    assert lines[1].startswith("**Cannot accompany:** tune.mid: already has a PIANO track")
    assert lines[2] == "**Cannot accompany:** tune.mid: bars 7-12 is outside the song's bars 1-8"
    assert all("\n" not in line for line in lines)
    # a lead sheet's chords lead the new track; a bad chord file is refused under its own name
    sheet, bad = tmp_path / "sheet.lab", tmp_path / "bad.lab"
    sheet.write_text("0.0 4.8 F:maj\n4.8 9.6 G:maj\n")
    bad.write_text("0.0 4.8 F:maj\n4.8 9.6 Gmaj\n")
    led = client.predict(upload(path), ["BRIDGE"], 1, 4, upload(sheet), 2, api_name="/accompany_melody")
    assert led[0].startswith("Done") and "following the chords of sheet.lab" in led[2]
    refused = client.predict(upload(path), ["BRIDGE"], 1, 4, upload(bad), 2, api_name="/accompany_melody")[0]
    assert refused.startswith("**Cannot accompany:** bad.lab, line 2: unknown chord 'Gmaj'"), refused
    assert "\n" not in refused and "/" not in refused.split("**")[-1]


def test_a_model_without_infill_tokens_says_so_in_one_line(tmp_path):
    cont = Continuer("pop", workdir=tmp_path / "work")
    filler = Filler(cont)
    assert "has no infill tokens" in filler.problem and "\n" not in filler.problem
    path = band_song(tmp_path / "tune.mid", bars=4, seed=1)
    result, message = task_request(lambda: filler.fill(path, 1, 2), "fill")
    assert result is None and message == f"**Cannot fill:** {filler.problem}"
    assert not list((tmp_path / "work").glob("run_*"))  # refused before any work
    # accompaniment needs no infill tokens: the shipped pop model writes it
    assert filler.accompany_problem is None
    melody = Score(str(path))
    melody.tracks = [melody.tracks[0]]
    melody.dump_midi(str(tmp_path / "melody.mid"))
    result, message = task_request(lambda: filler.accompany(tmp_path / "melody.mid", ["PIANO"], 1, 2), "accompany")
    assert result is not None, message
    written = Score(str(result.midi))
    assert [t.name for t in written.tracks] == ["Melody", "PIANO"] and len(written.tracks[1].notes) > 0


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)")
def test_browser_infill_tab_fill_and_keep(grown_server, tmp_path):
    """In the page: the Infill tab, a song chosen, its roll with bars 5-8 shaded, Fill, the take, Keep."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (dev extra)")
    song = band_song(tmp_path / "my_song.mid", bars=8, bpm=120, beats_per_bar=4, seed=5)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(120_000)
            page.goto(grown_server[0])
            page.get_by_role("tab", name="Infill").click()
            clear_box(page, "infill-song")  # the tab opens on the bundled motif
            page.locator("#infill-song input[type=file]").set_input_files(str(song))
            page.wait_for_function("() => document.querySelector('#infill-band img')?.src"
                                   ".endsWith('_my_song_bars.png')")
            page.locator("#infill-go").click()
            page.locator("#infill-roll img").wait_for()
            assert page.locator("#infill-roll img").get_attribute("src").endswith("/my_song_fill_00.png")
            assert "bars 5-8 (every track) filled" in page.locator("#infill-title").inner_text()
            page.locator("#infill-keep").click()
            page.locator("#infill-status").get_by_text("Kept my_song_fill_00.mid").wait_for()
            page.screenshot(path=os.environ.get("MUSICTX_INFILL_SCREENSHOT", str(tmp_path / "infill.png")),
                            full_page=True)
        finally:
            browser.close()
