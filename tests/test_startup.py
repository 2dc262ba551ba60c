"""``musictx-generate --help`` and the option checks load no torch and no matplotlib (`musictx.lazy`):
run in a fresh interpreter, as a user's shell runs them, and what they imported is read back."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
sys.argv = ["musictx-generate", *json.loads(sys.argv[1])]
from musictx.commands.generate import main
code = None
try:
    main()
except SystemExit as stop:
    code = stop.code
print(json.dumps({"torch": "torch" in sys.modules, "matplotlib": "matplotlib" in sys.modules,
                  "modules": len(sys.modules), "code": str(code)}), file=sys.stderr)
"""


def imported_by(*argv: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(argv))], capture_output=True, text=True,
                          timeout=120)
    *said, last = done.stderr.strip().splitlines()
    return json.loads(last), done.stdout + "\n".join(said)


def test_help_imports_no_torch_and_no_matplotlib():
    seen, out = imported_by("--help")
    assert "length_seconds" in out and "hooks.bass_lean.strength" in out  # the help itself, hooks included
    assert not seen["torch"] and not seen["matplotlib"], seen


def test_a_bad_option_is_refused_before_torch_loads(tmp_path):
    seen, out = imported_by("top_p=2", f"output_dir={tmp_path / 'out'}")
    assert "error: top_p must be in (0, 1]" in out and seen["code"] == "1", (seen, out)
    assert not seen["torch"] and not seen["matplotlib"], (seen, out)
    seen, out = imported_by("task=infil", f"output_dir={tmp_path / 'out'}")
    assert "task=infil: use one of continue, infill, accompany" in out and not seen["torch"], (seen, out)
    assert not (tmp_path / "out").exists()
