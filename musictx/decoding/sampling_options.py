"""What a run samples with: `SamplingOptions`, the general decoding settings (`DecodingOptions`) and every
hook's options (``hooks``: one group per hook, declared in the hook's own file and gathered by
`musictx.decoding.hooks.registry.HookOptions`). Each default is written once, there.

``musictx-generate`` (whose `GenerateOptions` extends it), the continuation and motif measures of
``musictx-evaluate``, and the web app all start from these defaults. The YAML files in ``conf/`` do not repeat
the numbers: a decoding key written ``temperature: ${sampling:temperature}`` means "the default", and the
hooks' groups come from Hydra's config store (``- hooks: shipped`` in a defaults list,
`musictx.console.config_help`), so ``hooks.bass_lean.strength=0`` sets one hook's option.

A hook's name given as an option (``bass_lean=0``) is told where its options are, in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace

from musictx.decoding.decoding_options import DecodingOptions
from musictx.decoding.errors import GenerateError
from musictx.decoding.hooks.registry import HookOptions
from musictx.decoding.option_fields import MAX_BEST_OF, raise_first, whole_number


def hook_option_hint(name: str) -> GenerateError | None:
    """The one-line error for a hook's name given as an option (``bass_lean=0``): its options are
    ``hooks.NAME.FIELD``; None for other names."""
    groups = [f.name for f in fields(HookOptions)]
    if name not in groups:
        return None
    options = ", ".join(f"hooks.{name}.{f.name}" for f in fields(HookOptions.__dataclass_fields__[name].type))
    return GenerateError(f"option '{name}' is a hook: set {options} (musictx-generate --help lists them)")


@dataclass
class SamplingOptions(DecodingOptions):
    """The decoding settings and every hook's options: what a run (a command, the app, an evaluation) sets.
    `generate` reads only the `DecodingOptions` part; each hook reads its own group of ``hooks`` where
    `build_hooks` makes it. ``hooks`` may be given as a dict of groups (``{"bass_lean": {"strength": 0}}``),
    the groups not named keeping their defaults."""

    hooks: HookOptions = field(default_factory=HookOptions)
    # a metrical continuation: draw this many candidates for each sample and keep the one the model's critic
    # finds most like a song (critic.json beside its weights; `musictx.tasks.critic_choice`); None: the
    # critic's own number (1 for a model without one); 1: no choice. The task reads it, not `generate`.
    best_of: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.hooks, Mapping):
            self.hooks = HookOptions.from_mapping(self.hooks)

    @classmethod
    def from_mapping(cls, values) -> SamplingOptions:
        """The options named in ``values`` (a dict, e.g. a block of evaluate.yaml; other keys are left for the
        caller). A missing key, or one still holding its YAML reference ``${sampling:NAME}`` (a YAML read
        without Hydra), takes the default. An old flat hook option raises GenerateError saying its new name."""
        for name in values:
            if (err := hook_option_hint(name)) is not None:
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
        self.best_of = whole_number("best_of", self.best_of)
        raise_first([(self.best_of is not None and not 1 <= self.best_of <= MAX_BEST_OF,
                      f"best_of must be 1..{MAX_BEST_OF} or null (the critic's own number), got {self.best_of}")])
        self.hooks.check()


def reference(name: str) -> str:
    """How a YAML file in ``conf/`` says "the default of the decoding setting ``name``"."""
    return f"${{sampling:{name}}}"


def sampling_default(name: str):
    """The default of the `SamplingOptions` field ``name`` (what ``${sampling:NAME}`` resolves to): a decoding
    setting or ``best_of``."""
    known = {f.name: f.default for f in fields(SamplingOptions) if f.name != "hooks"}
    if name not in known:
        raise KeyError(f"${{sampling:{name}}}: SamplingOptions has no option {name!r}; it has {sorted(known)}")
    return known[name]


def shipped_hooks() -> dict:
    """Every hook's options at their defaults, as plain dicts: the ``hooks`` group Hydra composes."""
    return asdict(HookOptions())
