"""An accompaniment that writes BRIDGE gets a counter-melody: the bridge presence lean
(`musictx.decoding.hooks.bridge_presence`) is made for ``task=accompany`` where BRIDGE is a track written, and asks
it back after ``accompany_rest_beats`` of rest. Before, the counter rest kept it silent in a third of POP909's
validation windows whose real accompaniment has one, and in every take of the bundled motif (seeds 0-3)."""

from __future__ import annotations

import pytest
import torch
from symusic import Score

from musictx.checkpoints.model_store import load_pretrained
from musictx.decoding.hook import HookInputs
from musictx.decoding.hooks.bridge_presence import BridgePresence
from musictx.decoding.hooks.registry import build_hooks
from musictx.decoding.sampling_options import SamplingOptions
from musictx.io.score_prep import ROLE_PROGRAMS
from musictx.paths import BUNDLED_MOTIF
from musictx.tasks.accompany import Accompaniment, accompany_song, accompany_songs
from musictx.tasks.song_bars import melody_song

from .test_metrical import POP, needs_pop

MELODY, BRIDGE, PIANO = (ROLE_PROGRAMS[r] for r in ("MELODY", "BRIDGE", "PIANO"))


@pytest.fixture(name="pop", scope="module")
def fixture_pop():
    torch.set_num_threads(1)
    net, tok = load_pretrained("pop")
    return net.eval(), tok


def _bridge_hooks(tok, song, given: set[int], written: set[int], sampling: SamplingOptions) -> list:
    acc = Accompaniment(tok, song, given, written, 16, 24, None)
    inputs = HookInputs("accompany", tok, sampling, programs=sorted(given | written), accompaniment=acc)
    return [h for h in build_hooks(inputs) if isinstance(h, BridgePresence)]


@needs_pop
def test_the_bridge_lean_is_made_where_an_accompaniment_writes_bridge(pop):
    """018 accompanied anew: BRIDGE written gets the lean with the accompaniment's settings (3 after 8 beats); PIANO
    alone written, or BRIDGE given, gets none; ``accompany=0`` turns it off, and the continuation's settings stay."""
    _, tok = pop
    song = melody_song(tok, POP / "018" / "018.mid", anew=True)
    made = _bridge_hooks(tok, song, {MELODY}, {BRIDGE, PIANO}, SamplingOptions())
    assert [(h.program, h.strength, h.rest_beats) for h in made] == [(BRIDGE, 3.0, 8.0)]
    assert _bridge_hooks(tok, song, {MELODY}, {PIANO}, SamplingOptions()) == []
    assert _bridge_hooks(tok, song, {MELODY, BRIDGE}, {PIANO}, SamplingOptions()) == []
    off = SamplingOptions(hooks={"bridge_presence": {"accompany": 0}})
    assert _bridge_hooks(tok, song, {MELODY}, {BRIDGE, PIANO}, off) == []
    assert (SamplingOptions().hooks.bridge_presence.strength, SamplingOptions().hooks.bridge_presence.rest_beats) == (
        2.0, 16.0)


@needs_pop
def test_a_songs_bars_accompanied_anew_get_a_counter_melody(pop):
    """Bars 17-24 of 018 (its own BRIDGE plays 18 notes there), accompanied anew hearing the song's bars before: 4
    takes of seed 0 wrote no BRIDGE note at all; with the lean each plays one (5-14 notes)."""
    net, tok = pop
    song = melody_song(tok, POP / "018" / "018.mid", anew=True)
    s, e = 16, 24
    a, z = song.lines[s], song.lines[e]
    takes = accompany_songs(net, tok, song, ["BRIDGE", "PIANO"], s, e, SamplingOptions(seed=0), samples=4,
                            context="song")
    bridge = [sum(a <= n.time < z for t in out.tracks if t.name == "BRIDGE" for n in t.notes) for out, _ in takes]
    real = sum(a <= n.time < z for t in Score(str(song.path)).tracks if t.name == "BRIDGE" for n in t.notes)
    assert real == 18
    assert all(n >= 3 for n in bridge), bridge


def test_the_bundled_motif_gets_a_second_voice(pop):
    """The app's Accompany tab on the bundled motif (its one track read as the melody), seeds 0-3: BRIDGE wrote no
    note in any take; now it plays in each (5-14 notes beside PIANO's ~120)."""
    net, tok = pop
    song = melody_song(tok, BUNDLED_MOTIF)
    for seed in range(4):
        out, _ = accompany_song(net, tok, song, ["BRIDGE", "PIANO"], 0, song.n_bars, SamplingOptions(seed=seed))
        assert sum(len(t.notes) for t in out.tracks if t.name == "BRIDGE") >= 3, seed
