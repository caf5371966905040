"""ruff (lint and format) is clean on the package, the tests and the benchmarks; mypy passes on the whole
package with the configuration in pyproject.toml, which excuses no module from type errors, and every
``type: ignore`` names its error code and says why."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = str(Path(sys.executable).parent)
RUFF = shutil.which("ruff", path=BIN) or shutil.which("ruff")
MYPY = shutil.which("mypy", path=BIN) or shutil.which("mypy")
needs_mypy = pytest.mark.skipif(MYPY is None, reason="mypy is not installed (pip install accelbench[dev])")
# a `type: ignore` with its error code and a reason after it: `# type: ignore[code]  # why`
REASONED_IGNORE = re.compile(r"# type: ignore\[[\w,-]+\]  # \S")


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed (pip install accelbench[dev])")
@pytest.mark.parametrize("args", [["check"], ["format", "--check"]])
def test_ruff_is_clean(args):
    run = subprocess.run(
        [RUFF, *args, "accelbench", "tests", "bench", "typings"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-1000:]


def mypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([MYPY, *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


@needs_mypy
@pytest.mark.slow  # about a minute of CPU with a cold cache
def test_mypy_is_clean():
    run = mypy()
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-1000:]


def test_no_module_is_excused_from_type_errors():
    """The excused list that let the type checker in module by module is empty now: keep it so."""
    text = (ROOT / "pyproject.toml").read_text()
    mypy_config = text[text.index("[tool.mypy]") :]
    assert "ignore_errors" not in mypy_config, "pyproject.toml: a module is excused from type errors again"


def test_every_type_ignore_names_its_code_and_reason():
    bare = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "accelbench").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "type: ignore" in line and not REASONED_IGNORE.search(line)
    ]
    assert not bare, f"type: ignore without [code]  # reason: {bare}"


def test_the_load_generator_is_typed_strictly():
    """Every loadtests/ module is under the strict flags (issue 38): the strict override names the package."""
    text = (ROOT / "pyproject.toml").read_text()
    strict = text[text.index("# Strict:") :]
    modules = strict[: strict.index("]")]
    assert '"accelbench.loadtests", "accelbench.loadtests.*"' in modules


def test_the_formatter_is_off_only_where_a_reason_is_given():
    """`ruff format` lays out the package; `# fmt: skip` (issue 38: 562 markers at 347c0b6, the formatter off once
    every 70 lines) stays only where an aligned table reads better, with the reason after it
    (`# fmt: skip  # why`), and fewer than 50 in all."""
    marked = [
        (f"{path.relative_to(ROOT)}:{number}", line)
        for path in sorted((ROOT / "accelbench").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "fmt: skip" in line or "fmt: off" in line
    ]
    assert len(marked) < 50, f"{len(marked)} formatter exemptions in accelbench/"
    unexplained = [where for where, line in marked if not re.search(r"# fmt: (skip|off)  # \S", line)]
    assert not unexplained, f"# fmt: skip without a reason (# fmt: skip  # why): {unexplained}"
