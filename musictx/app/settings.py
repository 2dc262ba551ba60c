"""What one Continue request asks for (`Settings`: the page's controls start at its defaults) and the most a
request may ask for. No Gradio."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from musictx.decoding import GenerateError, RecallGuidanceOptions, SamplingOptions, check_seed, parse_density
from musictx.generation import GenerateOptions, parse_programs
from musictx.tasks import BOUNDS

MAX_SAMPLES = 4
DRUMS_BOX = "Drums play on"  # the Continue tab's box for ``drums``; the line under a band's result names it
# The most one request may ask for (the page's sliders stop there too; checked here for API callers). With a
# 5 MB seed file they bound a request's work: 4 pieces of at most 120 + 60 s, each ~32 MB of WAV (each of pop's
# pieces the best of 4 candidates drawn together: docs/generation.md, "Best of K"). The sampler sees at most its
# window of any seed.
MAX_SEED_SECONDS = 30.0
MAX_LENGTH_SECONDS = 60.0
MAX_SEED_FROM = BOUNDS.seed_seconds  # what `GenerateOptions.check` allows
FRESH_SEEDS = 1_000_000  # an emptied Random seed box draws a seed below this: short enough to type back in
SEED_HINT = "empty: a fresh one each press, said in the status"  # under each tab's Random seed box


def seed_or_fresh(value) -> tuple[object, str]:
    """(the random seed a request uses, the status line that says it was drawn, or ""). An emptied Random seed
    box (None) draws a fresh seed: a musician who clears it expects new music at each press, and it ran as seed 0
    unsaid. The line names the seed so that a take worth keeping can be drawn again. Any other value goes on as
    sent, for `check_seed` to refuse 2.5 or -1 naming the box."""
    if value is not None and not (isinstance(value, str) and not value.strip()):
        return value, ""
    seed = secrets.randbelow(FRESH_SEEDS)
    return seed, f"Random seed was empty, so a fresh one was drawn: {seed} (type it in the box to draw this again)."


def with_line(message: str, line: str) -> str:
    """``message`` with ``line`` as its last paragraph (none when ``line`` is empty)."""
    return f"{message}\n\n{line}" if line else message


@dataclass
class Settings:
    """What the page asks for (its controls start at these defaults); ``seed_seconds`` None keeps all of the
    seed file, ``seed_from`` (seconds into it) starts the seed at the first note struck from there. The
    sampler's own settings start at the `SamplingOptions` defaults, the others are the app's."""

    # the page opens on the bundled motif: all of its 8 bars (19.9 s), as `make continue` plays it, so a first
    # click hears its phrase come back (an 8 s seed held 3 bars, which restate nothing)
    seed_seconds: float | None = 20.0
    length_seconds: float = 15.0
    temperature: float = SamplingOptions.temperature
    top_p: float = SamplingOptions.top_p
    num_samples: int = 2
    seed: int = SamplingOptions.seed
    seed_from: float = 0.0
    recall_guidance: float = RecallGuidanceOptions.strength  # how hard the sampler leans on the seed
    density: str = ""  # notes per bar asked by track, "PIANO=8, MELODY=4" (pop); empty: the model's own
    instruments: str = ""  # General MIDI program by track, "MELODY=Flute, BRIDGE=40"; empty: as read
    drums: str = GenerateOptions.drums  # a band's drums under the new bars: loop (they play on) | seed (they stop)
    ending: bool = GenerateOptions.ending  # the last two new bars close the piece (a cadence to the tonic chord)

    def check(self) -> None:
        """GenerateError naming the first setting over what the app allows (`GenerateOptions.check` does
        the rest: signs, finiteness, whole numbers, the drums' choice)."""
        if not 1 <= self.num_samples <= MAX_SAMPLES:
            raise GenerateError(f"samples must be 1 to {MAX_SAMPLES}, got {self.num_samples}")
        if self.length_seconds > MAX_LENGTH_SECONDS:
            raise GenerateError(f"seconds to add must be at most {MAX_LENGTH_SECONDS:g}, got {self.length_seconds:g}")
        if self.seed_seconds is not None and self.seed_seconds > MAX_SEED_SECONDS:
            raise GenerateError(f"seed seconds must be at most {MAX_SEED_SECONDS:g}, got {self.seed_seconds:g}")
        if not 0 <= (self.seed_from or 0) <= MAX_SEED_FROM:  # the page's box by its label, the API's by its field
            raise GenerateError(f"Seed starts at (seed_from) must be 0 to {MAX_SEED_FROM:g} seconds into the file, "
                                f"got {self.seed_from:g}")
        check_seed("Random seed (seed)", self.seed)  # the box by its label: a bare "seed" read as the seed file
        parse_density(self.density)
        parse_programs(self.instruments)
