"""What a researcher running musictx-evaluate and the compare report met: a song whose real continuation ends early,
an input folder that is not there, recall gaps and contexts that went missing without a word, a report headed
"test" whatever split it was scored on, and a two-sample row "with the annotated chords" where no song has any."""

from __future__ import annotations

import json
import shutil

import pytest

from musictx.checkpoints.model_store import load_model
from musictx.evaluation.compare import write_report
from musictx.evaluation.recall import evaluate_recall, format_recall_table
from musictx.evaluation.run import EvaluateError, evaluate, evaluation_options, run_evaluation, write_result
from musictx.evaluation.scorecard import run_scorecard
from musictx.io.token_store import TokenArrays

from .helpers import PIANO_DIR, needs_shared
from .metrical_fixtures import fixture_band_dir, fixture_remi_dir  # noqa: F401  (fixtures)

BACH = PIANO_DIR / "asap" / "Bach"
SHORT = BACH / "Prelude" / "bwv_860" / "Ko04M.mid"  # 49.3 s: 14 s of music after a 10 s seed from 25 s
LONG = BACH / "Fugue" / "bwv_865" / "Rizikov01M.mid"  # 253 s


@needs_shared
def test_a_song_ending_before_its_real_continuation_is_skipped_saying_why():
    """The scorecard set a 30 s continuation against the 14 s of music a 49 s performance had left (its notes a
    second 2x the real's, read against silence); the song is skipped with the reason, the next one scored."""
    net, tok, _ = load_model("piano")
    opts = {"seed_seconds": 10, "seed_from": 25, "length_seconds": 20, "num_samples": 1}
    result = run_scorecard(net, tok, [SHORT, LONG], opts, progress=lambda _: None)
    assert [s["song"] for s in result["songs"]] == [str(LONG)]
    (song, reason), = result["skipped"]
    assert song == str(SHORT)
    assert "after the seed" in reason and "less than length_seconds=20" in reason and "lower seed_from" in reason


def _copy_prepared(prepared_dir, to, input_dir):
    """A copy of the tiny prepared dataset whose manifest names ``input_dir`` as the prep's input folder."""
    shutil.copytree(prepared_dir, to, ignore=shutil.ignore_patterns("midi"))
    manifest = json.loads((to / "manifest.json").read_text())
    (to / "manifest.json").write_text(json.dumps({**manifest, "input_dir": input_dir}))
    return to


def test_an_input_folder_that_is_not_there_is_said_once_naming_the_manifest(prepared_dir, tmp_path, monkeypatch):
    """A manifest written with a relative input_dir, read from another folder: every song had been skipped as
    "no such file (the prep's input folder has no file there)", and two_sample then asked for longer songs."""
    data = _copy_prepared(prepared_dir, tmp_path / "data", "../songs")
    monkeypatch.chdir(tmp_path)  # ../songs from here: no such folder
    for mode in ("continuation", "two_sample"):
        opts = evaluation_options(checkpoint="piano", data={"dir": str(data)}, mode=mode, progress=False)
        with pytest.raises(EvaluateError, match=r"data/manifest\.json: its input folder input_dir=\.\./songs is not "
                                                rf"there, a relative path read from the current folder {tmp_path}; "
                                                f"mode={mode} reads"):
            run_evaluation(opts)


def test_recall_says_which_gaps_and_contexts_it_left_out(prepared_dir):
    """A gap whose probe passes the context was dropped without a word; a context longer than every piece emptied
    the whole NLL-vs-context table (its shorter contexts too)."""
    net, tok, _ = load_model("piano")
    cfg = evaluation_options(recall={"gaps": [0, 16, 5000], "num_probes": 2, "passage": 128, "contexts": [64, 100000],
                                     "targets": 32, "num_stretches": 1, "repeat_windows": 1}).recall
    res = evaluate_recall(net, tok, TokenArrays(prepared_dir, "train"), cfg, context=2048, progress=lambda _: None)
    assert [r["gap"] for r in res["copy"]["exact"]] == [0, 16] and res["gaps_left_out"] == [5000]
    assert [r["context"] for r in res["context"]] == [64] and res["context"][0]["nll"] > 0
    table = format_recall_table(res)
    assert "gaps [5000] left out: the passage (128 ids) twice with such a gap passes the model's context of 2048" \
        in table
    assert "| 64 |" in table and "context 100000 left out: no piece of the split holds it and its 32 targets" in table


def test_the_compare_report_names_the_split_and_tells_runs_on_other_data_apart(prepared_dir, tmp_path):
    """Runs scored on validation were headed "test NLL"; two runs of one class could not be told apart, nor runs
    scored on different splits."""
    for name, split in (("a", "validation"), ("b", "validation")):
        opts = evaluation_options(checkpoint="piano", data={"dir": str(prepared_dir)}, split=split, progress=False)
        write_result(run_evaluation(opts), tmp_path / "same" / name)
    table = write_report(tmp_path / "same").read_text()
    assert "| validation NLL | validation ppl | validation acc |" in table and "test NLL" not in table
    assert "MusicTransformer (a)" in table and "MusicTransformer (b)" in table
    assert "| - | 3792 |" in table  # no training log: its speed "-", was "nan"
    shutil.copytree(tmp_path / "same" / "a", tmp_path / "mixed" / "a")
    opts = evaluation_options(checkpoint="piano", data={"dir": str(prepared_dir)}, split="test", progress=False)
    write_result(run_evaluation(opts), tmp_path / "mixed" / "b")
    mixed = write_report(tmp_path / "mixed").read_text()
    assert "| eval NLL |" in mixed and "| evaluated on |" in mixed
    assert f"{prepared_dir} [validation] |" in mixed and f"{prepared_dir} [test] |" in mixed


def test_two_sample_without_annotated_chords_says_so_instead_of_a_row_of_noise(remi_dir, tmp_path):
    """Songs without a chord_midi.txt (the piano's, these band songs): the test "with the annotated chords" only
    added empty columns, and its table rows read as if the chords had been heard."""
    opts = evaluation_options(checkpoint="pop", data={"dir": str(remi_dir)}, split="train", mode="two_sample",
                              progress=False, output_dir=str(tmp_path / "out"),
                              two_sample={"seed_from": 2, "seed_seconds": 4, "length_seconds": 6, "folds": 2,
                                          "repeats": 1, "permutations": 0, "top": 3, "max_songs": 3})
    result, path = evaluate(opts)
    assert result["two_sample"]["annotated_songs"] == 0
    assert json.loads(path.read_text())["two_sample"]["annotated_songs"] == 0
    from musictx.evaluation.two_sample import format_two_sample

    table = format_two_sample(result["two_sample"])
    assert "all, the annotated chords too" not in table and "no song here has annotated chords" in table
