"""Every logits hook of the sampler, one line each, and `build_hooks`: the one place a hook list is built.

A hook describes itself in its own file (`musictx.decoding.hook.HookSpec`): its options dataclass, the
tokenizer kinds and tasks it applies to, the hooks it needs, and how it is made from a run's `HookInputs`.
Adding a hook is its file plus one line here, where it is to run: `HookOptions` (``opts.hooks.NAME.FIELD``, on
the command line ``hooks.NAME.FIELD=VALUE``) and ``--help`` are built from the same list. A task never switches
a hook off: a hook that does not apply to the task (recall guidance in an infill, say) is not made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, fields, make_dataclass

from musictx.decoding.hook import PROGRESS, HookInputs, HookSpec, LogitsHook
from musictx.decoding.hooks import (
    bar_repeats,
    bass_floor,
    bass_lean,
    bridge_presence,
    cadence,
    chord_events,
    chord_lean,
    copy_cache,
    density,
    given_notes,
    guard,
    length,
    melody_presence,
    metrical_guard,
    motif_echo,
    note_echo,
    pace,
    phrase_return,
    recall_guidance,
    repeat_echo,
    top_repeat,
)
from musictx.decoding.option_fields import check_fields, fields_from_mapping, help_of, unknown_name, yaml_text

# The order the hooks run in: the copy cache mixes probabilities first; the hooks that forbid ids come before
# those that lean (a lean keeps -inf at -inf); progress and the length rule after the leans; recall guidance,
# which wraps the decoder, last. A hook comes after every hook it needs (`_check_needs`).
HOOKS: tuple[HookSpec, ...] = (
    copy_cache.SPEC,
    guard.SPEC,
    metrical_guard.SPEC,
    chord_events.SPEC,
    bar_repeats.SPEC,
    given_notes.GIVEN_NOTES,
    bass_floor.SPEC,
    given_notes.HARMONY_LEAN,
    motif_echo.SPEC,
    note_echo.SPEC,
    pace.SPEC,
    top_repeat.SPEC,
    chord_lean.SPEC,
    repeat_echo.SPEC,
    phrase_return.SPEC,
    bass_lean.SPEC,
    melody_presence.SPEC,
    bridge_presence.SPEC,
    density.SPEC,
    cadence.SPEC,  # after every hook that forbids: a row it would leave no id is left alone
    given_notes.COUNTER_REST,
    PROGRESS,
    length.SPEC,
    recall_guidance.SPEC,
)


def _check_needs(specs: tuple[HookSpec, ...]) -> None:
    """ValueError, at import, when a hook is listed before a hook it needs or needs one that does not exist."""
    seen: set[str] = set()
    for spec in specs:
        missing = [name for name in spec.needs if name not in seen]
        if missing:
            raise ValueError(f"hook {spec.name} needs {', '.join(missing)}: list it after them")
        seen.add(spec.name)


_check_needs(HOOKS)


def _from_mapping(cls, values: Mapping) -> HookOptions:
    """The hooks' options from a dict of groups (``{"bass_lean": {"strength": 0}}``; a group given as its
    options object is taken as it is); the groups and fields not named keep their defaults. An unknown group
    or field raises GenerateError naming the nearest."""
    groups = [f.name for f in fields(cls)]
    made = {}
    for name, values_of in dict(values).items():
        if name not in groups:
            raise unknown_name(str(name), groups, "hooks")
        option_class = cls.__dataclass_fields__[name].type
        made[name] = (values_of if isinstance(values_of, option_class)
                      else fields_from_mapping(option_class, values_of or {}, f"hooks.{name}"))
    return cls(**made)


def _check(self) -> None:
    """Raise GenerateError naming the first bad option, as ``hooks.NAME.FIELD``."""
    for f in fields(self):
        check_fields(getattr(self, f.name), f"hooks.{f.name}")


# every hook's options, one field (a group) per hook that has options, in the hooks' order
HookOptions = make_dataclass(
    "HookOptions",
    [(spec.name, spec.options, field(default_factory=spec.options)) for spec in HOOKS if spec.options],
    namespace={"from_mapping": classmethod(_from_mapping), "check": _check,
               "__doc__": "Every hook's options: ``opts.hooks.bass_lean.strength`` (see this module)."},
)
HookOptions.__module__ = __name__


def hooks_for(task: str, kind: str) -> list[HookSpec]:
    """The specs that apply to ``task`` on a tokenizer of ``kind``, in their order."""
    return [spec for spec in HOOKS if (spec.tasks is None or task in spec.tasks) and kind in spec.kinds]


def hooks_made(inputs: HookInputs) -> dict[str, LogitsHook]:
    """{name: hook} of one run, in order: each spec that applies to the run's task and tokenizer makes its hook
    (or None, where its options turn it off or the run gives it nothing to do), handed the hooks it needs."""
    kind = getattr(inputs.tokenizer, "kind", "performance")
    made: dict[str, LogitsHook] = {}
    for spec in hooks_for(inputs.task, kind):
        if any(name not in made for name in spec.needs):
            continue  # what it builds on was not made in this run
        options = getattr(inputs.sampling.hooks, spec.name) if spec.options else None
        hook = spec.make(inputs, options, *(made[name] for name in spec.needs))
        if hook is not None:
            made[spec.name] = hook
    return made


def build_hooks(inputs: HookInputs) -> list[LogitsHook]:
    """The hooks of one run, in order (`hooks_made`); the metrical hooks' shared cursor
    (`musictx.decoding.cursor`), where a hook asked for it, runs before them: they read where it stands."""
    hooks = list(hooks_made(inputs).values())
    return ([inputs.cursor] if inputs.cursor is not None else []) + hooks


def options_help() -> list[str]:
    """For ``--help``: each hook with options, where it applies and what it does, then its options as
    ``hooks.NAME.FIELD=DEFAULT`` with one line each."""
    lines = []
    for spec in HOOKS:
        if not spec.options:
            continue
        lines.append(f"  {spec.name}: {spec.help} [tasks: {', '.join(spec.tasks or ['all'])}; models: "
                     f"{', '.join(KIND_WORDS[k] for k in spec.kinds)}]")
        for name, default, text in help_of(spec.options):
            setting = f"hooks.{spec.name}.{name}={yaml_text(default)}"
            lines.append(f"      {setting:<44} {text}")
    return lines


KIND_WORDS = {"performance": "Performance (piano)", "remi": "metrical (pop)"}
