"""The shipped models (piano, and pop where shipped): each loads from the package without unpickling anything,
with its own tokenizer, and gives the NLL its card states on a fixed sample of real music; musictx-generate
picks the one that fits the seed; piano fine-tunes; pop continues a held-out song keeping its tracks and grid."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import lightning as L
import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from symusic import Score

import musictx
from musictx.checkpoints.model_store import shipped_models
from musictx.evaluation.spot_check import sample_nll
from musictx.generation.continue_midi import run
from musictx.generation.generate_options import GenerateOptions
from musictx.io.metrical_tokenizer import MetricalTokenizer
from musictx.io.token_store import write_split
from musictx.io.tokenizer import EventTokenizer, TokenizerMismatchError
from musictx.io.tokenizers import tokenizer_from_dict
from musictx.models import MusicTransformer
from musictx.paths import CONF_DIR, PRETRAINED_DIR

from .helpers import PIANO_DIR, SHARED_DATA, needs_shared, write_random_midi

pytestmark = pytest.mark.skipif("piano" not in shipped_models(), reason="no shipped piano model in this checkout")
POP909 = SHARED_DATA / "pop" / "POP909"
MOTIF = PRETRAINED_DIR.parent / "assets" / "motif.mid"


def _shipped(name: str):
    return pytest.param(name, marks=pytest.mark.skipif(name not in shipped_models(),
                                                       reason=f"no shipped {name} model in this checkout"))


# each shipped model's tokenizer class, and the folder (../shared) its card's spot-check files are relative to
SHIPPED = {"piano": EventTokenizer, "pop": MetricalTokenizer, "pop_infill": MetricalTokenizer}
CARD_DATA = {"piano": PIANO_DIR, "pop": POP909, "pop_infill": POP909}


@pytest.mark.parametrize("name", [_shipped(n) for n in SHIPPED])
def test_loads_from_the_package_without_unpickling(monkeypatch, name):
    def refuse(*args, **kwargs):
        raise AssertionError("loading the shipped model unpickled something")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    net, tok = musictx.load_pretrained(name)
    folder = PRETRAINED_DIR / name
    assert isinstance(net, MusicTransformer) and not net.training and net.max_seq_len >= 1024
    assert isinstance(tok, SHIPPED[name]) and net.vocab_size == tok.vocab_size
    assert tok == tokenizer_from_dict(json.loads((folder / "config.json").read_text())["tokenizer"])
    assert (folder / "README.md").is_file() and (folder / "model.safetensors").stat().st_size < 25e6
    if name == "piano":
        assert tok.vocab_size == 390
    else:  # a metrical model also carries MidiTok's own parameter file
        assert (folder / "tokenizer.json").is_file()


@needs_shared
@pytest.mark.parametrize("name", [_shipped(n) for n in SHIPPED])
def test_spot_check_nll_matches_the_card(name):
    info = json.loads((PRETRAINED_DIR / name / "config.json").read_text())["info"]["spot_check"]
    net, tok = musictx.load_pretrained(name)
    got = sample_nll(net, tok, [CARD_DATA[name] / f for f in info["files"]], info["tokens_per_file"])
    assert got["tokens"] == info["tokens"]
    assert got["nll"] == pytest.approx(info["nll"], abs=0.01)
    assert got["nll"] < 0.55 * np.log(tok.vocab_size)  # far below a uniform guess (piano: 3.2 < 5.97)


def test_generate_picks_the_shipped_model_that_fits_the_seed(tmp_path):
    """The bundled motif (on a 16th grid) goes to pop when it is installed; a rubato performance to piano."""
    rubato = write_random_midi(tmp_path / "rubato.mid", seed=3, n_notes=30, seconds=6.0)
    expected = [(MOTIF, "pop" if "pop" in shipped_models() else "piano"), (rubato, "piano")]
    for k, (seed, name) in enumerate(expected):
        out = tmp_path / f"out{k}"
        done = subprocess.run([sys.executable, "-m", "musictx.commands.generate", f"seed_midi={seed}",
                               "length_seconds=4", "num_samples=1", "audio=false", f"output_dir={out}",
                               f"hydra.run.dir={out}"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        record = json.loads((out / "generation.json").read_text())
        assert record["model_source"] == "shipped" and record["checkpoint"] == name
        assert f"model: {name} (" in done.stdout
        assert (out / "sample_00.mid").stat().st_size > 0 and record["samples"][0]["notes"] > 0


@needs_shared
@pytest.mark.parametrize("name", [_shipped("pop")])
def test_continues_a_held_out_song_with_its_tracks_tempo_and_grid(tmp_path, name):
    """A test-split song the model never trained on: three named tracks on program 0 in, the same three out,
    the song's tempo, whole bars in the song's meter, every onset on the tokenizer's 16th grid."""
    info = json.loads((PRETRAINED_DIR / name / "config.json").read_text())["info"]["spot_check"]
    song = POP909 / info["files"][0]
    record = run(GenerateOptions(checkpoint=name, seed_midi=str(song), seed_from=25, seed_seconds=10,
                                 length_bars=4, num_samples=1, audio=False, output_dir=str(tmp_path / "out")))
    seed = Score(str(song))
    out = Score(str(tmp_path / "out" / record["samples"][0]["midi"]))
    assert [t.name for t in out.tracks] == [t.name for t in seed.tracks] == ["MELODY", "BRIDGE", "PIANO"]
    assert all(t.program == 0 for t in out.tracks)
    assert abs(out.tempos[0].qpm - seed.tempos[0].qpm) < 0.01
    assert record["samples"][0]["new_bars"] == 4
    onsets = np.concatenate([t.notes.numpy()["time"] for t in out.tracks])
    assert np.all(onsets % (out.ticks_per_quarter // 4) == 0)
    bar = out.time_signatures[0].numerator * out.ticks_per_quarter * 4 // out.time_signatures[0].denominator
    new = onsets[onsets >= record["seed"]["bars"] * bar]
    assert len(new) > 8 and new.max() < (record["seed"]["bars"] + 4) * bar


def _real_dataset(out, tok: EventTokenizer):
    """A prepared dataset of a few real performances (train and validation share them: a loss check)."""
    out.mkdir(parents=True)
    files = sorted(PIANO_DIR.rglob("*.mid"))[:: 97][:4]
    pieces = [np.append(tok.encode(f)[:3000], tok.eos_id) for f in files]
    for split in ("train", "validation", "test"):
        write_split(out, split, pieces, [f.name for f in files])
    tok.save(out / "tokenizer.json")
    (out / "manifest.json").write_text(json.dumps({"tokenizer": tok.to_dict(), "splits": {}}))
    return out


def _finetune_cfg(data_dir, out):
    overrides = ["init_from=piano", f"data.dir={data_dir}", f"paths.output_dir={out}", "logger=none",
                 "data.seq_len=256", "data.batch_size=2", "data.num_workers=0", "trainer.max_steps=2",
                 "trainer.val_check_interval=2", "trainer.limit_val_batches=2", "trainer.num_sanity_val_steps=0",
                 "schedule=constant", "schedule.lr=1e-5", "++trainer.enable_progress_bar=false",
                 "++trainer.enable_model_summary=false", "~callbacks.progress_bar"]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("train", overrides=overrides), overrides


@needs_shared
def test_finetuning_starts_from_the_pretrained_loss(tmp_path):
    from musictx.commands.train_objects import build

    cfg, overrides = _finetune_cfg(_real_dataset(tmp_path / "data", EventTokenizer()), tmp_path / "run")
    L.seed_everything(0)
    datamodule, module, trainer = build(cfg, overrides)
    assert module.net.get_config()["d_model"] == musictx.load_pretrained("piano")[0].get_config()["d_model"]
    trainer.fit(module, datamodule=datamodule)
    assert trainer.callback_metrics["val/loss"] < 3.5  # from scratch it would start at ~log(390) = 5.97


@needs_shared
def test_finetuning_refuses_another_tokenizer(tmp_path):
    from musictx.commands.train_objects import build

    cfg, overrides = _finetune_cfg(_real_dataset(tmp_path / "data", EventTokenizer({"velocity_bins": 16})),
                                   tmp_path / "run")
    with pytest.raises(TokenizerMismatchError, match=r"init_from=piano.*velocity_bins"):
        build(cfg, overrides)


@needs_shared
def test_a_continuation_file_ends_with_its_music():
    """POP909's tempo map runs to the end of the song: the continuation keeps the song's tempo under its new
    bars, but no tempo or meter event after its last note (a DAW would show the rest of the song, empty)."""
    from musictx.checkpoints.model_store import load_model
    from musictx.tasks.metrical_score import continuation_score, new_bars_seconds
    from musictx.tasks.metrical_seeds import metrical_seed

    _, tok, _ = load_model("pop")
    song = POP909 / "018" / "018.mid"
    assert len(Score(str(song)).tempos) > 10  # the song has tempo changes to its end
    seed = metrical_seed(tok, song, 10, 25)
    bars = np.flatnonzero(seed.ids == tok.bar_id)
    one_bar = seed.ids[bars[0]: bars[1]]  # the seed's first bar played again as the "new" music
    score = continuation_score(tok, seed, one_bar)
    end = max(n.end for t in score.tracks for n in t.notes)
    assert all(t.time < end for t in score.tempos[1:]) and all(s.time < end for s in score.time_signatures[1:])
    assert 0 < new_bars_seconds(seed, score) <= seed.bar_seconds() + 0.01


@needs_shared
@pytest.mark.parametrize("name", [_shipped("pop_infill")])
def test_infill_picks_the_shipped_infill_model_and_fills_a_held_out_song(tmp_path, name):
    """``task=infill`` with no checkpoint: the shipped infill model, said in one line; the bars asked for are
    new and everything else is the song's own."""
    from musictx.tasks.song_bars import read_song
    from musictx.tasks.write_back import in_bars

    info = json.loads((PRETRAINED_DIR / name / "config.json").read_text())["info"]
    song_path = POP909 / info["spot_check"]["files"][0]
    record = run(GenerateOptions(seed_midi=str(song_path), task="infill", bars="9-10", num_samples=1, audio=False,
                                 output_dir=str(tmp_path / "out")))
    assert record["checkpoint"] == name and "bars 9-10" in record["what"]
    out, given = Score(str(tmp_path / "out" / record["samples"][0]["midi"])), Score(str(song_path))
    net, tok = musictx.load_pretrained(name)
    song = read_song(tok, song_path)
    per_beat = tok.miditok.config.max_num_pos_per_beat
    for before, after in zip(given.tracks, out.tracks, strict=True):
        outside = []
        for notes in (before.notes.numpy(), after.notes.numpy()):
            keep = ~in_bars(song, notes["time"], 8, 10, per_beat)
            outside.append(sorted(zip(*(notes[k][keep].tolist() for k in ("time", "duration", "pitch")),
                                      strict=True)))
        assert outside[0] == outside[1] and len(outside[0]) > 0
