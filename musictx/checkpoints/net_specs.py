"""Nets from and to plain data: a net's registry name and constructor arguments (`net_spec`), and a fresh net
from them (`build_net`), built only from the project's own registry of model classes (`musictx.models.MODELS`)
with plain JSON scalars that the class's constructor takes. `musictx.checkpoints.model_store` stores and reads
them."""

from __future__ import annotations

import inspect
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
    """A fresh net from `net_spec`'s output: only registered classes, only plain scalar arguments that
    the class's constructor takes."""
    if not isinstance(spec, dict) or not isinstance(spec.get("config"), dict):
        raise ModelLoadError("model spec must be a dict with a 'config' dict")
    cls = MODELS[_registry_name(spec)]
    params = inspect.signature(cls.__init__).parameters
    for key, value in spec["config"].items():
        if key not in params or key == "self":
            raise ModelLoadError(f"{cls.__name__} has no argument {key!r}")
        if not (value is None or type(value) in (bool, int, float, str)):
            raise ModelLoadError(f"{cls.__name__} argument {key}={value!r}: only plain numbers, strings, "
                                 "booleans and null are accepted")
    try:
        return cls(**spec["config"])
    except (TypeError, ValueError) as err:  # e.g. n_heads that does not divide d_model
        raise ModelLoadError(f"{cls.__name__} cannot be built from its stored arguments ({err})") from None
