"""ruff (lint and format) is clean on the package, the tests and the benchmarks; mypy passes on the package
with the configuration in pyproject.toml, whose list of modules excused from type errors holds only modules
that still have some."""

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
# the [[tool.mypy.overrides]] block with `ignore_errors = true`, as pyproject.toml writes it
EXCUSED = re.compile(
    r"\[\[tool\.mypy\.overrides\]\]\n(?:#.*\n)*module = \[\n([^\]]*)\]\nignore_errors = true\n"
)


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed (pip install accelbench[dev])")
@pytest.mark.parametrize("args", [["check"], ["format", "--check"]])
def test_ruff_is_clean(args):
    run = subprocess.run(
        [RUFF, *args, "accelbench", "tests", "bench"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-1000:]


def mypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([MYPY, *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


@needs_mypy
@pytest.mark.slow  # about a minute of CPU with a cold cache
def test_mypy_is_clean():
    run = mypy()
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-1000:]


@needs_mypy
@pytest.mark.slow
def test_mypy_excuses_only_modules_that_still_have_errors(tmp_path):
    text = (ROOT / "pyproject.toml").read_text()
    block = EXCUSED.search(text)
    assert block, "pyproject.toml: the [[tool.mypy.overrides]] block with ignore_errors = true is not found"
    excused = set(re.findall(r'"([\w.]+)"', block[1]))
    config = tmp_path / "pyproject.toml"
    config.write_text(text.replace(block[0], ""))
    run = mypy("--config-file", str(config))
    failing = set()
    for path in re.findall(r"^(accelbench/\S+)\.py:\d+: error:", run.stdout, re.M):
        failing.add(path.replace("/", ".").removesuffix(".__init__"))
    assert run.returncode == (1 if failing else 0), run.stdout[-2000:] + run.stderr[-1000:]
    assert not excused - failing, (
        f"no type errors left in {sorted(excused - failing)}: take them off the list"
    )
    assert not failing - excused, f"type errors in {sorted(failing - excused)}"  # as test_mypy_is_clean says
