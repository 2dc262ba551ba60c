"""Every logits hook of the sampler, one line each, and `build_hooks`: the one place a hook list is built.

A hook describes itself in its own file (`musictx.generation.hooks.HookSpec`): the options it reads, the
tokenizer kinds and tasks it applies to, its place in the order, and how it is made from a run's
`HookInputs`. Adding a hook is its file plus one line here. A task never switches a hook off: a hook that
does not apply to the task (recall guidance in an infill, say) is not made.
"""

from __future__ import annotations

from musictx.generation import (
    bar_repeats,
    bass_lean,
    chord_lean,
    copy_cache,
    given_notes,
    guard,
    key_lean,
    length,
    melody_presence,
    metrical_guard,
    motif_echo,
    note_echo,
    phrase_echo,
    recall_guidance,
)
from musictx.generation.hooks import PROGRESS, HookInputs, HookSpec, LogitsHook

HOOKS: tuple[HookSpec, ...] = tuple(sorted((
    copy_cache.SPEC,
    guard.SPEC,
    metrical_guard.SPEC,
    bar_repeats.SPEC,
    given_notes.GIVEN_NOTES,
    given_notes.HARMONY_LEAN,
    motif_echo.SPEC,
    key_lean.SPEC,
    chord_lean.SPEC,
    note_echo.SPEC,
    phrase_echo.PHRASE_ECHO,
    phrase_echo.REPEAT_ECHO,
    bass_lean.SPEC,
    melody_presence.SPEC,
    given_notes.COUNTER_REST,
    PROGRESS,
    length.SPEC,
    recall_guidance.SPEC,
), key=lambda spec: spec.order))


def hooks_for(task: str, kind: str) -> list[HookSpec]:
    """The specs that apply to ``task`` on a tokenizer of ``kind``, in their order."""
    return [spec for spec in HOOKS if task in spec.tasks and kind in spec.kinds]


def build_hooks(inputs: HookInputs) -> list[LogitsHook]:
    """The hooks of one run, in order: each spec that applies to the run's task and tokenizer makes its hook
    (or None, where its options turn it off or the run gives it nothing to do); the metrical hooks' shared
    cursor (`musictx.generation.cursor`) runs before them."""
    kind = getattr(inputs.tokenizer, "kind", "performance")
    hooks = []
    for spec in hooks_for(inputs.task, kind):
        hook = spec.make(inputs)
        if hook is not None:
            inputs.made[spec.name] = hook
            hooks.append(hook)
    # the shared cursor, where a hook asked for it, follows each id first: the hooks read where it stands
    return ([inputs.cursor] if inputs.cursor is not None else []) + hooks


def options_help() -> list[str]:
    """One line per hook for ``--help``: its name, where it applies, the options it reads and what it does."""
    lines = []
    for spec in HOOKS:
        options = ", ".join(spec.options) or "-"
        lines.append(f"  {spec.name:<16} [{'/'.join(spec.tasks)}; {'/'.join(spec.kinds)}] {options}: {spec.help}")
    return lines
