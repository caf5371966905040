"""`accelbench loadtest --repeats N` against the real local tritonserver serving builtin:identity: N complete
result documents (repeat 1 under its usual name, the others ``__rN``), and a rerun with more repeats keeps
the finished ones untouched and measures only the new one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ACCELBENCH = str(Path(sys.executable).parent / "accelbench")
MODEL = "identity__cpu-local__fp32"
RUN_ID = f"{MODEL}__closed-http-b1"


def loadtest(repo: Path, out: Path, repeats: int) -> subprocess.CompletedProcess:
    cmd = [ACCELBENCH, "loadtest", str(repo), "--model", MODEL, "--concurrency", "2", "--duration", "1",
           "--max-duration", "3", "--warmup", "0.5", "--repeats", str(repeats), "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_repeats_write_one_document_each_and_resume_per_repeat(identity_repo, tmp_path):
    proc = loadtest(identity_repo, tmp_path, 2)
    assert "run 2 of 2" in proc.stdout
    names = sorted(p.name for p in tmp_path.glob("*.json"))
    assert names == [f"{RUN_ID}.json", f"{RUN_ID}__r2.json"]
    first, second = (json.loads((tmp_path / n).read_text()) for n in names)
    assert first["run_id"] == RUN_ID and "repeat" not in first["load_profile"]
    assert second["run_id"] == f"{RUN_ID}__r2" and second["load_profile"]["repeat"] == 2
    for doc in (first, second):
        assert doc["complete"] and len(doc["steps"]) == 1 and doc["steps"][0]["requests"] > 0
    assert first["steps"][0]["started_at"] != second["steps"][0]["started_at"]  # two runs, not one copied

    def steps() -> dict[str, list]:
        return {n: json.loads((tmp_path / n).read_text())["steps"] for n in names}

    before = steps()
    loadtest(identity_repo, tmp_path, 3)
    assert steps() == before  # finished repeats are kept, not measured again
    third = json.loads((tmp_path / f"{RUN_ID}__r3.json").read_text())
    assert third["complete"] and third["load_profile"]["repeat"] == 3
