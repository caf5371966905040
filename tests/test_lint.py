"""ruff (lint and format) is clean on the package, the tests and the benchmarks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed (pip install accelbench[dev])")
@pytest.mark.parametrize("args", [["check"], ["format", "--check"]])
def test_ruff_is_clean(args):
    run = subprocess.run(
        [RUFF, *args, "accelbench", "tests", "bench"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-1000:]
