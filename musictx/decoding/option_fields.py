"""The checks every options object of the sampler shares, and `option`: one field of a hook's options.

A hook declares its options in its own file as a small dataclass whose fields are made by `option`: the
default, one line of help, and the field's bounds. `check_fields` then checks any such object (whole numbers
where the annotation says int, finite numbers where it says float, the bounds and the choices) and names the
field as the user writes it (``hooks.phrase_echo.strength``); `fields_from_mapping` reads one from a dict and
names the nearest field for a typo.
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from dataclasses import field, fields

import numpy as np

from musictx.decoding.errors import GenerateError

# The largest random seed: what numpy's and Lightning's seeding take (an unsigned 32-bit number). torch takes
# 64 bits, but a seed past them failed deep in the sampler, after the model loaded; the songs of an evaluation
# and the parts of an accompaniment use seed + i, which stays far inside torch's range from here.
MAX_SEED = 2**32 - 1
MAX_BEST_OF = 16  # candidates a sample may be chosen from (`best_of`)


def option(default, help: str, *, low: float | None = None, high: float | None = None, above: float | None = None,
           choices: tuple[str, ...] | None = None, off: str | None = None):
    """A dataclass field of a hook's options: its ``default``, one line of ``help``, ``low`` <= value <=
    ``high`` and value > ``above`` where given, one of ``choices`` for a string; ``off``: the value that
    switches the hook off, as the help and the error messages say it ("0")."""
    meta = {"help": help, "low": low, "high": high, "above": above, "choices": choices, "off": off}
    return field(default=default, metadata=meta)


def strength_option(default: float, help: str):
    """A hook's strength: an `option` that is at least 0, where 0 turns the hook off."""
    return option(default, help, low=0, off="0")


def yaml_text(value) -> str:
    """A default as a YAML file and ``--help`` write it: null, true / false, else the value itself."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def raise_first(bad: list[tuple[bool, str]]) -> None:
    """Raise GenerateError with the message of the first (condition, message) pair whose condition holds."""
    for is_bad, message in bad:
        if is_bad:
            raise GenerateError(message)


def check_seed(name: str, value) -> int:
    """``value`` as a random seed (a whole number in [0, `MAX_SEED`]); GenerateError naming ``name`` else."""
    value = whole_number(name, value, nullable=False)
    if not 0 <= value <= MAX_SEED:
        raise GenerateError(f"{name} must be a whole number in [0, {MAX_SEED}], got {value}")
    return value


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


def field_type(hint) -> tuple[type, bool]:
    """(the base type, whether None is allowed) of a field's type ``hint`` (``float | None`` -> float, True)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(hint))
    return hint, False


def check_fields(opts, prefix: str) -> None:
    """Check each field of the options dataclass ``opts`` against its annotation and its `option` bounds;
    a whole-valued float where an int is meant becomes an int. GenerateError names ``prefix.field``."""
    hints = typing.get_type_hints(type(opts))  # the annotations are strings (postponed evaluation)
    for f in fields(opts):
        name, value = f"{prefix}.{f.name}", getattr(opts, f.name)
        kind, nullable = field_type(hints[f.name])
        if value is None:
            if not nullable:
                raise GenerateError(f"{name} must not be null")
            continue
        if kind is bool:
            if not isinstance(value, (bool, np.bool_)):
                raise GenerateError(f"{name} must be true or false, got {value!r}")
            continue
        if kind is int:
            value = whole_number(name, value, nullable)
            setattr(opts, f.name, value)
        elif kind is float:
            finite_number(name, value, nullable)
        _check_bounds(name, value, f.metadata)


def _check_bounds(name: str, value, meta) -> None:
    off = f" ({meta['off']} = off)" if meta.get("off") else ""
    choices, low, high = meta.get("choices"), meta.get("low"), meta.get("high")
    if choices is not None and value not in choices:
        raise GenerateError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    if low is not None and high is not None and not low <= value <= high:
        raise GenerateError(f"{name} must be in [{low:g}, {high:g}]{off}, got {value}")
    if low is not None and value < low:
        raise GenerateError(f"{name} must be >= {low:g}{off}, got {value}")
    if high is not None and value > high:
        raise GenerateError(f"{name} must be <= {high:g}, got {value}")
    if meta.get("above") is not None and not value > meta["above"]:
        raise GenerateError(f"{name} must be > {meta['above']:g} or null, got {value}")


def unknown_name(name: str, known, where: str) -> GenerateError:
    """The error for an option ``name`` that ``where`` does not have, naming the nearest of ``known``."""
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"it has {', '.join(known)}"
    return GenerateError(f"unknown option '{name}' in {where}; {hint}")


def fields_from_mapping(cls, values, prefix: str):
    """An instance of the options dataclass ``cls`` with the fields ``values`` (a dict) names, the others at
    their defaults; an unknown key raises GenerateError naming ``prefix`` and the nearest field."""
    known = [f.name for f in fields(cls)]
    for name in values:
        if name not in known:
            raise unknown_name(str(name), known, prefix)
    return cls(**dict(values))


def help_of(cls) -> list[tuple[str, object, str]]:
    """(field, default, help) of each field of the options dataclass ``cls``."""
    return [(f.name, f.default, f.metadata.get("help", "")) for f in fields(cls)]
