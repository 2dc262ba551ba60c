"""Bridge presence: where the seed has a counter-melody (POP909's BRIDGE), the continuation keeps it; where an
accompaniment writes one, it plays.

On the 94 POP909 validation songs (10 s seed from 25 s, 30 s new), the `pop` model trained on the GPU with
POP909's other arrangements drops the BRIDGE track altogether in 0.49 of the songs whose real next 30 s
keeps it (the model trained on the main files alone: 0.23). Many of those arrangements have no BRIDGE, so
the model learned that a counter-melody may end for good. A BRIDGE rests far longer than a melody (0.64 of
the real 30 s), so this lean waits ``rest_beats`` (four 4/4 bars by default) before it asks the track back
with a logit bonus on its Program, as `musictx.decoding.hooks.melody_presence` does for the MELODY, and only
where the seed's tracks include BRIDGE beside another.

Chosen on the first 47 validation songs (36 of them keep BRIDGE in the real next 30 s): strength 2 after 16
beats drops it in 0.03 of those songs (0.47 without the lean; after 8 beats also 0.03), BRIDGE silent 0.66 of
the time (0.83 without, 8 beats 0.60; real 0.74), notes at once 4.33 (4.17 without; real 4.57).

An accompaniment (``task=accompany``) that writes BRIDGE gets the same lean with settings of its own
(``accompany``, ``accompany_rest_beats``): there the counter rest (`musictx.decoding.hooks.given_notes`) takes
points off BRIDGE wherever the melody sounds, and without this lean BRIDGE played 0.037 of the accompaniment's
notes against the songs' 0.150 (docs/infill.md, "The counter-melody comes back").
"""

from __future__ import annotations

from dataclasses import dataclass

from musictx.decoding.cursor import shared_cursor
from musictx.decoding.hook import HookInputs, HookSpec
from musictx.decoding.hooks.melody_presence import MelodyPresence
from musictx.decoding.option_fields import option, strength_option
from musictx.io.score_prep import ROLE_PROGRAMS

BRIDGE = ROLE_PROGRAMS["BRIDGE"]


class BridgePresence(MelodyPresence):
    """Melody presence's lean, on the BRIDGE track's Program after ``rest_beats`` of its rest."""

    def __init__(self, tokenizer, strength: float, rest_beats: float, cursor=None):
        super().__init__(tokenizer, strength, cursor=cursor, program=BRIDGE, rest_beats=rest_beats)


@dataclass
class BridgePresenceOptions:
    strength: float = strength_option(2.0, (
        "the logit bonus of the BRIDGE track where it has rested rest_beats (a seed with BRIDGE); 0: off"))
    rest_beats: float = option(16.0, "beats of BRIDGE rest before the bonus (16: four 4/4 bars)", low=0.5)
    # stronger and sooner than a continuation's: an accompaniment's BRIDGE also loses the counter rest's points
    # under the melody; 3 after 8 beats came nearest the songs' BRIDGE on 40 validation songs (docs/infill.md)
    accompany: float = strength_option(3.0, (
        "the bonus in an accompaniment that writes BRIDGE (task=accompany), where it has rested accompany_rest_beats;"
        " 0: off"))
    accompany_rest_beats: float = option(8.0, "beats of BRIDGE rest before the accompaniment's bonus (8: two 4/4 "
                                              "bars)", low=0.5)


def _make(inputs: HookInputs, o: BridgePresenceOptions) -> BridgePresence | None:
    acc = inputs.accompaniment
    if acc is not None:  # an accompaniment: where BRIDGE is a track it writes (a given BRIDGE is not the sampler's)
        strength, rest, wanted = o.accompany, o.accompany_rest_beats, BRIDGE in acc.new_programs
    else:  # a continuation: where the seed has BRIDGE beside another track
        strength, rest = o.strength, o.rest_beats
        wanted = BRIDGE in inputs.programs and len(inputs.programs) >= 2
    if not strength or not wanted:
        return None
    return BridgePresence(inputs.tokenizer, strength, rest, cursor=shared_cursor(inputs))


SPEC = HookSpec("bridge_presence", BridgePresenceOptions, ("remi",), ("continue", "accompany"), _make,
                "the BRIDGE comes back after rest_beats of rest (a seed whose tracks include POP909's BRIDGE; an "
                "accompaniment that writes BRIDGE)")
