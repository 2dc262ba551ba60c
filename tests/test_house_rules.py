"""The layout's two rules about commands, checked on the source: each command is a thin file, and only the
command layer (commands/ and its plumbing console/) imports Hydra or omegaconf."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "musictx"
COMMAND_LAYER = {"commands", "console"}
MAX_COMMAND_LINES = 80


def imported_roots(path: Path) -> set[str]:
    """The top-level package of each import in ``path`` (function-level imports included)."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_each_command_file_is_thin():
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in (PACKAGE / "commands").glob("*.py")}
    assert len(sizes) >= 6
    assert {name: n for name, n in sizes.items() if n > MAX_COMMAND_LINES} == {}


def test_only_the_command_layer_imports_hydra_or_omegaconf():
    users = {p.relative_to(PACKAGE).parts[0] for p in PACKAGE.rglob("*.py")
             if imported_roots(p) & {"hydra", "omegaconf"}}
    assert "commands" in users  # the check sees the imports it is about
    assert users <= COMMAND_LAYER, users - COMMAND_LAYER
