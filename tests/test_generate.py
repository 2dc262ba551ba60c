"""Generation end to end: seed cutting, the seed kept in the output MIDI, continuation-only output, length
and determinism, bad inputs (clear errors, no files), the console script on a checkpoint trained with the
real configs, the config file, plots and audio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pretty_midi
import pytest

from musictx.checkpoints.model_store import shipped_models
from musictx.decoding.errors import GenerateError
from musictx.evaluation.plots import plot_loss_curves
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.audio import audio_unavailable, render_wav
from musictx.io.midi_io import Notes
from musictx.io.midi_write import notes_to_midi
from musictx.io.piano_roll import plot_piano_roll, plot_roll_panels
from musictx.io.tokenizer import EventTokenizer, TokenizerMismatchError
from musictx.tasks.seeds import cut_at_seconds, seed_from_midi, unconditional_seed

from .gen_fixtures import (  # noqa: F401  (fixtures)
    CKPT_CONTEXT,
    fixture_seed_midi,
    fixture_tiny_checkpoint,
)
from .helpers import write_random_midi

TOK = EventTokenizer()
LAY = TOK.layout
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def shift(steps: int) -> int:
    return LAY.time_shift + steps - 1


def options(checkpoint, out: Path, **kwargs) -> GenerateOptions:
    """Options for a quick run; ``kwargs`` override (``checkpoint`` included)."""
    base = dict(checkpoint=checkpoint and str(checkpoint), output_dir=str(out), num_samples=2, length_seconds=3.0,
                seed=11, audio=False)
    return GenerateOptions(**{**base, **kwargs})


def read_quantised(path) -> Notes:
    return TOK.quantize_notes(TOK.read(path))


def read_seed(path) -> Notes:
    """The quantised notes of a seed file as generation counts it: from its first note."""
    notes = read_quantised(path)
    first = round(notes.start.min() / 0.01)
    shifted = lambda t: (np.rint(t / 0.01).astype(np.int64) - first) * 0.01  # noqa: E731
    return Notes(shifted(notes.start), shifted(notes.end), notes.pitch, notes.velocity)


def select(notes: Notes, keep: np.ndarray) -> Notes:
    return Notes(notes.start[keep], notes.end[keep], notes.pitch[keep], notes.velocity[keep])


def assert_notes_equal(a: Notes, b: Notes, what: str = "notes") -> None:
    assert len(a) == len(b), f"{what}: {len(a)} vs {len(b)} notes"
    for f in Notes.FIELDS:
        np.testing.assert_allclose(getattr(a, f), getattr(b, f), atol=1e-9, err_msg=f"{what}: {f}")


# ----- seeds ---------------------------------------------------------------------------------------------
def test_cut_at_seconds_shortens_the_crossing_shift():
    ids = TOK.with_time_shifts(np.array([0, 50, 250, 300]), np.array([60, LAY.note_off + 60, 61, LAY.note_off + 61]))
    assert ids.tolist() == [60, shift(50), 188, shift(100), shift(100), 61, shift(50), 189]
    assert cut_at_seconds(TOK, ids, 2.0).tolist() == [60, shift(50), 188, shift(100), shift(50)]
    assert cut_at_seconds(TOK, ids, 2.5).tolist() == [60, shift(50), 188, shift(100), shift(100)]  # 61 is at the cut
    assert cut_at_seconds(TOK, ids, 0.3).tolist() == [60, shift(30)]
    assert cut_at_seconds(TOK, ids, 10.0).tolist() == ids.tolist()
    for seconds in (0.3, 2.0, 2.5):
        assert TOK.split_time_shifts(cut_at_seconds(TOK, ids, seconds))[2] == round(seconds * 100)


def test_seed_from_midi_and_unconditional_prompt(seed_midi):
    whole = seed_from_midi(TOK, seed_midi)
    ids = TOK.encode(seed_midi)
    lead = np.flatnonzero((ids < LAY.time_shift) | (ids >= LAY.velocity))[0]  # the seed opens with silence
    assert lead > 0 and np.array_equal(whole.ids, ids[lead:]) and whole.path == str(seed_midi.resolve())
    assert whole.silence_dropped == pytest.approx(read_quantised(seed_midi).start.min())
    assert whole.seconds == pytest.approx(TOK.split_time_shifts(whole.ids)[2] * 0.01)
    part = seed_from_midi(TOK, seed_midi, seed_seconds=2.0)
    assert part.seconds == pytest.approx(2.0) and len(part.ids) < len(whole.ids)
    assert seed_from_midi(TOK, seed_midi, seed_seconds=1000).seconds == whole.seconds
    uncond = unconditional_seed(TOK, velocity=64)
    assert [TOK.id_to_token(int(i)) for i in uncond.ids] == ["VELOCITY_16"] and uncond.seconds == 0


# ----- outputs -------------------------------------------------------------------------------------------
def test_a_continuation_that_strikes_no_note_says_so(seed_midi):
    """New ids that only move the clock (the seed's last notes ring on) are a sample a listener calls silent: its line
    says no new note was struck; one new NOTE_ON and it does not."""
    from musictx.tasks.continue_seed import take_of

    seed = seed_from_midi(TOK, seed_midi, seed_seconds=2.0)
    opts = GenerateOptions(length_seconds=2.0)
    shifts = np.full(20, LAY.time_shift + 9, dtype=np.int64)  # 20 shifts of 0.1 s: 2 s, nothing struck
    silent = take_of(TOK, seed, shifts, opts)
    assert silent.record["new_notes"] == 0 and "no new note struck: the seed's last notes ring on" in silent.line
    struck = take_of(TOK, seed, np.concatenate([[LAY.note_on + 12], shifts]), opts)
    assert struck.record["new_notes"] == 1 and "no new note" not in struck.line


def test_output_midi_starts_with_the_whole_seed(tiny_checkpoint, seed_midi, tmp_path):
    record = run(options(tiny_checkpoint, tmp_path / "out", seed_midi=str(seed_midi), length_seconds=4.0))
    seed_notes = read_seed(seed_midi)
    seed_end = record["seed"]["seconds"]
    assert seed_end == pytest.approx(seed_notes.end.max())  # the whole file: it ends with its last note off
    for sample in record["samples"]:
        out = read_quantised(tmp_path / "out" / sample["midi"])
        assert_notes_equal(select(out, out.start < seed_end - 1e-9), seed_notes, sample["midi"])
        assert len(out) == sample["notes"]
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == ["generation.json", "sample_00.mid", "sample_00.png", "sample_01.mid", "sample_01.png"]
    assert (tmp_path / "out" / "sample_00.png").read_bytes()[:8] == PNG_MAGIC


def test_cut_seed_then_continuation_alone(tiny_checkpoint, seed_midi, tmp_path):
    kwargs = dict(seed_midi=str(seed_midi), seed_seconds=3.0, length_seconds=3.0)
    with_seed = run(options(tiny_checkpoint, tmp_path / "a", **kwargs))
    alone = run(options(tiny_checkpoint, tmp_path / "b", include_seed=False, **kwargs))
    seed_notes = read_seed(seed_midi)  # seed_seconds count from the first note
    before = seed_notes.start < 3.0 - 1e-9
    ended = before & (seed_notes.end < 3.0 - 1e-9)
    for name in ("sample_00.mid", "sample_01.mid"):
        full = read_quantised(tmp_path / "a" / name)
        head = select(full, full.start < 3.0 - 1e-9)
        for f in ("start", "pitch", "velocity"):  # notes held over the cut are ended by the model
            np.testing.assert_allclose(getattr(head, f), getattr(seed_notes, f)[before], atol=1e-9)
        closed = np.isin(head.start, seed_notes.start[ended]) & (head.end < 3.0 - 1e-9)
        assert closed.sum() == ended.sum()
        # The continuation alone: the notes struck from 3 s on, moved to start at 0.
        tail = select(full, full.start >= 3.0 - 1e-9)
        tail = Notes(tail.start - 3.0, tail.end - 3.0, tail.pitch, tail.velocity)
        assert_notes_equal(read_quantised(tmp_path / "b" / name), tail, name)
    assert with_seed["seed"]["seconds"] == alone["seed"]["seconds"] == pytest.approx(3.0)


def test_length_seconds_determinism_and_record(tiny_checkpoint, seed_midi, tmp_path):
    kwargs = dict(seed_midi=str(seed_midi), seed_seconds=2.0, length_seconds=2.5, max_tokens=3000, num_samples=3)
    first = run(options(tiny_checkpoint, tmp_path / "a", **kwargs))
    run(options(tiny_checkpoint, tmp_path / "b", **kwargs))
    other = run(options(tiny_checkpoint, tmp_path / "c", **{**kwargs, "seed": 12}))
    for s in first["samples"]:
        assert s["stop"] in ("eos", "length_seconds"), s
        if s["stop"] == "length_seconds":  # the TIME_SHIFT that reaches 2.5 s is kept whole (<= 1 s)
            assert 2.5 <= s["new_seconds"] < 3.5 + 1e-9
    midis = lambda d: [(tmp_path / d / s["midi"]).read_bytes() for s in first["samples"]]  # noqa: E731
    assert midis("a") == midis("b") and midis("a") != midis("c"), "same seed: same files; other seed: others"
    assert len(other["samples"]) == 3
    saved = json.loads((tmp_path / "a" / "generation.json").read_text())
    assert saved["settings"]["seed"] == 11 and saved["settings"]["top_p"] == 0.95
    assert saved["checkpoint"] == str(Path(tiny_checkpoint).resolve())
    assert saved["seed"]["tokens"] > 0 and saved["model"]["config"]["max_seq_len"] == CKPT_CONTEXT


def test_unconditional_greedy_and_uncached_paths_agree(tiny_checkpoint, prepared_dir, tmp_path):
    # Long enough to slide past the context of 32; the prepared dir's tokenizer.json matches.
    common = dict(length_seconds=None, max_tokens=80, temperature=0.0, tokenizer=str(prepared_dir))
    cached = run(options(tiny_checkpoint, tmp_path / "c", **common))
    uncached = run(options(tiny_checkpoint, tmp_path / "u", use_cache=False, **common))
    assert cached["seed"]["unconditional"] and cached["seed"]["tokens"] == 1
    for a, b in zip(cached["samples"], uncached["samples"], strict=True):
        assert (tmp_path / "c" / a["midi"]).read_bytes() == (tmp_path / "u" / b["midi"]).read_bytes()
    assert cached["samples"][0]["new_tokens"] > CKPT_CONTEXT or cached["samples"][0]["stop"] == "eos"


# ----- bad inputs: a clear error and no files ------------------------------------------------------------
def no_notes_midi(path: Path) -> Path:
    pm = pretty_midi.PrettyMIDI()
    pm.instruments.append(pretty_midi.Instrument(program=0))
    pm.write(str(path))
    return path


def late_start_midi(path: Path) -> Path:
    pm = pretty_midi.PrettyMIDI()
    inst = pretty_midi.Instrument(program=0)
    inst.notes.append(pretty_midi.Note(velocity=80, pitch=60, start=5.0, end=6.0))
    pm.instruments.append(inst)
    pm.write(str(path))
    return path


BAD = {
    "missing seed": (lambda d: {"seed_midi": str(d / "nope.mid")}, GenerateError,
                     r"seed_midi=.*nope\.mid: no such file"),
    "unreadable seed": (lambda d: {"seed_midi": str(_write(d / "junk.mid", b"not a midi file"))}, GenerateError,
                        r"seed_midi=.*junk\.mid: unreadable MIDI"),
    "seed without notes": (lambda d: {"seed_midi": str(no_notes_midi(d / "empty.mid"))}, GenerateError,
                           r"empty\.mid: no notes.*Leave seed_midi unset for unconditional"),
    # A seed counts from its first note (late_start_midi's comes after 5 s of silence: that works, see
    # test_late_seed_starts_at_its_first_note); only a cut shorter than half a 10 ms step keeps no note.
    "nothing before seed_seconds": (lambda d: {"seed_midi": str(late_start_midi(d / "late.mid")),
                                               "seed_seconds": 0.004},
                                    GenerateError, r"no note starts in its first seed_seconds=0.004 s"),
    "audio seed": (lambda d: {"seed_midi": str(_wav(d / "take.wav"))}, GenerateError,
                   r"^seed_midi=.*take\.wav: an audio file; musictx continues MIDI files \(\.mid/\.midi\)$"),
    "missing checkpoint": (lambda d: {"checkpoint": str(d / "gone.ckpt")}, GenerateError,
                           r"checkpoint=.*gone\.ckpt: no such file"),
    "not a checkpoint": (lambda d: {"checkpoint": str(_write(d / "text.ckpt", b"hello"))}, GenerateError,
                         r"checkpoint=.*text\.ckpt: a text file, not a checkpoint"),
    "other tokenizer": (lambda d: {"tokenizer": str(_tokenizer_json(d, velocity_bins=16))}, TokenizerMismatchError,
                        r"velocity_bins: 32 here vs 16 in tokenizer=.*other\.json"),
    "missing tokenizer": (lambda d: {"tokenizer": str(d / "none.json")}, GenerateError, r"tokenizer=.*none\.json"),
    "top_p 0": (lambda d: {"top_p": 0.0}, GenerateError, r"top_p must be in \(0, 1\]"),
    "top_p 1.5": (lambda d: {"top_p": 1.5}, GenerateError, r"top_p must be in \(0, 1\]"),
    "negative temperature": (lambda d: {"temperature": -0.5}, GenerateError, r"temperature must be >= 0"),
    "top_k 0": (lambda d: {"top_k": 0}, GenerateError, r"top_k must be >= 1"),
    "slide too big": (lambda d: {"slide": CKPT_CONTEXT}, GenerateError, r"slide must be < the model's context"),
    "unknown model": (lambda d: {"checkpoint": "no_such_model"}, GenerateError,
                      r"checkpoint=no_such_model: no such file, model folder or shipped model name"),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _wav(path: Path) -> Path:
    """A real WAV file: a second of silence, 16-bit mono at 8 kHz."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 8000)
    return path


def _tokenizer_json(d: Path, **config) -> Path:
    EventTokenizer(config).save(d / "other.json")
    return d / "other.json"


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_raises_a_clear_error_and_writes_nothing(case, tiny_checkpoint, seed_midi, tmp_path):
    make, error, message = BAD[case]
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    out = tmp_path / "out"
    kwargs = {"seed_midi": str(seed_midi), **make(inputs)}
    with pytest.raises(error, match=message):
        run(options(**{"checkpoint": tiny_checkpoint, "out": out, **kwargs}))
    assert not out.exists(), f"{case}: output written before the error"


def test_late_seed_starts_at_its_first_note(tiny_checkpoint, tmp_path):
    late = late_start_midi(tmp_path / "late.mid")  # one note, 5.0 to 6.0 s
    record = run(options(tiny_checkpoint, tmp_path / "out", seed_midi=str(late), seed_seconds=2))
    assert record["seed"]["seconds"] == pytest.approx(1.0)  # the file holds 1 s from its first note, < 2 s
    assert record["seed"]["silence_dropped_seconds"] == pytest.approx(5.0)
    for sample in record["samples"]:
        out = read_quantised(tmp_path / "out" / sample["midi"])
        first = np.argmin(out.start)
        assert (out.start[first], out.pitch[first]) == (pytest.approx(0.0), 60)


# ----- the console script --------------------------------------------------------------------------------
def console(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "musictx-generate"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "musictx.commands.generate"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_console_script_end_to_end(tiny_checkpoint, seed_midi, tmp_path):
    run_dir = tmp_path / "run"
    done = console(f"checkpoint={tiny_checkpoint}", f"seed_midi={seed_midi}", "seed_seconds=2", "length_seconds=2",
                   "num_samples=2", "temperature=0.95", "top_p=0.95", "seed=7", f"hydra.run.dir={run_dir}")
    assert done.returncode == 0, done.stderr[-3000:]
    for i in range(2):
        for ext in ("mid", "png"):
            assert (run_dir / f"sample_{i:02d}.{ext}").is_file()
    record = json.loads((run_dir / "generation.json").read_text())
    assert record["settings"]["seed"] == 7 and record["seed"]["seconds"] == pytest.approx(2.0)
    assert f"to {run_dir.resolve()}" in done.stdout
    assert (run_dir / "sample_00.wav").exists() == (audio_unavailable() is None)

    bad_dir = tmp_path / "bad"
    failed = console(f"checkpoint={tmp_path / 'missing.ckpt'}", f"hydra.run.dir={bad_dir}")
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1] == \
        f"musictx-generate: error: checkpoint={tmp_path / 'missing.ckpt'}: no such file, model folder or shipped " \
        f"model name (shipped: {', '.join(shipped_models()) or 'none installed'})"
    assert not bad_dir.exists(), "a failed run must leave no directory behind"


# ----- plots and audio -----------------------------------------------------------------------------------
def test_piano_roll_and_loss_curves(tmp_path):
    notes = TOK.quantize_notes(TOK.read(write_random_midi(tmp_path / "m.mid", seed=1)))
    assert plot_piano_roll(notes, tmp_path / "roll.png", takeover=2.0).read_bytes()[:8] == PNG_MAGIC
    assert plot_piano_roll(Notes.empty(), tmp_path / "empty.png").read_bytes()[:8] == PNG_MAGIC
    csv = tmp_path / "metrics.csv"
    csv.write_text("epoch,step,train/loss,val/loss\n0,4,5.9,\n0,9,5.1,\n0,9,,5.3\n0,14,4.8,\n0,19,,4.9\n")
    assert plot_loss_curves(csv, tmp_path / "loss.png").read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(ValueError, match="none of"):
        plot_loss_curves(csv, tmp_path / "x.png", keys=("val/acc",))


def test_roll_panels_share_one_time_axis_and_draw_each_panels_own_notes(tmp_path):
    """One seed continued by several models: one panel per (label, notes), stacked; a panel's notes land in
    its own band of the image (blue note bars in the upper panel, none in the empty lower one)."""
    from matplotlib.image import imread

    notes = TOK.quantize_notes(TOK.read(write_random_midi(tmp_path / "m.mid", seed=3, seconds=6.0)))
    one = imread(plot_roll_panels([("model", notes)], tmp_path / "one.png", takeover=2.0))
    two = imread(plot_roll_panels([("model", notes), ("silent", Notes.empty())], tmp_path / "two.png",
                                  takeover=2.0, title="seed"))
    assert two.shape[0] > 1.5 * one.shape[0] and two.shape[1] == one.shape[1]
    blue = (two[..., 2] - two[..., 0]) > 0.3  # (H, W): note bars are drawn in blues
    half = two.shape[0] // 2
    assert blue[:half].sum() > 100 and blue[half:].sum() == 0
    with pytest.raises(ValueError, match="at least one panel"):
        plot_roll_panels([], tmp_path / "none.png")


def test_audio_reports_what_is_missing(tmp_path):
    reason = audio_unavailable(tmp_path / "no.sf2")
    assert reason is not None and ("fluidsynth" in reason or "no.sf2" in reason)


@pytest.mark.skipif(audio_unavailable() is not None, reason=f"no audio: {audio_unavailable()}")
def test_render_wav(tmp_path):
    notes = TOK.quantize_notes(TOK.read(write_random_midi(tmp_path / "m.mid", seed=2, seconds=2.0)))
    notes_to_midi(notes).write(str(tmp_path / "n.mid"))
    wav = render_wav(tmp_path / "n.mid", tmp_path / "n.wav")
    assert wav.read_bytes()[:4] == b"RIFF" and wav.stat().st_size > 10_000
