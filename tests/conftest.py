"""Fixtures shared by several test files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ACCELBENCH = str(Path(sys.executable).parent / "accelbench")
IDENTITY_MODEL = "identity__cpu-local__fp32"


@pytest.fixture(scope="session")
def identity_repo(tmp_path_factory) -> Path:
    """A local-flavour Triton repository with builtin:identity (FP32, cpu-local), made through the real CLI."""
    from accelbench.serving.repository import write_repository

    variants = tmp_path_factory.mktemp("variants")
    cmd = [ACCELBENCH, "quantize", "builtin:identity", "--target", "cpu-local", "--precision", "fp32",
           "--out", str(variants)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True)
    repo = tmp_path_factory.mktemp("repo")
    write_repository([variants / IDENTITY_MODEL], repo, "local")
    return repo


from service_fixtures import db_url, live_server, postgres_url  # noqa: E402,F401
