"""The README stays a map a newcomer reads in minutes, and no link in it or in docs/ points nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 250
LAYOUT_BEFORE = 120

# [text](target) and ![alt](target); the target up to the first space or closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def markdown_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def relative_links(path: Path) -> list[str]:
    """The links of a Markdown file that point into the repository (no URL, no mail, no bare anchor).
    Code blocks are skipped: a command there is not a link."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    targets = [m.group(1) for m in LINK.finditer(text)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I) and not t.startswith("#")]


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/ (at most {MAX_LINES})"


def test_layout_comes_early():
    lines = README.read_text(encoding="utf-8").splitlines()
    headings = [i for i, line in enumerate(lines, 1) if re.match(r"^#+\s+Layout\b", line)]
    assert headings, "README.md has no Layout heading"
    assert headings[0] < LAYOUT_BEFORE, f"Layout starts at line {headings[0]}, not before {LAYOUT_BEFORE}"


def test_the_readme_states_the_configuration_rule():
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "Hydra YAML for what a user overrides, a typed dataclass for what the library needs" in text


def model_not_installed(target: Path) -> bool:
    """A link into a shipped model's folder that this checkout does not have (a model still being
    trained, like the pop tests' skip): its card arrives with its weights."""
    pretrained = (ROOT / "musictx" / "pretrained").resolve()
    try:
        name = target.resolve().relative_to(pretrained).parts[0]
    except (ValueError, IndexError):
        return False
    return not (pretrained / name).is_dir()


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_a_file(path):
    missing = []
    for target in relative_links(path):
        file_part = target.split("#", 1)[0]
        if file_part and not (path.parent / file_part).exists() and not model_not_installed(path.parent / file_part):
            missing.append(target)
    assert not missing, f"{path.relative_to(ROOT)} links to missing files: {missing}"


def test_the_link_reader_finds_links_and_skips_urls_and_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[a](a.md) ![b](img/b.png) [c](https://x.org/c.md) [d](#d) [e](e.md#part)\n"
                    "```\n[f](f.md)\n```\n", encoding="utf-8")
    assert relative_links(page) == ["a.md", "img/b.png", "e.md#part"]
