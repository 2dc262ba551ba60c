"""musictx: symbolic music generation with relative-attention Transformers.

    from musictx import load_pretrained
    net, tokenizer = load_pretrained("piano")     # the shipped piano Music Transformer
"""

import os as _os
import sys as _sys

from musictx.lazy import public_dir as _public_dir
from musictx.lazy import public_face as _public_face

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


# The loaders, imported from the model store when first asked for, so that `import musictx` (and the tokenizer,
# which needs no torch) stays light; listed, so that dir(musictx), a notebook's completion and
# `from musictx import *` see them.
_LOADERS = {"load_model": "checkpoints.model_store", "load_pretrained": "checkpoints.model_store"}
__all__ = ["__version__", *_LOADERS]
__getattr__ = _public_face(__name__, _LOADERS)
__dir__ = _public_dir(globals(), _LOADERS)
