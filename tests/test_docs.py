"""The reference (docs/reference.md) documents every setting, variant and command; the README stays a front page:
a two-command quick start, one screenshot, what the explorer shows, and links to docs/ that exist."""
import re
from pathlib import Path

import pytest

from tmem.cli import COMMANDS
from tmem.config import VARIANTS, field_help

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
REFERENCE = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(field_help()))
def test_every_setting_is_documented(name):
    assert f"`{name}`" in REFERENCE


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_variant_is_documented(name):
    assert f"`{name}`" in REFERENCE


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_is_documented(name):
    assert re.search(rf"^\| `{name}[ `]", REFERENCE, re.MULTILINE)


def test_quick_start_is_two_commands_that_exist():
    block = README.split("## Quick start", 1)[1].split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines() if line.strip()]
    assert commands == ["make run", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^run:", makefile, re.MULTILINE) and re.search(r"^test:", makefile, re.MULTILINE)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_the_readme_is_a_front_page_whose_links_and_screenshot_exist():
    assert len(README.splitlines()) <= 80, "the rest belongs in docs/"
    shows = README.split("## What the explorer shows", 1)[1].split("\n## ", 1)[0].strip().splitlines()
    assert len(shows) <= 12
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README)
    assert len(images) == 1 and (ROOT / images[0]).is_file()
    for target in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / target).is_file(), target
    for target in re.findall(r"\]\(([^)#:]+\.md)", REFERENCE):
        assert (ROOT / "docs" / target).resolve().is_file(), target
