"""Melody presence (musictx.decoding.hooks.melody_presence): in a song's continuation the melody comes back after a
rest of a bar, where the model lets a note start; it never touches a forbidden id, and a seed of one track, or
without POP909's MELODY, makes no hook."""

from __future__ import annotations

import torch

from musictx.checkpoints.model_store import load_model
from musictx.decoding.hook import HookInputs
from musictx.decoding.hooks.bridge_presence import BridgePresence
from musictx.decoding.hooks.melody_presence import REST_BEATS, MelodyPresence
from musictx.decoding.hooks.registry import build_hooks
from musictx.decoding.sampling_options import SamplingOptions

from .helpers import bonused, started_on_bars, step
from .helpers import remi_bar as _bar

MELODY, PIANO = 80, 0
QUARTER, WHOLE = "1.0.4", "4.0.2"


def _tok():
    return load_model("pop")[1]


def test_the_melody_is_asked_back_after_a_rest_and_not_before():
    tok = _tok()
    sung = _bar((0, [(PIANO, 48, WHOLE), (MELODY, 72, QUARTER)]), (4, [(MELODY, 74, QUARTER)]),
                (8, [(MELODY, 76, QUARTER)]), (12, [(MELODY, 74, QUARTER)]))  # the last note ends at the bar line
    hook = started_on_bars(MelodyPresence(tok, 2.0), tok, [sung])
    rest = int(REST_BEATS * 4)  # positions: 4 a beat
    assert 4 < rest < 16
    step(hook, tok, "TimeSig_4/4")
    assert bonused(hook, tok) == set()  # a bar line is no place for a note to start
    step(hook, tok, "Position_4", "Program_0", "Pitch_48", "Velocity_95", f"Duration_{WHOLE}")
    assert bonused(hook, tok) == set()  # a beat's rest, at a place where a note may start
    step(hook, tok, f"Position_{rest}")
    assert bonused(hook, tok) == {"Program_80"}  # REST_BEATS since the melody's last note ended
    step(hook, tok, "Program_80", "Pitch_72", "Velocity_95", f"Duration_{WHOLE}", "Bar_None", "TimeSig_4/4")
    step(hook, tok, "Position_4")
    assert bonused(hook, tok) == set()  # it sang again, a note that still sounds


def test_a_seed_without_a_melody_note_asks_for_one_and_forbidden_ids_stay_forbidden():
    tok = _tok()
    intro = _bar((0, [(PIANO, 48, WHOLE), (PIANO, 60, WHOLE)]))
    hook = started_on_bars(MelodyPresence(tok, 3.0), tok, [intro, intro])
    step(hook, tok, "TimeSig_4/4", "Position_0")
    logits = torch.zeros(1, tok.vocab_size)
    melody = tok.vocab["Program_80"]
    assert hook(logits)[0, melody] == 3.0
    logits[0, melody] = float("-inf")
    assert hook(logits)[0, melody] == float("-inf")


def test_the_hook_is_made_only_for_a_song_with_a_melody_and_another_track():
    tok = _tok()
    opts = SamplingOptions(hooks={"melody_presence": {"strength": 2.0}, "recall_guidance": {"strength": 0.0}})
    made = {name: [type(h).__name__ for h in build_hooks(HookInputs("continue", tok, opts,
                                                                    programs=programs))] for name, programs in
        (("song", [PIANO, MELODY]), ("melody alone", [MELODY]), ("piano alone", [PIANO]))}
    assert "MelodyPresence" in made["song"]
    assert "MelodyPresence" not in made["melody alone"] and "MelodyPresence" not in made["piano alone"]
    off = build_hooks(HookInputs("continue", tok, SamplingOptions(hooks={"melody_presence": {"strength": 0.0}}),
                                 programs=[PIANO, MELODY]))
    assert not any(isinstance(h, MelodyPresence) for h in off)



BRIDGE = 81


def test_the_bridge_is_asked_back_after_its_longer_rest_and_only_the_bridge():
    tok = _tok()
    sung = _bar((0, [(PIANO, 48, WHOLE), (MELODY, 72, WHOLE), (BRIDGE, 67, QUARTER)]))
    hook = started_on_bars(BridgePresence(tok, 2.0, rest_beats=8.0), tok, [sung])
    step(hook, tok, "TimeSig_4/4", "Position_0", "Program_0", "Pitch_48", "Velocity_95", f"Duration_{WHOLE}")
    assert bonused(hook, tok) == set()  # 3 beats of BRIDGE rest (its quarter ended on beat 1)
    step(hook, tok, "Bar_None", "TimeSig_4/4", "Position_0")
    assert bonused(hook, tok) == set()  # 7 beats
    step(hook, tok, "Position_4")
    assert bonused(hook, tok) == {"Program_81"}  # 8 beats: the BRIDGE, never the MELODY that rested too


def test_the_bridge_hook_is_made_only_where_the_seed_has_a_bridge_beside_another_track():
    tok = _tok()
    opts = SamplingOptions(hooks={"bridge_presence": {"strength": 2.0}, "melody_presence": {"strength": 0.0}})
    made = {name: [h for h in build_hooks(HookInputs("continue", tok, opts, programs=programs))
                   if isinstance(h, MelodyPresence)] for name, programs in
            (("song", [PIANO, MELODY, BRIDGE]), ("no bridge", [PIANO, MELODY]), ("bridge alone", [BRIDGE]))}
    assert [(h.program, h.rest_beats, h.strength) for h in made["song"]] == [(BRIDGE, 16.0, 2.0)]
    assert made["no bridge"] == [] and made["bridge alone"] == []
