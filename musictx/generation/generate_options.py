"""The settings of one ``musictx-generate`` run (`GenerateOptions`, the keys of ``conf/generate.yaml``) and
their checks, apart from `musictx.generation.continue_midi` which runs them: the command, the app,
``musictx-evaluate``'s continuations and the benches all build one. Every check here runs before a model is
loaded, so a typo or a bad path costs nothing: option names (with the nearest one), numbers (whole, finite, in
range), the output folder, and what ``seed_midi`` names.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, fields

import numpy as np
from omegaconf import DictConfig, OmegaConf

from musictx.generation.output_folder import check_output_dir
from musictx.generation.sampling import KEEP_SEED
from musictx.generation.seeds import GenerateError
from musictx.io.midi_io import file_problem


@dataclass
class GenerateOptions:
    """The settings of one generation run; the fields (and defaults) of ``conf/generate.yaml``."""

    checkpoint: str | None = None
    seed_midi: str | None = None  # None: unconditional
    seed_seconds: float | None = None  # keep this much of the seed, from its first note; None: all of it
    seed_from: float = 0.0  # seconds into the seed file: the seed starts at the first note struck from there
    tokenizer: str | None = None  # tokenizer.json or a prepared data dir the checkpoint must match
    length_seconds: float | None = 30.0  # of new material per sample; None: only max_tokens bounds it
    max_tokens: int | None = None  # new ids per sample at most; None: room for length_seconds (`token_cap`)
    num_samples: int = 4  # at most MAX_NUM_SAMPLES
    temperature: float = 1.0  # 0: greedy
    top_k: int | None = None
    top_p: float | None = 0.95
    seed: int = 0  # of the random generator
    use_cache: bool = True  # False: recompute the whole window every step (reference path)
    slide: int | None = None  # ids dropped when the context is full; None: max_seq_len // 4
    keep_seed: int | None = KEEP_SEED  # the seed's last ids pinned at the start of a slid window; 0: none
    include_seed: bool = True  # False: write the continuation alone, shifted to start at 0
    start_velocity: int = 64  # unconditional prompt: the VELOCITY event of this velocity
    guard: bool = True  # refuse stray NOTE_OFFs and end notes held max_note_seconds (musictx.generation.guard)
    max_note_seconds: float | None = 5.0  # with guard: the longest a note may sound; None: no cap
    device: str = "cpu"
    threads: int | None = None  # torch intra-op threads; None: torch's default
    progress_every_s: float | None = 10.0  # `run` prints how far sampling is this often (wall clock); None: never
    audio: bool = True  # write sample_XX.wav when fluidsynth and the soundfont are present
    soundfont: str | None = None  # None: the first GM soundfont found (musictx.io.audio.find_soundfont)
    output_dir: str | None = None

    @classmethod
    def from_config(cls, cfg: DictConfig | dict) -> GenerateOptions:
        data = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
        data.pop("hydra", None)
        check_option_names(data)
        return cls(**data)

    def token_cap(self) -> int:
        """New ids per sample at most: ``max_tokens``, or when it is unset room for ``length_seconds`` of
        dense piano (`TOKENS_PER_SECOND`), never below `DEFAULT_MAX_TOKENS`, so that the length asked for
        is what stops a sample."""
        if self.max_tokens is not None:
            return self.max_tokens
        return max(DEFAULT_MAX_TOKENS, math.ceil(TOKENS_PER_SECOND * (self.length_seconds or 0)))

    def check(self) -> None:
        """Raise GenerateError naming the first bad option (numbers, then ``output_dir``, then what
        ``seed_midi`` names: a folder or a pipe is said to be one, not "unreadable")."""
        if self.output_dir in (None, ""):
            raise GenerateError("output_dir is required")
        self.check_sampling()
        check_output_dir(self.output_dir)
        if self.seed_from and not self.seed_midi:
            raise GenerateError(f"seed_from={self.seed_from:g} needs a seed_midi to start in")
        problem = file_problem(self.seed_midi) if self.seed_midi else None
        if problem:
            raise GenerateError(f"seed_midi={self.seed_midi}: {problem}")

    def check_sampling(self) -> None:
        """The numeric options: whole numbers where counts are meant (``max_tokens=1e9`` becomes an int),
        finite numbers (no NaN or inf) in range. Raise GenerateError naming the first bad one."""
        for name in WHOLE_OPTIONS:
            setattr(self, name, _whole(name, getattr(self, name)))
        for name in REAL_OPTIONS:
            _finite(name, getattr(self, name))
        bad = [
            (self.temperature < 0, f"temperature must be >= 0 (0 = greedy), got {self.temperature}"),
            (self.top_k is not None and self.top_k < 1, f"top_k must be >= 1 or null, got {self.top_k}"),
            (self.top_p is not None and not 0 < self.top_p <= 1, f"top_p must be in (0, 1] or null, got {self.top_p}"),
            (not 1 <= self.num_samples <= MAX_NUM_SAMPLES,
             f"num_samples must be in 1..{MAX_NUM_SAMPLES} (they are generated as one batch), got {self.num_samples}"),
            (self.max_tokens is not None and self.max_tokens < 1,
             f"max_tokens must be >= 1 or null, got {self.max_tokens}"),
            (self.length_seconds is not None and self.length_seconds <= 0,
             f"length_seconds must be > 0 or null, got {self.length_seconds}"),
            (self.seed_seconds is not None and self.seed_seconds <= 0,
             f"seed_seconds must be > 0 or null (all of the seed), got {self.seed_seconds}"),
            (self.seed_from < 0, f"seed_from must be >= 0 (seconds into the seed file), got {self.seed_from}"),
            (self.slide is not None and self.slide < 1, f"slide must be >= 1 or null, got {self.slide}"),
            (self.keep_seed is not None and self.keep_seed < 0,
             f"keep_seed must be >= 0 or null, got {self.keep_seed}"),
            (self.max_note_seconds is not None and not self.max_note_seconds > 0,
             f"max_note_seconds must be > 0 or null, got {self.max_note_seconds}"),
            (not 1 <= self.start_velocity <= 127, f"start_velocity must be in 1..127, got {self.start_velocity}"),
            (self.threads is not None and self.threads < 1, f"threads must be >= 1 or null, got {self.threads}"),
            (self.progress_every_s is not None and self.progress_every_s <= 0,
             f"progress_every_s must be > 0 or null, got {self.progress_every_s}"),
        ]
        for is_bad, message in bad:
            if is_bad:
                raise GenerateError(message)


# Options that count something (a float with a whole value, as Hydra reads 1e9, is accepted) and options
# that are real numbers; None is allowed where the field's type allows it.
WHOLE_OPTIONS = ("max_tokens", "num_samples", "top_k", "seed", "slide", "keep_seed", "start_velocity", "threads")
REAL_OPTIONS = ("seed_seconds", "seed_from", "length_seconds", "temperature", "top_p", "max_note_seconds",
                "progress_every_s")
# The token cap when max_tokens is unset: recorded piano runs at ~40-80 ids per second of music, so this is
# only reached by a model that has gone wrong; DEFAULT_MAX_TOKENS without length_seconds.
TOKENS_PER_SECOND = 200
DEFAULT_MAX_TOKENS = 2048
# The samples of a run are one batch: past a few dozen that is a typo (num_samples=400) costing memory and
# hours, not a request; more samples come from more runs (seed=...) into the same folder.
MAX_NUM_SAMPLES = 64


def check_option_names(names) -> None:
    """Raise GenerateError for the first name that is not a `GenerateOptions` field, with the nearest one."""
    known = [f.name for f in fields(GenerateOptions)]
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean '{close[0]}'?" if close else "musictx-generate --cfg job lists the options"
            raise GenerateError(f"unknown option '{name}'; {hint}")


def _whole(name: str, value):
    if value is None and name not in ("num_samples", "seed", "start_velocity"):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise GenerateError(f"{name} must be a whole number, got {value!r}")
    return int(value)


def _finite(name: str, value) -> None:
    if value is None and name not in ("temperature", "seed_from"):
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
        raise GenerateError(f"{name} must be a finite number, got {value!r}")
