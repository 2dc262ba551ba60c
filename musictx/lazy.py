"""Imported on first use: ``torch`` for the modules that ``--help`` and option checking read, and the names
a package's public face exports (`public_face`).

``musictx-generate --help`` and the options' checks need the hooks' option classes and the tasks, not a
network: importing torch for them cost more than a second of CPU before anything was said. A module on that
path writes ``from musictx.lazy import torch`` and uses ``torch.zeros`` and the rest as usual (its
annotations name ``Tensor`` under ``TYPE_CHECKING``); the real torch is imported the first time an attribute
is read, and only then. Nothing is put in ``sys.modules`` before that, so a command that never samples never
loads torch.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule:
    """A stand-in for the module ``name``: the first attribute read imports it; each attribute read once is
    kept on the stand-in, so the hooks' steps after that read ``torch.zeros`` as a plain attribute (no
    ``__getattr__`` call on the sampler's hot path)."""

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str):
        module = self.__dict__["_module"]
        if module is None:
            module = self.__dict__["_module"] = importlib.import_module(self.__dict__["_name"])
        value = self.__dict__[attr] = getattr(module, attr)
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r} ({'imported' if self._module is not None else 'not imported yet'})>"


torch = LazyModule("torch")


def public_face(package: str, public: dict[str, str]):
    """A package's module ``__getattr__``: ``package.NAME`` imported from its module (``public[NAME]``, under
    ``package``) when first asked for, so that importing the package's light modules loads nothing heavy."""

    def __getattr__(name: str):
        if name not in public:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{public[name]}"), name)

    return __getattr__


def public_dir(namespace: dict, public):
    """A package's module ``__dir__``: its own names and those its public face imports on first use, which a
    module ``__getattr__`` alone hides from ``dir()`` and from a notebook's completion."""

    def __dir__() -> list[str]:
        return sorted({*namespace, *public})

    return __dir__
