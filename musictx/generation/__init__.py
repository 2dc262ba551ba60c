"""Generating: the sampling options and their checks, the KV-cached sampler and its grammar guard, seeds cut
from MIDI files, and continuing a file into an output folder (`continue_midi.run` is ``musictx-generate``)."""
