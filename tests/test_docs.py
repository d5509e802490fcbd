"""The README documents every setting, variant and command, and its quick start is two commands."""
import re
from pathlib import Path

import pytest

from tmem.cli import COMMANDS
from tmem.config import VARIANTS, field_help

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(field_help()))
def test_every_setting_is_documented(name):
    assert f"`{name}`" in README


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_variant_is_documented(name):
    assert f"`{name}`" in README


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_is_documented(name):
    assert re.search(rf"^\| `{name}[ `]", README, re.MULTILINE)


def test_quick_start_is_two_commands_that_exist():
    block = README.split("## Quick start", 1)[1].split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines() if line.strip()]
    assert commands == ["make run", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^run:", makefile, re.MULTILINE) and re.search(r"^test:", makefile, re.MULTILINE)
    assert "make test" in (ROOT / ".ci" / "run").read_text()
