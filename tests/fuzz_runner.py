"""Runs many command lines in one Python process, each as its console script runs it (``module.main()`` with
``sys.argv`` set), and prints one JSON line per run: its exit status and what it wrote on stdout and stderr.
The fuzz test (tests/test_fuzz_commands.py) starts it once per command, so that the imports and the model
loads are paid once, not once per hostile file.

    python tests/fuzz_runner.py cases.json     # [{"module": "musictx.commands.generate", "prog": ..., "argv": [...]}]

A case with ``"as_main": true`` runs the module as ``python -m`` does, its ``if __name__ == "__main__"`` block.

An exception that escapes ``main()`` is reported as status "uncaught" with its traceback: a traceback the user
would have seen.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import runpy
import sys
import traceback


def run_one(module: str, prog: str, argv: list[str], as_main: bool = False) -> dict:
    """``as_main``: run the module as ``python -m`` does (its ``__main__`` block; an old entry point has no main)."""
    out, err = io.StringIO(), io.StringIO()
    sys.argv = [prog, *argv]
    status: int | str = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if as_main:  # imported by an earlier case: runpy would warn of it, as a fresh `python -m` does not
                sys.modules.pop(module, None)
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                importlib.import_module(module).main()
        except SystemExit as stop:
            code = stop.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            if isinstance(code, str):
                print(code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - what a user would have seen as a traceback
            status = "uncaught"
            err.write(traceback.format_exc())
    return {"argv": argv, "status": status, "stdout": out.getvalue(), "stderr": err.getvalue()}


def main() -> None:
    cases = json.loads(open(sys.argv[1]).read())
    real_stdout = sys.stdout
    for case in cases:
        result = run_one(case["module"], case["prog"], case["argv"], case.get("as_main", False))
        real_stdout.write(json.dumps(result) + "\n")
        real_stdout.flush()


if __name__ == "__main__":
    main()
