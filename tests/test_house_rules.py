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


def test_evaluation_and_the_app_use_generation_through_its_public_faces():
    """evaluation/ and app/ import the engine, the tasks and the run only as ``from musictx.decoding import
    NAME`` (and tasks, generation): each package's ``__init__`` is its face, and no exported name hides behind
    a submodule of the same name (the submodule would win the lookup)."""
    import ast
    import importlib
    import pkgutil

    faces = ("decoding", "tasks", "generation")
    inner = []
    for folder in ("evaluation", "app"):
        for path in sorted((PACKAGE / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.count(".") >= 2 \
                        and node.module.split(".")[1] in faces:
                    inner.append(f"{path.name}: from {node.module}")
    assert inner == []
    for face in faces:
        package = importlib.import_module(f"musictx.{face}")
        submodules = {m.name for m in pkgutil.iter_modules(package.__path__)}
        assert not set(package.__all__) & submodules, face
        for name in package.__all__:
            assert getattr(package, name) is not None
        # the TYPE_CHECKING imports, where a reader looks each name up, say what the runtime map says
        checked = {a.name: node.module.removeprefix(f"musictx.{face}.")
                   for node in ast.walk(ast.parse((PACKAGE / face / "__init__.py").read_text()))
                   if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"musictx.{face}.")
                   for a in node.names}
        assert checked == package._PUBLIC, face


def test_the_installed_package_holds_no_benchmark_or_fit():
    """What pyproject installs (its packages.find include) holds the library, not the benches, fits and
    studies, which live in bench/ at the top of the repository."""
    import tomllib
    from setuptools import find_packages

    root = PACKAGE.parent
    include = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    installed = find_packages(str(root), include=include)
    assert "musictx" in installed and "data_prep" in installed
    assert not [p for p in installed if "bench" in p.split(".")], installed
    files = [p for package in installed for p in (root / package.replace(".", "/")).glob("*.py")]
    assert not [p for p in files if p.stem in ("bench", "copy_fit") or p.stem.startswith("bench_")], files
    assert (root / "bench" / "copy_fit.py").is_file() and (root / "bench" / "prep.py").is_file()
