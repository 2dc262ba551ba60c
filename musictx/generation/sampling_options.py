"""How each id of a continuation is drawn: `SamplingOptions`, the one place its defaults are written.

``musictx-generate`` (whose `GenerateOptions` extends it), the continuation and motif measures of
``musictx-evaluate``, and the web app's `Settings` and sliders all start from these defaults. The YAML files
in ``conf/`` do not repeat the numbers: a key written ``temperature: ${sampling:temperature}`` means "the
`SamplingOptions` default"; the commands resolve it (`musictx.console.config_help`), and a YAML read without
Hydra still holding the text is read as the default by `SamplingOptions.from_mapping`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from musictx.generation.seeds import GenerateError

# the recall-guidance branches (`musictx.generation.recall_guidance.RecallGuidance.BRANCHES`, which reads them here)
RECALL_BRANCHES = ("recent", "continuation")


@dataclass
class DecodingOptions:
    """How `musictx.generation.sampling.generate` draws each id, and all it reads of its options: the general
    decoding settings. What the hooks read is in `SamplingOptions`, which extends this."""

    temperature: float = 1.0  # 0: greedy (argmax)
    top_k: int | None = None  # keep the k most likely ids; None: off
    top_p: float | None = 0.95  # nucleus sampling; None or 1: off
    seed: int = 0  # of the random generator: same seed and settings, same samples
    use_cache: bool = True  # False: recompute the whole window every step (the reference path, slow)
    slide: int | None = None  # ids dropped when the context is full; None: max_seq_len // 4
    keep_seed: int | None = 512  # the seed's last ids (~10 s of piano) pinned at the start of a slid window; 0: none


@dataclass
class SamplingOptions(DecodingOptions):
    """The decoding settings and every hook's options: what a run (a command, the app, an evaluation) sets.
    `generate` reads only the `DecodingOptions` part; each hook reads the options its `HookSpec` names, where
    the hook is made (`musictx.generation.hook_registry.build_hooks`)."""

    guard: bool = True  # refuse stray NOTE_OFFs and end notes held max_note_seconds (musictx.generation.guard)
    max_note_seconds: float | None = 5.0  # with guard: the longest a note may sound; None: no cap
    # with guard: the note-off policy. A note may sound at most this many times the seed's long notes (its
    # 95th-percentile duration), at least 1 s and at most max_note_seconds: a seed of short notes gets
    # short notes, a pedalled one keeps its long ones. None: max_note_seconds alone.
    note_cap_from_seed: float | None = 2.0
    # with guard: no new note while this many times the seed's most notes at once sound (at least
    # musictx.generation.guard.MIN_POLYPHONY): the texture stays near the seed's; None: no cap
    polyphony_ratio: float | None = 1.5
    # with guard: once this many notes end at one step (a pedal release), the notes struck before the oldest of
    # them must end too, before time moves on: a forgotten note does not hang on to the note cap; None: off
    pedal_release: int | None = 3
    # Sample toward what the whole context (the seed) adds to the recent music: continuations come back to
    # the seed's figure, pulse and key (musictx.generation.recall_guidance); 0: off, the
    # model's own distribution, which is what musictx-evaluate measures unless asked.
    recall_guidance: float = 1.0
    recall_local: int = 64  # with recall_guidance: the recent ids the contrast branch sees
    # metrical models: lean toward the seed's figures, track by track (musictx.generation.motif_echo): the
    # logit bonus of a pitch that goes on as the seed went on from the same last intervals; 0: off
    motif_echo: float = 1.0
    # Performance models: a continuation's next note leans toward how the seed went on from its last intervals
    # (musictx.generation.note_echo), choosing which note, never whether one starts: the logit bonus; 0: off
    note_echo: float = 1.5
    # metrical models: lean each new bar toward the seed's bar at the same place in its last 4-bar phrase, all
    # tracks at once (musictx.generation.phrase_echo): the logit bonus of an id that plays that bar again; 0: off.
    # Off by default: it restated the seed's figures by thinning the texture to the seed's bars and keeping an
    # intro's silent melody silent (docs/two-sample-2026-11.md, "The hooks retuned"); 1.3 was the old default
    phrase_echo: float = 0.0
    # metrical models: keep the seed's bass line, a low note struck on each bar's downbeat, where most seed bars
    # have one (musictx.generation.bass_lean): the logit bonus of the ids that strike it; 0: off
    bass_lean: float = 2.0
    # metrical models with POP909's MELODY among a song's tracks: the logit bonus of the MELODY's Program where
    # the melody has rested 2 beats (musictx.generation.melody_presence): it comes back, as a singer does; 0: off
    melody_presence: float = 3.0
    # metrical models: the logit bonus of each new note's pitch, times its pitch class's weight in the seed (1 for
    # the key's tones), (musictx.generation.key_lean): the key stays the seed's, the texture the model's; 0: off
    key_lean: float = 0.75
    # task=accompany: the logit bonus of a new track's pitch whose pitch class the given tracks (the melody)
    # sound in the same half bar (musictx.generation.given_notes), or the chords= file's chord holds; a metrical
    # continuation with chords=: of a new pitch the chord holds (musictx.generation.chord_lean); 0: off
    harmony: float = 3.0
    # task=accompany without chords=: the logit bonus, times its probability, of a new track's pitch whose pitch
    # class the harmonizer (musictx.generation.harmonizer, trained on POP909) guesses the chord holds, from the
    # melody; 0: lean toward the melody's own pitch classes at `harmony` instead
    harmony_guess: float = 5.0
    # task=accompany without chords=: the harmony_guess lean at the strong beats (a bar's first beat and its
    # middle), where a chord is heard most: the chord tones land there, the beats between keep the chord full
    harmony_guess_strong: float = 10.0
    # task=accompany: a bar whose melody is a bar heard before leans toward the accompaniment written for that
    # bar (musictx.generation.phrase_echo, planned by repeats): the logit bonus of an id that plays it again; 0: off
    repeat_echo: float = 3.0
    # task=accompany: the logit penalty on the counter-melody's (BRIDGE's) Program where a given note sounds, so
    # that it answers the melody in its rests, as POP909's bridges mostly do (musictx.generation.given_notes); 0: off
    counter_rest: float = 4.0
    # task=infill: how much the filled bars may repeat the song's own bars (musictx.generation.copy_cache): the
    # scale of the copy cache's fitted mixture weights; 0: off, the network alone; 1: the weights fitted
    copy_cache: float = 1.0
    recall_against: str = "recent"  # the contrast branch: recent (the last recall_local ids) | continuation
                                    # (all the music after the seed: amplifies what the seed alone adds)

    @classmethod
    def from_mapping(cls, values) -> SamplingOptions:
        """The options named in ``values`` (a dict, e.g. a block of evaluate.yaml; other keys are left for the
        caller). A missing key, or one still holding its YAML reference ``${sampling:NAME}`` (a YAML read
        without Hydra), takes the default."""
        given = {f.name: values[f.name] for f in fields(cls) if f.name in values}
        return cls(**{name: value for name, value in given.items() if value != reference(name)})

    def check_sampling(self) -> None:
        """Raise GenerateError naming the first bad option: whole numbers where counts are meant (a float
        with a whole value, as Hydra reads ``1e9``, becomes an int), finite numbers in range."""
        for name in ("top_k", "seed", "slide", "keep_seed", "recall_local", "pedal_release"):
            setattr(self, name, whole_number(name, getattr(self, name), nullable=name in NULLABLE))
        for name in ("temperature", "top_p", "max_note_seconds", "recall_guidance", "polyphony_ratio",
                     "note_cap_from_seed", "motif_echo", "note_echo", "phrase_echo", "bass_lean", "melody_presence",
                     "key_lean", "harmony", "counter_rest", "copy_cache", "harmony_guess", "harmony_guess_strong",
                     "repeat_echo"):
            finite_number(name, getattr(self, name), nullable=name in NULLABLE)
        bad = [
            (self.temperature < 0, f"temperature must be >= 0 (0 = greedy), got {self.temperature}"),
            (self.top_k is not None and self.top_k < 1, f"top_k must be >= 1 or null, got {self.top_k}"),
            (self.top_p is not None and not 0 < self.top_p <= 1, f"top_p must be in (0, 1] or null, got {self.top_p}"),
            (self.slide is not None and self.slide < 1, f"slide must be >= 1 or null, got {self.slide}"),
            (self.keep_seed is not None and self.keep_seed < 0,
             f"keep_seed must be >= 0 or null, got {self.keep_seed}"),
            (self.max_note_seconds is not None and not self.max_note_seconds > 0,
             f"max_note_seconds must be > 0 or null, got {self.max_note_seconds}"),
            (self.pedal_release is not None and self.pedal_release < 1,
             f"pedal_release must be >= 1 or null, got {self.pedal_release}"),
            (self.polyphony_ratio is not None and not self.polyphony_ratio > 0,
             f"polyphony_ratio must be > 0 or null, got {self.polyphony_ratio}"),
            (self.recall_guidance < 0, f"recall_guidance must be >= 0 (0 = off), got {self.recall_guidance}"),
            (self.motif_echo < 0, f"motif_echo must be >= 0 (0 = off), got {self.motif_echo}"),
            (self.note_echo < 0, f"note_echo must be >= 0 (0 = off), got {self.note_echo}"),
            (self.phrase_echo < 0, f"phrase_echo must be >= 0 (0 = off), got {self.phrase_echo}"),
            (self.bass_lean < 0, f"bass_lean must be >= 0 (0 = off), got {self.bass_lean}"),
            (self.melody_presence < 0, f"melody_presence must be >= 0 (0 = off), got {self.melody_presence}"),
            (self.key_lean < 0, f"key_lean must be >= 0 (0 = off), got {self.key_lean}"),
            (self.counter_rest < 0, f"counter_rest must be >= 0 (0 = off), got {self.counter_rest}"),
            (self.harmony < 0, f"harmony must be >= 0 (0 = off), got {self.harmony}"),
            (self.harmony_guess < 0, f"harmony_guess must be >= 0 (0 = off), got {self.harmony_guess}"),
            (self.harmony_guess_strong < 0, f"harmony_guess_strong must be >= 0, got {self.harmony_guess_strong}"),
            (self.repeat_echo < 0, f"repeat_echo must be >= 0 (0 = off), got {self.repeat_echo}"),
            (not 0 <= self.copy_cache <= 1, f"copy_cache must be in [0, 1] (0 = off), got {self.copy_cache}"),
            (self.recall_local < 1, f"recall_local must be >= 1, got {self.recall_local}"),
            (self.recall_against not in RECALL_BRANCHES,
             f"recall_against must be one of {', '.join(RECALL_BRANCHES)}, got {self.recall_against!r}"),
        ]
        raise_first(bad)


# options that may be None
NULLABLE = ("top_k", "slide", "keep_seed", "top_p", "max_note_seconds", "polyphony_ratio", "note_cap_from_seed",
            "pedal_release")


def reference(name: str) -> str:
    """How a YAML file in ``conf/`` says "the `SamplingOptions` default of ``name``"."""
    return f"${{sampling:{name}}}"


def sampling_default(name: str):
    """The default of the `SamplingOptions` field ``name`` (what ``${sampling:NAME}`` resolves to)."""
    known = {f.name: f.default for f in fields(SamplingOptions)}
    if name not in known:
        raise KeyError(f"${{sampling:{name}}}: SamplingOptions has no option {name!r}; it has {sorted(known)}")
    return known[name]


def raise_first(bad: list[tuple[bool, str]]) -> None:
    """Raise GenerateError with the message of the first (condition, message) pair whose condition holds."""
    for is_bad, message in bad:
        if is_bad:
            raise GenerateError(message)


def whole_number(name: str, value, nullable: bool = True):
    """``value`` as an int (None where ``nullable``); GenerateError naming ``name`` for anything else."""
    if value is None and nullable:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise GenerateError(f"{name} must be a whole number, got {value!r}")
    return int(value)


def finite_number(name: str, value, nullable: bool = True) -> None:
    """GenerateError naming ``name`` unless ``value`` is a finite number (or None where ``nullable``)."""
    if value is None and nullable:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
        raise GenerateError(f"{name} must be a finite number, got {value!r}")
