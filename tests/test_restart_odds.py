"""scripts/make_motif.py writes the bundled motif (at any tempo) and scripts/restart_nll.py scores a restart of
its phrase: the measurements of docs/recall.md that ask whether a model starts the motif again."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pretty_midi
import pytest

from musictx.paths import BUNDLED_MOTIF

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_bundled_motif_is_what_the_script_writes(tmp_path):
    make_motif = script("make_motif")
    make_motif.build().write(str(tmp_path / "m.mid"))
    assert (tmp_path / "m.mid").read_bytes() == BUNDLED_MOTIF.read_bytes()
    fast = make_motif.build(120).instruments[0].notes
    slow = make_motif.build(96).instruments[0].notes
    assert [n.pitch for n in fast] == [n.pitch for n in slow]
    assert [n.start for n in fast] == pytest.approx([n.start * 96 / 120 for n in slow])


def test_gate_changes_how_long_the_melody_sounds_and_nothing_else():
    make_motif = script("make_motif")
    detached, legato = make_motif.build(gate=0.95).instruments[0].notes, make_motif.build(gate=1.1).instruments[0].notes
    assert [(n.pitch, n.start) for n in detached] == [(n.pitch, n.start) for n in legato]
    longer = [b.end - a.end for a, b in zip(detached, legato, strict=True)]
    assert sum(d > 1e-9 for d in longer) == 40 and min(longer) > -1e-9  # the 40 melody notes; the bass as it was


@pytest.mark.parametrize("bpm", [96, 120])
def test_the_restart_is_the_second_phrase_again_after_the_eighth_bar(tmp_path, bpm):
    restart = script("restart_nll")
    path = tmp_path / "m.mid"
    script("make_motif").build(bpm).write(str(path))
    bar = restart.bar_seconds(bpm)
    notes = pretty_midi.PrettyMIDI(str(path)).instruments[0].notes
    played = restart.motif_then_restart(path, bpm).instruments[0].notes
    second = sorted((round(n.start + 4 * bar, 4), n.pitch) for n in notes if n.start >= 4 * bar - 1e-6)
    assert sorted((round(n.start, 4), n.pitch) for n in played if n.start >= 8 * bar - 1e-6) == second
    assert len(played) == len(notes) + len(second)


def test_restart_odds_of_the_shipped_model():
    figures = script("restart_nll").restart_figures("piano")
    assert 0 < figures["restart_40"] < figures["second_phrase"] < 5  # a model that copies: the restart is cued
    assert figures["first_bar_tokens"] > 16 and 0 < figures["p_first_bar"] < 1
