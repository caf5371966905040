"""The docs stay true: every CLI command has help text and appears in the README; the quick start is two commands."""

from __future__ import annotations

import re
from pathlib import Path

import click

from accelbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        path = prefix + (name,)
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path)
        else:
            yield path, cmd


def test_every_command_has_help_and_is_in_the_readme():
    commands = list(_commands(main))
    assert len(commands) >= 15
    for path, cmd in commands:
        assert (cmd.help or "").strip(), f"accelbench {' '.join(path)} has no help text"
        assert f"accelbench {' '.join(path)}" in README, f"accelbench {' '.join(path)} is not in README.md"


def test_quick_start_is_two_make_commands_that_exist():
    block = re.search(r"## Quick start.*?```bash\n(.*?)```", README, re.S).group(1)
    lines = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert lines == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_linked_docs_exist():
    for link in re.findall(r"\]\((docs/[^)]+)\)", README):
        assert (ROOT / link).is_file(), link
