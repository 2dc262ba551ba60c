"""The commands the README and docs/getting-started.md show are commands that run: every option they give is
one the command has, with a value it takes, and every make target, script and module they name exists.
Composed as the command composes them (Hydra's compose API, no run); a renamed or removed option fails here."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from musictx.app.cli import parse_args
from musictx.console.config_help import register_resolvers
from musictx.console.guard import compose_run_config, plain
from musictx.generation.generate_options import GenerateOptions, not_on_command_line

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "docs" / "getting-started.md"]
CONFIGS = {"musictx-generate": "generate", "musictx-train": "train", "musictx-evaluate": "evaluate",
           "musictx-prep": "prepare", "musictx-attention": "attention"}


def command_lines() -> list[tuple[str, list[str]]]:
    """(where, words) of each command in the documents' bash blocks, continuation lines joined, comments cut."""
    found = []
    for doc in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)  # no ~ after =: zsh and sh leave it, and Hydra refuses it
                while words:  # one command at a time: a && b
                    cut = words.index("&&") if "&&" in words else len(words)
                    found.append((f"{doc.name}: {' '.join(words[:cut])[:60]}", words[:cut]))
                    words = words[cut + 1:]
    return found


def _program(words: list[str]) -> tuple[str, list[str]]:
    """(the command's name, its arguments), past an environment assignment and a .venv/bin/ prefix."""
    while words and re.match(r"^[A-Z_]+=", words[0]):
        words = words[1:]
    return Path(words[0]).name, words[1:]


LINES = command_lines()


def test_the_documents_show_commands():
    programs = {_program(words)[0] for _, words in LINES}
    assert {"make", "musictx-generate", "musictx-train", "musictx-evaluate", "musictx-prep"} <= programs


@pytest.mark.parametrize("where, words", LINES, ids=[w for w, _ in LINES])
def test_each_documented_command_takes_its_options(where, words):
    program, args = _program(words)
    register_resolvers()  # as each command does before composing: ${sampling:...} and the hooks group
    if program in CONFIGS:
        args = [a for a in args if not a.startswith("-")]  # --help and Hydra's own flags
        cfg = compose_run_config(CONFIGS[program], args)  # an unknown option or group choice raises here
        if program == "musictx-generate":
            not_on_command_line(args)
            GenerateOptions.from_mapping(plain(cfg)).check_sampling()  # the values, as the command checks them
    elif program == "musictx-app":
        parse_args(args)
    elif program == "make":
        targets = re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.M)
        assert set(args) <= set(targets), (where, set(args) - set(targets))
    elif program in ("python", "python3") and args[:1] == ["-m"] and args[1] != "venv":
        assert (ROOT / Path(*args[1].split("."))).with_suffix(".py").is_file() or (
            ROOT / Path(*args[1].split(".")) / "__main__.py").is_file(), where
    elif program in ("python", "python3") and args[0].endswith(".py"):
        assert (ROOT / args[0]).is_file(), where
