"""A user's machine has no ../shared: every test that reads it must skip there with its reason.

A static check over the test files: a name is "shared" when it is one of the data folders of
`tests/helpers.py` (or `test_metrical.POP`), or a module-level constant, helper or fixture built from one;
a test that uses a shared name (in its body or as a fixture argument) must carry a skip mark that tests
the folder (`needs_shared`, `needs_pop`, or a `skipif` whose condition names shared data), on itself,
its class or its module (`pytestmark`).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOTS = {"SHARED_DATA", "PIANO_DIR", "EDGE_DIR", "POP", "POP909", "piano_files", "held_out_pop_continuations"}
SKIPS = {"needs_shared", "needs_pop"}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _shared_names(trees: dict[str, ast.Module]) -> set[str]:
    """ROOTS, and every module-level name (constant, helper function, fixture) built from one, to a fixpoint."""
    shared, grew = set(ROOTS), True
    while grew:
        grew = False
        for tree in trees.values():
            for node in tree.body:
                if isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    new = {t.id for t in targets if isinstance(t, ast.Name)} - shared
                    if new and node.value is not None and _names(node.value) & shared:
                        shared |= new
                        grew = True
                elif isinstance(node, ast.FunctionDef) and not node.name.startswith("test_"):
                    if node.name not in shared and _names(node) & shared:
                        shared.add(node.name)
                        grew = True
    return shared - {"pytestmark"}


def _skips(decorators: list[ast.expr], shared: set[str]) -> bool:
    for mark in decorators:
        names = _names(mark)
        if names & SKIPS or ("skipif" in names and names & shared):
            return True
    return False


def _module_skips(tree: ast.Module, shared: set[str]) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            if _skips(marks, shared):
                return True
    return False


def unskipped_shared_tests() -> list[str]:
    trees = {p.name: ast.parse(p.read_text()) for p in sorted(TESTS.glob("*.py"))}
    shared = _shared_names(trees)
    bad = []
    for name, tree in trees.items():
        if not name.startswith("test_") or _module_skips(tree, shared):
            continue
        scopes = [(node, []) for node in tree.body]
        scopes += [(inner, node.decorator_list) for node in tree.body if isinstance(node, ast.ClassDef)
                   for inner in node.body]
        for node, class_marks in scopes:
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            used = ({n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                    | {a.arg for a in node.args.args}) & shared
            if used and not _skips(node.decorator_list + class_marks, shared):
                bad.append(f"{name}::{node.name} uses {sorted(used)}")
    return bad


def test_every_test_that_reads_shared_data_skips_without_it():
    assert unskipped_shared_tests() == []


def test_the_check_finds_a_test_that_reads_shared_data_without_its_skip(tmp_path, monkeypatch):
    """The check itself can fail: a test file with one marked and one unmarked reader."""
    (tmp_path / "test_probe.py").write_text(
        "from .helpers import SHARED_DATA, needs_shared\n"
        "SONG = SHARED_DATA / 'pop' / '003.mid'\n"
        "@needs_shared\ndef test_marked():\n    assert SONG.exists()\n"
        "def test_unmarked():\n    assert SONG.exists()\n"
        "def test_unrelated():\n    assert True\n")
    import tests.test_shared_skips as check

    monkeypatch.setattr(check, "TESTS", tmp_path)
    assert check.unskipped_shared_tests() == ["test_probe.py::test_unmarked uses ['SONG']"]
