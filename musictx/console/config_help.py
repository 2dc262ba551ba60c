"""``--help`` for the Hydra commands: each command's own keys, read from its YAML in ``conf/`` with their comments.

Hydra's own ``--help`` lists the config groups it finds next to the primary config, and every command shares
``conf/``, so ``musictx-generate --help`` used to answer with the training groups and no word about
``length_seconds``. The key descriptions already live as trailing comments in each command's YAML; reading
them (instead of copying them into a ``hydra.help.template``) keeps one place to write a key's meaning.
``--hydra-help`` still gives Hydra's flags.

Decoding keys are written ``temperature: ${sampling:temperature}`` in the YAML files: their defaults are
those of `musictx.decoding.decoding_options.DecodingOptions`, written there only. The hooks' options come
as the config group ``hooks`` (``- hooks: shipped`` in a defaults list), stored in Hydra's config store from
each hook's own options dataclass. Importing this module (every command does, for its ``--help``) registers
both, and the help shows the numbers they stand for.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from musictx.decoding.option_fields import yaml_text
from musictx.decoding.sampling_options import sampling_default, shipped_hooks
from musictx.paths import CONF_DIR

HELP_FLAGS = ("--help", "-h")
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_]\w*):(?P<value>[^#]*?)\s*(?:#\s?(?P<note>.*))?$")
_GROUP = re.compile(r"^\s+-\s+(?P<group>[A-Za-z_][\w@.]*):\s*(?P<choice>\S+)")
_SKIPPED_BLOCKS = ("hydra", "defaults")
_SAMPLING_REFERENCE = re.compile(r"^\$\{sampling:(\w+)\}$")


def register_resolvers() -> None:
    """``${sampling:NAME}`` in conf/*.yaml: the `DecodingOptions` default of NAME; and the config group
    ``hooks`` (option ``shipped``): every hook's options at their defaults (idempotent)."""
    if not OmegaConf.has_resolver("sampling"):
        OmegaConf.register_new_resolver("sampling", sampling_default)
    ConfigStore.instance().store(group="hooks", name="shipped", node=shipped_hooks())


register_resolvers()  # before any command composes its config: Hydra resolves the keys with it


@dataclass
class Key:
    indent: int
    name: str    # dotted: continuation.num_seeds
    value: str   # the default as written in the YAML ("" for a block of keys)
    note: str    # its trailing comment, continuation lines joined


def read_keys(text: str) -> tuple[list[str], list[Key], list[tuple[str, str]]]:
    """(the header comment lines, the keys in order, the config groups of ``defaults`` as (group, choice))."""
    header, keys, groups = [], [], []
    parents: list[Key] = []
    block = None  # the top-level key whose lines are being read
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            if not keys and block is None:
                header.append(line[1:].rstrip()[1:] if line.startswith("# ") else line[1:].rstrip())
            continue
        if line.lstrip().startswith("#"):  # an indented comment line continues the key above it
            if keys and block not in _SKIPPED_BLOCKS:
                keys[-1].note = f"{keys[-1].note} {line.strip().lstrip('#').strip()}".strip()
            continue
        found = _KEY.match(line)
        if found and not found["indent"]:
            block = found["key"]
        if block == "defaults" and (group := _GROUP.match(line)) and group["group"] != "override":
            groups.append((group["group"], group["choice"]))
        if block in _SKIPPED_BLOCKS or not found:
            continue
        indent = len(found["indent"])
        parents = [p for p in parents if p.indent < indent]
        name = f"{parents[-1].name}.{found['key']}" if parents else found["key"]
        key = Key(indent, name, found["value"].strip(), (found["note"] or "").strip())
        keys.append(key)
        parents.append(key)
    return header, keys, groups


def _shown(value: str) -> str:
    """A key's default as the help shows it: the number a ``${sampling:NAME}`` reference stands for."""
    found = _SAMPLING_REFERENCE.match(value)
    if not found:
        return value
    return yaml_text(sampling_default(found[1]))


def _choices(group: str) -> str:
    names = sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml"))
    return ", ".join(names)


def key_help(config_name: str, prog: str) -> str:
    """The help text of the command whose config is ``conf/<config_name>.yaml``."""
    header, keys, groups = read_keys((Path(CONF_DIR) / f"{config_name}.yaml").read_text())
    lines = [*header, "", f"usage: {prog} [key=value ...]", "", "keys (key=default  what it does):"]
    hooks_at = [g for g, _ in groups if g.split("@")[0] == "hooks"]  # the hooks' groups: listed below, by hook
    rows = [(f"{g}={c}", f"config group, one of: {_choices(g)}") for g, c in groups if g not in hooks_at]
    for i, key in enumerate(keys):
        is_block = not key.value and i + 1 < len(keys) and keys[i + 1].indent > key.indent
        if is_block:
            if key.note:
                rows.append((f"{key.name}.*", key.note))
        else:
            rows.append((f"{key.name}={_shown(key.value)}", key.note))
    width = min(max(len(k) for k, _ in rows) + 2, 34)
    lines += [f"  {k.ljust(width)}{note}".rstrip() if len(k) < width else f"  {k}  {note}".rstrip() for k, note in rows]
    if hooks_at:
        from musictx.decoding.hooks.registry import options_help

        blocks = [g.split("@")[1].rsplit(".hooks", 1)[0] for g in hooks_at if "@" in g]
        where = f"BLOCK.hooks.NAME.FIELD=DEFAULT, BLOCK one of {', '.join(blocks)}" if blocks else \
            "hooks.NAME.FIELD=DEFAULT"
        lines += ["", f"logits hooks, in the order they run, each with its options ({where}; "
                  "a strength of 0 turns a hook off; the old flat names, phrase_echo=..., are refused with their "
                  "new one):", *options_help()]
    nested = next((k.name for k in keys if "." in k.name), None)
    lines += ["", (f"Nested keys take dots ({nested}=...). " if nested else "")
              + f"{prog} --cfg job prints the whole config a run would use; {prog} --hydra-help, Hydra's flags."]
    return "\n".join(lines)


def with_key_help(config_name: str, prog: str) -> Callable:
    """Decorate a console entry point: ``--help`` / ``-h`` print `key_help` and return before Hydra starts."""

    def wrap(main: Callable) -> Callable:
        @functools.wraps(main)
        def checked(*args, **kwargs):
            if any(arg in HELP_FLAGS for arg in sys.argv[1:]):
                print(key_help(config_name, prog))
                return None
            return main(*args, **kwargs)

        return checked

    return wrap
