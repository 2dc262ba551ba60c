"""The settings of one ``musictx-generate`` run (`GenerateOptions`, the keys of ``conf/generate.yaml``) and
their checks, apart from `musictx.generation.continue_midi` which runs them. Every check here runs before a
model is loaded, so a typo or a bad path costs nothing: option names (with the nearest one), numbers (whole,
finite, in range), the output folder, and what ``seed_midi`` names; `check_model` then checks the loaded
model against the options that depend on it.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, fields
from pathlib import Path

from musictx.decoding.errors import GenerateError
from musictx.decoding.hooks.final_chord import HOLD_SECONDS
from musictx.decoding.hooks.registry import HookOptions
from musictx.decoding.option_fields import finite_number, raise_first, whole_number
from musictx.decoding.sampling_options import SamplingOptions, hook_option_hint
from musictx.decoding.window import context_length
from musictx.generation.programs import parse_programs
from musictx.io.midi_io import file_problem
from musictx.io.read_errors import unreadable
from musictx.io.tokenizer import EventTokenizer
from musictx.io.tokenizers import load_tokenizer_file
from musictx.safe_output import target_problem
from musictx.tasks.drum_loop import DRUM_CHOICES
from musictx.tasks.limits import BOUNDS
from musictx.tasks.registry import DEFAULT_TASK, task_named
from musictx.tasks.task import DEFAULT_ACCOMPANY_CONTEXT

END_SEED_SECONDS = 10.0  # seed_from=end with seed_seconds=null: the last this many seconds of the file
MAX_NUM_SAMPLES = BOUNDS.num_samples
MAX_BARS = BOUNDS.length_bars


@dataclass
class GenerateOptions(SamplingOptions):
    """The settings of one generation run: how to sample (the fields of `SamplingOptions`, with its
    defaults), what to continue, how much, and where to write; the keys of ``conf/generate.yaml``."""

    checkpoint: str | None = None
    seed_midi: str | None = None  # None: unconditional
    seed_seconds: float | None = None  # keep this much of the seed, from its first note; None: all of it
    seed_from: float | str = 0.0  # seconds into the seed file: the seed starts at the first note struck from there;
    # "end": its last seed_seconds (END_SEED_SECONDS when null), so a file is continued from where it stops
    tokenizer: str | None = None  # tokenizer.json or a prepared data dir the checkpoint must match
    programs: dict | str | None = None  # {track name: GM program or instrument name} of the written tracks
    beats_per_bar: int | None = None  # metrical models: the seed's bars as this many beats, the downbeat found from
    # the music (a file whose meter is wrong); None: its beat file, its own meter, or found when it says 1/4
    length_seconds: float | None = 30.0  # of new material per sample; None: only max_tokens bounds it
    length_bars: int | None = None  # metrical models: bars of new music (overrides length_seconds); None: from it
    max_tokens: int | None = None  # new ids per sample at most; None: room for length_seconds (continue_seed.token_cap)
    num_samples: int = 4  # at most MAX_NUM_SAMPLES
    include_seed: bool = True  # False: write the continuation alone, shifted to start at 0
    drums: str = "loop"  # metrical models without drums: the seed's last drum bars played on (musictx.tasks.drum_loop)
    ending: bool = False  # continue: the piece closes on its key's chord (musictx.decoding.hooks.cadence, final_chord)
    soft_seed_velocity: float | None = 50.0  # a seed or song played softer (its notes' median velocity) is heard at
    # the model's own level and its new notes written back as softly (musictx.io.dynamics); None: heard as it is
    loud_seed_ratio: float | None = 1.3  # one played louder than this times the model's own level: the same, loudly
    flat_seed_level: bool = True  # one written at one velocity (no dynamics): heard at that level, likewise
    start_velocity: int = 64  # unconditional prompt: the VELOCITY event of this velocity
    device: str = "cpu"
    threads: int | None = None  # torch intra-op threads; None: torch's default
    progress_every_s: float | None = 10.0  # `run` prints how far sampling is this often (wall clock); None: never
    audio: bool = True  # write sample_XX.wav when fluidsynth and the soundfont are present
    soundfont: str | None = None  # None: the first GM soundfont found (musictx.io.audio.find_soundfont)
    output_dir: str | None = None
    task: str = DEFAULT_TASK  # a task of musictx.tasks.registry: continue, infill or accompany
    bars: str | None = None  # infill / accompany: FIRST-LAST, 1-based and inclusive
    tracks: list[str] | str | None = None  # infill: the tracks to redo (None: all); accompany: the tracks to write
    chords: str | None = None  # accompany, or continue (metrical): a lead sheet's chords ("START END LABEL" lines, s)
    # accompany: what it hears of a song's bars before its own: melody, song
    accompany_context: str = DEFAULT_ACCOMPANY_CONTEXT

    @classmethod
    def from_mapping(cls, values) -> GenerateOptions:
        """The options of a plain dict of generate.yaml's keys (a resolved config; a ``hydra`` block is left
        out); an unknown key raises GenerateError naming the nearest option."""
        data = {k: v for k, v in dict(values).items() if k != "hydra"}
        check_option_names(data)
        return cls(**data)

    def check(self) -> None:
        """Raise GenerateError naming the first bad option (numbers, then ``output_dir``, then what
        ``seed_midi`` names: a folder or a pipe is said to be one, not "unreadable"; then ``tokenizer``)."""
        if self.output_dir in (None, ""):
            raise GenerateError("output_dir is required")
        self.check_sampling()
        problem = device_problem(self.device)
        if problem:
            raise GenerateError(f"device={self.device}: {problem}")
        check_output_dir(self.output_dir)
        if self.seed_from and not self.seed_midi:
            shown = self.seed_from if isinstance(self.seed_from, str) else f"{self.seed_from:g}"
            raise GenerateError(f"seed_from={shown} needs a seed_midi to start in")
        # a folder of seeds (`seed_folder`); one named like a MIDI file is a mistake, said as such below
        folder = bool(self.seed_midi) and Path(self.seed_midi).is_dir() and not is_midi_name(self.seed_midi)
        problem = file_problem(self.seed_midi) if self.seed_midi and not folder else None
        if problem:
            raise GenerateError(f"seed_midi={self.seed_midi}: {problem}")
        if self.seed_from == "end" and not folder:  # resolved here, said by the run (`seed_note`), not by a check
            self.seed_from, self.seed_seconds, self.seed_note = seed_at_end(self.seed_midi, self.seed_seconds)
        if self.tokenizer:
            _expected_tokenizer(self.tokenizer)  # a missing or broken file is said before the model loads
        check_task(self)
        if self.drums not in DRUM_CHOICES:
            raise GenerateError(f"drums={self.drums}: give one of {', '.join(DRUM_CHOICES)}")
        parse_programs(self.programs)  # the names and programs, before the model loads

    def check_sampling(self) -> None:
        """The numeric options, the sampler's first (`SamplingOptions.check_sampling`): whole numbers where
        counts are meant (``max_tokens=1e9`` becomes an int), finite numbers (no NaN or inf) in range. Raise
        GenerateError naming the first bad one."""
        super().check_sampling()
        for name in ("max_tokens", "num_samples", "start_velocity", "threads", "length_bars", "beats_per_bar"):
            setattr(self, name, whole_number(name, getattr(self, name),
                                             nullable=name not in ("num_samples", "start_velocity")))
        raise_first([
            (self.length_bars is not None and not 1 <= self.length_bars <= MAX_BARS,
             f"length_bars must be in 1..{MAX_BARS} or null, got {self.length_bars}"),
            (self.beats_per_bar is not None and not 1 <= self.beats_per_bar <= 16,
             f"beats_per_bar must be in 1..16 or null, got {self.beats_per_bar}"),
        ])
        if isinstance(self.seed_from, str):
            if self.seed_from.strip().lower() != "end":
                raise GenerateError(f"seed_from must be seconds into the seed file or end, got {self.seed_from!r}")
            self.seed_from = "end"
        for name in ("seed_seconds", "seed_from", "length_seconds", "progress_every_s", "soft_seed_velocity",
                     "loud_seed_ratio"):
            if getattr(self, name) != "end":
                finite_number(name, getattr(self, name), nullable=name != "seed_from")
        seed_from = 0.0 if self.seed_from == "end" else self.seed_from
        raise_first([
            (not 1 <= self.num_samples <= MAX_NUM_SAMPLES,
             f"num_samples must be in 1..{MAX_NUM_SAMPLES} (they are generated as one batch), got {self.num_samples}"),
            (self.max_tokens is not None and not 1 <= self.max_tokens <= BOUNDS.max_tokens,
             f"max_tokens must be in 1..{BOUNDS.max_tokens} or null, got {self.max_tokens}"),
            (self.length_seconds is not None and self.length_seconds <= 0,
             f"length_seconds must be > 0 or null, got {self.length_seconds}"),
            (self.length_seconds is not None and self.length_seconds > BOUNDS.length_seconds,
             f"length_seconds must be at most {BOUNDS.length_seconds:g} (20 minutes of new music per sample; "
             f"longer pieces: continue a sample again), got {self.length_seconds}"),
            (self.seed_seconds is not None and self.seed_seconds <= 0,
             f"seed_seconds must be > 0 or null (all of the seed), got {self.seed_seconds}"),
            (self.seed_seconds is not None and self.seed_seconds > BOUNDS.seed_seconds,
             f"seed_seconds must be at most {BOUNDS.seed_seconds:g}, got {self.seed_seconds}"),
            (seed_from < 0, f"seed_from must be >= 0 (seconds into the seed file), got {self.seed_from}"),
            (seed_from > BOUNDS.seed_seconds,
             f"seed_from must be at most {BOUNDS.seed_seconds:g} (seconds into the seed file), got {self.seed_from}"),
            (not 1 <= self.start_velocity <= 127, f"start_velocity must be in 1..127, got {self.start_velocity}"),
            (self.soft_seed_velocity is not None and not 1 <= self.soft_seed_velocity <= 127,
             f"soft_seed_velocity must be in 1..127 or null, got {self.soft_seed_velocity}"),
            (self.loud_seed_ratio is not None and not self.loud_seed_ratio > 1,
             f"loud_seed_ratio must be > 1 (times the model's own level) or null, got {self.loud_seed_ratio}"),
            (self.threads is not None and self.threads < 1, f"threads must be >= 1 or null, got {self.threads}"),
            (self.progress_every_s is not None and self.progress_every_s <= 0,
             f"progress_every_s must be > 0 or null, got {self.progress_every_s}"),
        ])

    def check_model(self, net, tokenizer: EventTokenizer) -> None:
        """The options that depend on the loaded model: its tokenizer against ``tokenizer=`` (when set,
        TokenizerMismatchError), ``slide`` against its context (GenerateError)."""
        if self.tokenizer:
            expected = _expected_tokenizer(self.tokenizer)
            tokenizer.check_compatible(expected, what=f"tokenizer={self.tokenizer}")
        if self.ending and tokenizer.kind == "performance" and (self.length_seconds or 0) <= HOLD_SECONDS:
            raise GenerateError(f"ending=true: a piano's close holds its chord {HOLD_SECONDS:g} s; ask for more than "
                                f"that (length_seconds={self.length_seconds})")
        if self.chords is not None and tokenizer.kind == "performance":
            raise GenerateError(f"chords={self.chords}: a lead sheet leads a metrical (REMI) model's music; "
                                f"checkpoint={self.checkpoint} is a Performance-event model")
        max_len = context_length(net)
        if self.slide is not None and max_len is not None and self.slide >= max_len:
            raise GenerateError(f"slide must be < the model's context ({max_len}), got {self.slide}")


def check_output_dir(output_dir: str | os.PathLike) -> None:
    """Raise GenerateError unless ``output_dir`` is a folder or can be made one, outside the installed
    package: checked before the model runs, so that a typo does not cost the generation."""
    out = Path(output_dir)
    problem = target_problem(out)  # the package, /, the home folder itself (musictx.safe_output)
    if problem:
        raise GenerateError(f"output_dir={out}: {problem}")
    for path in (out, *out.parents):
        if path.is_dir():
            if not os.access(path, os.W_OK | os.X_OK):
                raise GenerateError(f"output_dir={out}: {path} is not writable")
            return
        if os.path.lexists(path):
            what = "is" if path == out else f"is inside {path}, which is"
            raise GenerateError(f"output_dir={out}: {what} a file, not a folder")


def device_problem(name) -> str | None:
    """Why torch cannot run on the device ``name`` here (cpu, cuda, cuda:N, mps), or None."""
    text = str(name)
    if text == "cpu":
        return None
    import torch  # only to ask about an accelerator: the CPU needs no question, and the checks stay light

    if text == "mps":
        return None if torch.backends.mps.is_available() else "no Apple GPU (MPS) here; use device=cpu"
    if text == "cuda" or text.startswith("cuda:"):
        if not torch.cuda.is_available():
            return "no CUDA GPU here (or torch was built without CUDA); use device=cpu"
        index = text.partition(":")[2]
        if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
            return f"no such GPU ({torch.cuda.device_count()} here: cuda:0 ...)"
        return None
    return "use cpu, cuda, cuda:N or mps"


def check_task(opts: GenerateOptions) -> None:
    """Raise GenerateError for a task and options that do not go together (before a model is loaded)."""
    task = task_named(opts.task)
    task.check(opts)
    if opts.chords is not None and not os.path.lexists(opts.chords):
        raise GenerateError(f"chords={opts.chords}: no such file (a lab file of 'START END LABEL' lines)")


def _expected_tokenizer(path: str):
    p = Path(path)
    file = p / "tokenizer.json" if p.is_dir() else p
    if not file.is_file():
        raise GenerateError(f"tokenizer={path}: no such file (a tokenizer.json, or a prepared data dir holding one)")
    try:
        return load_tokenizer_file(file)
    except (ValueError, KeyError, TypeError) as err:  # json.JSONDecodeError is a ValueError
        raise GenerateError(f"tokenizer={file}: not a tokenizer.json ({err})") from None


def override_names(args: list[str]) -> list[str]:
    """The option each plain ``key=value`` override sets, dotted as written (``hooks.bass_lean.strength``).
    Flags (``-m``, ``--cfg``), ``hydra.*`` / ``hydra/*`` overrides and ``+`` / ``~`` ones (checked by
    `GenerateOptions.from_mapping` or refused by Hydra itself) are left out."""
    names = []
    for arg in args:
        if "=" not in arg or arg.startswith(("-", "+", "~")):
            continue
        name = arg.split("=", 1)[0].replace("/", ".")
        if name.split(".", 1)[0] != "hydra":
            names.append(name)
    return names


def check_option_names(names) -> None:
    """Raise GenerateError for the first name that is not a `GenerateOptions` field (a hook's option:
    ``hooks.NAME.FIELD``), with the nearest one; a hook's name is told where its options are."""
    known = [f.name for f in fields(GenerateOptions)]
    for dotted in names:
        name, _, rest = str(dotted).partition(".")
        if (err := hook_option_hint(name)) is not None:
            raise err
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean '{close[0]}'?" if close else "musictx-generate --help lists the options"
            raise GenerateError(f"unknown option '{name}'; {hint}")
        if name == "hooks" and rest:
            group, _, field_name = rest.partition(".")
            HookOptions.from_mapping({group: {field_name: None} if field_name else {}})


def not_on_command_line(args: list[str]) -> None:
    """GenerateError for ``tokenizer=``: a field of `GenerateOptions` for scripts (a check of the model against a
    tokenizer file), but not a command-line option: Hydra reads ``tokenizer`` as the config group of conf/ that
    musictx-prep uses, and a model always samples with its own tokenizer, so the command has nothing to set."""
    given = [a for a in args if a.split("=", 1)[0].lstrip("+~") == "tokenizer"]
    if given:
        raise GenerateError(f"{given[0]}: musictx-generate has no tokenizer option; a model samples with its own "
                            "tokenizer (checkpoint= picks the model). To check a checkpoint against prepared data, "
                            "run musictx-evaluate checkpoint=... data.dir=<that data>: it refuses a mismatch")


def seed_at_end(path, seed_seconds: float | None) -> tuple[float, float, str]:
    """(seed_from, seed_seconds, the line saying so) of ``seed_from=end``: the last ``seed_seconds`` (or
    `END_SEED_SECONDS`) of ``path``, its end being where its last note stops sounding."""
    from symusic import Score

    from musictx.tasks.metrical_seeds import ticks_to_seconds  # no torch: symusic and numpy

    try:
        score = Score(str(path))
    except Exception as err:  # the seed's own reader says it best, later; here only its length is wanted
        raise GenerateError(f"seed_midi={path}: {unreadable(err)}") from None
    end = float(ticks_to_seconds(score, [max(score.end(), 0)])[0])
    take = min(seed_seconds or END_SEED_SECONDS, end)
    start = max(end - take, 0.0)
    return start, take, (f"seed_from=end: the last {take:.1f} s of {path} ({start:.1f}-{end:.1f} s) are the seed; "
                         "the new music follows its end")


def is_midi_name(path) -> bool:
    """Whether ``path`` is named as a MIDI file is (.mid, .midi, any case)."""
    return Path(path).suffix.lower() in (".mid", ".midi")
