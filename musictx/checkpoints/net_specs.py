"""Nets from and to plain data: a net's registry name and constructor arguments (`net_spec`), and a fresh net
from them (`build_net`), built only from the project's own registry of model classes (`musictx.models.MODELS`)
with plain JSON scalars that the class's constructor takes. `musictx.checkpoints.model_store` stores and reads
them."""

from __future__ import annotations

import inspect
import numbers
from dataclasses import asdict, is_dataclass

from torch import nn

from musictx.models import MODELS
from musictx.user_error import UserError


class ModelLoadError(UserError):
    """A model reference that does not name a usable model (the message names it and why)."""


def net_spec(net: nn.Module) -> dict:
    """{"name": the net's registry name, "target": its class path (informative), "config": its
    constructor kwargs}."""
    config = net.get_config() if hasattr(net, "get_config") else net.config
    config = asdict(config) if is_dataclass(config) else dict(config)
    return {"name": getattr(net, "name", None), "target": f"{type(net).__module__}.{type(net).__qualname__}",
            "config": config}


def _registry_name(spec: dict) -> str:
    """The registry name of a spec; old checkpoints name only the class path, which must be ours."""
    name = spec.get("name")
    if name in MODELS:
        return name
    by_path = {f"{cls.__module__}.{cls.__qualname__}": key for key, cls in MODELS.items()}
    if spec.get("target") in by_path and name in (None, ""):
        return by_path[spec["target"]]
    raise ModelLoadError(f"model {name or spec.get('target')!r} is not one of musictx's models {sorted(MODELS)}")


def build_net(spec: dict) -> nn.Module:
    """A fresh net from `net_spec`'s output: only registered classes, only arguments that the class's constructor
    takes, of the kinds it annotates (`argument_problem`: plain scalars only)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("config"), dict):
        raise ModelLoadError("model spec must be a dict with a 'config' dict")
    cls = MODELS[_registry_name(spec)]
    problem = argument_problem(cls, spec["config"])
    if problem:
        raise ModelLoadError(f"stored argument {problem[0]} {problem[1]}")
    try:
        return cls(**spec["config"])
    except BUILD_ERRORS as err:  # e.g. n_heads that does not divide d_model
        raise ModelLoadError(f"{cls.__name__} cannot be built from its stored arguments ({err})") from None


# ----- the check of a net's constructor arguments: a stored spec's (`build_net`) and a training config's
# (`musictx.training.options.net_from_options`), each naming the argument its own way ---------------------------
# What a net's constructor raises for arguments of the right kinds that do not go together (n_heads that does not
# divide d_model; torch's RuntimeError for a size it cannot allocate)
BUILD_ERRORS = (TypeError, ValueError, RuntimeError)
KIND_WORDS = {"int": "a whole number", "float": "a number", "bool": "true or false", "str": "a string", "None": "null"}


def is_whole(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _kinds(annotation) -> set[str]:
    """'int | None' -> {'int', 'None'}: the nets annotate their arguments as strings (postponed annotations)."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return {part.strip() for part in text.split("|")}


def _fits(value, kinds: set[str]) -> bool:
    return ((value is None and "None" in kinds) or (is_whole(value) and "int" in kinds)
            or (is_number(value) and "float" in kinds) or (isinstance(value, bool) and "bool" in kinds)
            or (isinstance(value, str) and "str" in kinds))


def argument_problem(cls: type, config: dict) -> tuple[str, str] | None:
    """The first argument of ``config`` that ``cls``'s constructor cannot take as it is: (its name, what is wrong,
    said after the name), else None. Each must be of a kind its annotation names, so only plain scalars pass (a
    stored spec must not hand a constructor an object); every whole-number argument of the nets is a size or a
    count, so it must be at least 1 (a MusicTransformer of 0 layers trained as an embedding and a head)."""
    params = inspect.signature(cls.__init__).parameters
    for key, value in config.items():
        if key not in params or key == "self":
            return key, f"is not an argument of {cls.__name__}"
        kinds = _kinds(params[key].annotation)
        if not _fits(value, kinds):
            return key, f"must be {' or '.join(KIND_WORDS.get(k, k) for k in sorted(kinds))}, got {value!r}"
        if "int" in kinds and is_whole(value) and value < 1:
            return key, f"must be a whole number >= 1, got {value!r}"
    return None
