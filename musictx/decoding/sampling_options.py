"""What a run samples with: `SamplingOptions`, the general decoding settings (`DecodingOptions`) and every
hook's options (``hooks``: one group per hook, declared in the hook's own file and gathered by
`musictx.decoding.hooks.registry.HookOptions`). Each default is written once, there.

``musictx-generate`` (whose `GenerateOptions` extends it), the continuation and motif measures of
``musictx-evaluate``, and the web app all start from these defaults. The YAML files in ``conf/`` do not repeat
the numbers: a decoding key written ``temperature: ${sampling:temperature}`` means "the default", and the
hooks' groups come from Hydra's config store (``- hooks: shipped`` in a defaults list,
`musictx.console.config_help`), so ``hooks.phrase_echo.strength=1.3`` sets one hook's option.

The hooks' options had flat names before (``phrase_echo=1.3``): `RENAMED` maps each old name to its new
place, and a run given one is told so in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace

from musictx.decoding.decoding_options import DecodingOptions
from musictx.decoding.errors import GenerateError
from musictx.decoding.hooks.registry import HookOptions

# the options' old flat names (before the hooks' groups) -> where each lives now
RENAMED = {
    "guard": "hooks.guard.enabled (Performance models), hooks.metrical_guard.enabled (metrical ones)",
    "max_note_seconds": "hooks.guard.max_note_seconds",
    "note_cap_from_seed": "hooks.guard.note_cap_from_seed",
    "polyphony_ratio": "hooks.guard.polyphony_ratio",
    "pedal_release": "hooks.guard.pedal_release",
    "max_bar_repeats": "hooks.bar_repeats.max_repeats",
    "recall_guidance": "hooks.recall_guidance.strength",
    "recall_local": "hooks.recall_guidance.local",
    "recall_against": "hooks.recall_guidance.against",
    "motif_echo": "hooks.motif_echo.strength",
    "note_echo": "hooks.note_echo.strength",
    "phrase_echo": "hooks.phrase_echo.strength",
    "repeat_echo": "hooks.repeat_echo.strength",
    "bass_lean": "hooks.bass_lean.strength",
    "melody_presence": "hooks.melody_presence.strength",
    "key_lean": "hooks.key_lean.strength",
    "harmony": "hooks.harmony_lean.strength (task=accompany), hooks.chord_lean.strength (a continuation with chords=)",
    "harmony_guess": "hooks.harmony_lean.guess",
    "harmony_guess_strong": "hooks.harmony_lean.guess_strong",
    "counter_rest": "hooks.counter_rest.strength",
    "copy_cache": "hooks.copy_cache.strength",
}


def renamed(name: str) -> GenerateError | None:
    """The one-line error for an option's old flat name, saying where it lives now; None for other names."""
    if name not in RENAMED:
        return None
    return GenerateError(f"option '{name}' is now {RENAMED[name]}: the hooks' options moved into groups "
                         f"(musictx-generate --help lists them)")


@dataclass
class SamplingOptions(DecodingOptions):
    """The decoding settings and every hook's options: what a run (a command, the app, an evaluation) sets.
    `generate` reads only the `DecodingOptions` part; each hook reads its own group of ``hooks`` where
    `build_hooks` makes it. ``hooks`` may be given as a dict of groups (``{"key_lean": {"strength": 0}}``),
    the groups not named keeping their defaults."""

    hooks: HookOptions = field(default_factory=HookOptions)

    def __post_init__(self) -> None:
        if isinstance(self.hooks, Mapping):
            self.hooks = HookOptions.from_mapping(self.hooks)

    @classmethod
    def from_mapping(cls, values) -> SamplingOptions:
        """The options named in ``values`` (a dict, e.g. a block of evaluate.yaml; other keys are left for the
        caller). A missing key, or one still holding its YAML reference ``${sampling:NAME}`` (a YAML read
        without Hydra), takes the default. An old flat hook option raises GenerateError saying its new name."""
        for name in values:
            if (err := renamed(name)) is not None:
                raise err
        given = {f.name: values[f.name] for f in fields(cls) if f.name in values}
        return cls(**{name: value for name, value in given.items() if value != reference(name)})

    def with_hook(self, name: str, **values) -> SamplingOptions:
        """A copy whose hook ``name`` has the options ``values`` (the user's own setting, e.g. the app's
        recall slider); the other groups are shared, unchanged."""
        group = replace(getattr(self.hooks, name), **values)
        return replace(self, hooks=replace(self.hooks, **{name: group}))

    def check_sampling(self) -> None:
        """Raise GenerateError naming the first bad option, the decoding settings first, then each hook's."""
        self.check_decoding()
        self.hooks.check()


def reference(name: str) -> str:
    """How a YAML file in ``conf/`` says "the default of the decoding setting ``name``"."""
    return f"${{sampling:{name}}}"


def sampling_default(name: str):
    """The default of the `DecodingOptions` field ``name`` (what ``${sampling:NAME}`` resolves to)."""
    known = {f.name: f.default for f in fields(DecodingOptions)}
    if name not in known:
        raise KeyError(f"${{sampling:{name}}}: DecodingOptions has no option {name!r}; it has {sorted(known)}")
    return known[name]


def shipped_hooks() -> dict:
    """Every hook's options at their defaults, as plain dicts: the ``hooks`` group Hydra composes."""
    return asdict(HookOptions())
