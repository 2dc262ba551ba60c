"""musictx: symbolic music generation with relative-attention Transformers.

    from musictx import load_pretrained
    net, tokenizer = load_pretrained("piano")     # the shipped piano Music Transformer
"""

import os as _os
import sys as _sys

__version__ = "0.1.0"


def _ctrl_c_while_starting() -> None:
    """A command run from the shell (``musictx-*``, ``python -m musictx....``) spends its first seconds
    importing torch and the rest, before its guard (`musictx.console.guard`) is in place: a Ctrl-C there is
    one line too, not an import traceback. Only for those runs: a script or notebook importing musictx keeps
    Python's own hook."""
    program = _os.path.basename(_sys.argv[0]) if _sys.argv else ""
    if not (program.startswith("musictx-") or program == "-m") or _os.environ.get("MUSICTX_DEBUG"):
        return
    previous = _sys.excepthook
    full = getattr(_sys, "orig_argv", [])
    if program == "-m":  # python -m musictx.commands.harmonizer
        program = "python -m " + (full[full.index("-m") + 1] if "-m" in full[:-1] else "musictx")

    def hook(kind, value, tb):
        if issubclass(kind, KeyboardInterrupt):
            print(f"{program}: interrupted (Ctrl-C) while starting; nothing was written", file=_sys.stderr)
            return
        previous(kind, value, tb)

    _sys.excepthook = hook


_ctrl_c_while_starting()


_LOADERS = ("load_model", "load_pretrained")
# Listed, so that dir(musictx), a notebook's completion and `from musictx import *` see the loaders, which the
# module __getattr__ below imports only when first asked for.
__all__ = ["__version__", *_LOADERS]


def __getattr__(name: str):
    # Lazy, so that `import musictx` (and the tokenizer, which needs no torch) stays light.
    if name in _LOADERS:
        from musictx.checkpoints import model_store

        return getattr(model_store, name)
    raise AttributeError(f"module 'musictx' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LOADERS})
