"""``musictx-app``'s request logic without a server: `Continuer` with the shipped model (results named after the
upload, progress, continuing further, the seed's shade, previews, arcs) and its messages for bad input. The served
page, over HTTP and in a headless Chromium: `tests/test_app.py`."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pretty_midi
import pytest

from musictx.app.cli import parse_args
from musictx.app.core import MOTIF, Continuer, Settings, draw_request, preview_request, run_request
from musictx.evaluation.arcs import ArcChoice
from musictx.io.audio import RELEASE_TAIL_SECONDS, read_wav
from musictx.io.piano_roll import EARLIER_MODEL_SHADE
from tests.test_app import LIBRARY_WORDS, PINNED, UPLOAD_MESSAGES, bad_files, end_time


# ----- the request logic, without a server ---------------------------------------------------------------
@pytest.fixture(scope="module")
def continuer(tmp_path_factory) -> Continuer:
    """The piano model pinned, as --model piano does: these tests read results as a performance model does
    (the bundled motif, on a beat grid, would get pop otherwise; tests/test_app_tabs.py tests the choice)."""
    return Continuer("piano", workdir=tmp_path_factory.mktemp("app"), max_upload_mb=0.5)


def test_continuer_writes_results_and_reports_progress(continuer):
    seen = []
    results = continuer.continue_file(MOTIF, Settings(seed_seconds=3, length_seconds=2, num_samples=2, seed=1),
                                      report=lambda fraction, text: seen.append((fraction, text)))
    assert len(results) == 2
    for r in results:
        assert r.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert end_time(r.midi) > 3.5  # the seed's 3 s and new notes after them
        if continuer.audio_reason is None:
            rate, x = read_wav(r.wav)
            assert abs(len(x) / rate - (end_time(r.midi) + RELEASE_TAIL_SECONDS)) < 0.25
    generating = [f for f, text in seen if text.startswith("generating")]
    assert generating and generating == sorted(generating) and generating[-1] > 0.5
    assert seen[-1][1].startswith("writing sample 2 of 2")


def test_bad_inputs_become_messages(continuer, tmp_path, monkeypatch):
    files = bad_files(tmp_path)
    big = tmp_path / "big.mid"
    big.write_bytes(b"MThd" + bytes(600_000))
    cases = {UPLOAD_MESSAGES[name]: path for name, path in files.items()}
    cases.update({"larger than the 0.5 MB": big, "no seed file": None, "is gone": tmp_path / "deleted.mid",
                  "is a folder, not a MIDI file": tmp_path})
    for expected, path in cases.items():
        results, message = run_request(lambda p=path: continuer.continue_file(p, Settings()))
        assert results is None and message.startswith("**Cannot continue:**") and expected in message
        assert str(tmp_path) not in message and "Traceback" not in message
        assert not any(word in message for word in LIBRARY_WORDS) and "\n" not in message
    results, message = run_request(lambda: continuer.continue_file(MOTIF, Settings(temperature=-1)))
    assert results is None and "temperature" in message
    monkeypatch.setattr(continuer, "check_upload", lambda p: 1 / 0)
    results, message = run_request(lambda: continuer.continue_file(MOTIF, Settings()))
    assert results is None and "Something went wrong" in message and "ZeroDivision" not in message


def test_seed_from_and_the_merged_tracks_line(continuer, tmp_path):
    band = pretty_midi.PrettyMIDI()
    for name, program, pitch in [("melody", 73, 72), ("piano", 0, 48)]:
        inst = pretty_midi.Instrument(program=program, name=name)
        inst.notes += [pretty_midi.Note(90, pitch + k, 0.5 * k, 0.5 * k + 0.4) for k in range(8)]
        band.instruments.append(inst)
    kit = pretty_midi.Instrument(program=0, is_drum=True)
    kit.notes += [pretty_midi.Note(100, 36, 0.25 * k, 0.25 * k + 0.1) for k in range(16)]
    band.instruments.append(kit)
    band.write(str(tmp_path / "band.mid"))
    settings = Settings(seed_seconds=1.0, length_seconds=1, num_samples=1, seed=4, seed_from=2.2)
    results, message = run_request(lambda: continuer.continue_file(tmp_path / "band.mid", settings))
    assert message == (f"1 continuation(s) ready. {PINNED}\n\nband.mid: merged 2 tracks (melody [Flute], piano; "
                       "16 notes) into one piano stream; dropped 1 drum track (drums, 16 notes); the seed is played "
                       "loudly (median velocity 89): heard at 63, its new notes written back as loudly.")  # at 90: ff
                       # for the piano model, whose music's level is 63 (loud_seed_ratio, in the page's words)
    notes = continuer.first_model().tokenizer.read(results[0].midi)
    seed_part = sorted(zip(notes.start[notes.start < 0.99].round(2).tolist(), notes.pitch[notes.start < 0.99].tolist(),
                           strict=True))
    assert seed_part == [(0.0, 53), (0.0, 77), (0.5, 54), (0.5, 78)]  # the notes from 2.5 s of the file on
    _, plain = run_request(lambda: continuer.continue_file(MOTIF, Settings(seed_seconds=2, length_seconds=1,
                                                                            num_samples=1)))
    assert plain == f"1 continuation(s) ready. {PINNED}"  # one piano track: nothing worth saying on the page


def test_the_guidance_setting_reaches_the_sampler(continuer):
    """The page's "come back to the seed" slider: 0 samples the model alone, the default leans on the seed;
    the same random seed then gives other music, and a negative weight is refused with its name."""
    def notes(guidance: float):
        settings = Settings(seed_seconds=8, length_seconds=4, num_samples=1, seed=3, recall_guidance=guidance)
        [result] = continuer.continue_file(MOTIF, settings)
        return continuer.first_model().tokenizer.read(result.midi).pitch.tolist()

    assert notes(0.0) != notes(Settings.recall_guidance) and Settings.recall_guidance > 0
    _, message = run_request(lambda: continuer.continue_file(MOTIF, Settings(recall_guidance=-1)))
    assert message.startswith("**Cannot continue:**") and "recall_guidance.strength must be >= 0" in message


def test_arcs_of_a_result_and_bad_views_as_messages(continuer):
    [result] = continuer.continue_file(MOTIF, Settings(seed_seconds=3, length_seconds=2, num_samples=1, seed=2))
    png, message = draw_request(lambda: continuer.draw_arcs(result.midi, ArcChoice(layer=0, last_notes=5),
                                                            continuer.takeovers[str(result.midi)]))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.parent == result.midi.parent
    assert message.startswith("Each orange note")
    # drawn over the ids the result was made of (no second reading of its file): they are its notes
    made = continuer.first_model().tokenizer.decode_notes(continuer.ids[str(result.midi)])
    back = continuer.first_model().tokenizer.read(result.midi)
    assert len(made) == len(back) > 0 and (made.pitch == back.pitch).all()
    assert abs(made.start - back.start).max() < 0.011
    png, message = draw_request(lambda: continuer.draw_arcs(result.midi, ArcChoice(head=99)))
    assert png is None and message.startswith("**Cannot draw:**") and "head=99 out of range" in message


def copy_of_motif(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(MOTIF, folder / name)
    return folder / name


def shade_pixels(png: Path) -> tuple[int, int]:
    """(pixels of the seed's grey, pixels of the earlier model output's shade) in a piano roll."""
    import numpy as np
    from matplotlib.colors import to_rgb
    from matplotlib.image import imread

    rgb = imread(png)[..., :3]
    return tuple(int((np.abs(rgb - np.array(to_rgb(c))).max(axis=-1) < 0.01).sum())
                 for c in ("0.85", EARLIER_MODEL_SHADE))


def test_results_are_named_after_the_upload_and_numbered_through_the_session(continuer, tmp_path):
    seed = copy_of_motif(tmp_path, "my seed.mid")
    first = continuer.continue_file(seed, Settings(seed_seconds=2, length_seconds=1, num_samples=2, seed=1))
    again = continuer.continue_file(seed, Settings(seed_seconds=2, length_seconds=1, num_samples=1, seed=1))
    assert [r.midi.name for r in first + again] == ["my_seed_cont_00.mid", "my_seed_cont_01.mid", "my_seed_cont_02.mid"]
    assert first[1].png.name == "my_seed_cont_01.png"


def test_continue_further_keeps_the_last_seed_seconds_and_says_so(continuer, tmp_path):
    seed = copy_of_motif(tmp_path, "take.mid")
    [first] = continuer.continue_file(seed, Settings(seed_seconds=3, length_seconds=4, num_samples=1, seed=1))
    end = end_time(first.midi)
    assert end > 5.5
    settings = Settings(seed_seconds=2, length_seconds=1, num_samples=1, seed=2)
    results, message = run_request(lambda: continuer.continue_further(first.midi, settings))
    [again] = results
    assert again.midi.name == "take_cont_01.mid"  # named after the upload, not after take_cont_00
    ready, said = message.split("\n\n")
    assert ready == f"1 continuation(s) ready. {PINNED}"
    assert said.startswith("Seed: the last ") and "of take_cont_00.mid" in said
    assert 0 < continuer.takeovers[str(again.midi)] <= 2.01  # the seed: at most the last 2 s of the result
    assert end_time(again.midi) < end - 1.5  # not the whole result again
    _, message = run_request(lambda: continuer.continue_further(first.midi, replace(settings, seed_seconds=None)))
    assert message.endswith(f"Seed: all {end:.1f} s of take_cont_00.mid.")


def test_a_result_continued_further_shades_the_users_seed_apart(continuer):
    [first] = continuer.continue_file(MOTIF, Settings(seed_seconds=3, length_seconds=3, num_samples=1, seed=5))
    grey, earlier = shade_pixels(first.png)
    assert grey > 2000 and earlier == 0  # a first take: the seed is all the user's
    [whole] = continuer.continue_further(first.midi, Settings(seed_seconds=None, length_seconds=1, num_samples=1))
    assert continuer.lineage[str(whole.midi)].user_until == pytest.approx(3.0)
    grey, earlier = shade_pixels(whole.png)
    assert grey > 2000 and earlier > 2000
    [tail] = continuer.continue_further(first.midi, Settings(seed_seconds=1.5, length_seconds=1, num_samples=1))
    grey, earlier = shade_pixels(tail.png)  # the last 1.5 s of the first take: all model output
    # no seed shade: what is left of the grey colour is a few anti-aliased note edges, not a span
    assert continuer.lineage[str(tail.midi)].user_until == 0 and grey < earlier / 20 and earlier > 2000


def test_preview_of_a_seed_file(continuer, tmp_path):
    png, message = preview_request(lambda: continuer.preview(copy_of_motif(tmp_path, "mine.mid")))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.name.endswith("_mine.png") and message == ""
    for name, path in bad_files(tmp_path).items():
        png, message = preview_request(lambda p=path: continuer.preview(p))
        assert png is None and message.startswith(f"**Cannot preview:** {UPLOAD_MESSAGES[name]}")
        assert not any(word in message for word in LIBRARY_WORDS)


def test_cli_defaults_bind_localhost_and_the_shipped_model():
    args = parse_args([])
    assert args.host == "127.0.0.1" and args.model is None
    assert parse_args(["--model", "some/folder", "--port", "9000"]).model == "some/folder"


def test_a_file_just_over_the_limit_is_refused_in_numbers_that_differ():
    from musictx.app.core import too_large

    said = too_large(5 * 2**20 + 4000, 5.0)
    assert said == "5.004 MB (5,246,880 bytes) is larger than the 5 MB (5,242,880 bytes) allowed"
    assert too_large(1200, 0.001).startswith("0.001 MB (1,200 bytes) is larger than the 0.001 MB (1,048 bytes)")
