"""Run a musictx console command in this process, and SIGKILL the process at a chosen rename (a test hook).

    KILL_AT=<when>:<glob>:<n> python tests/kill_hook.py train <overrides...>

Every file musictx writes whole is written under a temporary name and renamed into place with ``os.replace``
(`musictx.safe_output.atomic_path`); at the ``n``-th rename onto a file whose name matches ``glob`` the process
kills itself with SIGKILL, as ``strace -e inject=...:signal=KILL`` would, with nothing run after it (no
``finally``, no atexit):

- ``write``: the temporary is first cut to half its bytes: what a kill in the middle of the write leaves;
- ``before``: the temporary is whole, the rename not done;
- ``after``: the rename done, nothing after it.

The hook lives in the tests only: the command itself has no such switch.
"""

from __future__ import annotations

import fnmatch
import os
import signal
import sys

COMMANDS = {"train": "musictx.commands.train"}


def die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def install(spec: str) -> None:
    """Wrap ``os.replace`` so that it kills the process as ``spec`` (``when:glob:n``) says."""
    when, pattern, nth = spec.split(":")
    if when not in ("write", "before", "after"):
        raise ValueError(f"KILL_AT={spec}: when is write, before or after")
    real, seen = os.replace, [0]

    def replace(src, dst, *args, **kwargs):
        if not fnmatch.fnmatch(os.path.basename(os.fspath(dst)), pattern):
            return real(src, dst, *args, **kwargs)
        seen[0] += 1
        if seen[0] != int(nth):
            return real(src, dst, *args, **kwargs)
        if when == "write":
            os.truncate(src, os.path.getsize(src) // 2)
        if when != "after":
            die()
        real(src, dst, *args, **kwargs)
        die()

    os.replace = replace


def main() -> None:
    name, args = sys.argv[1], sys.argv[2:]
    if os.environ.get("KILL_AT"):
        install(os.environ["KILL_AT"])
    module = __import__(COMMANDS[name], fromlist=["main"])
    sys.argv = [f"musictx-{name}", *args]
    module.main()


if __name__ == "__main__":
    main()
