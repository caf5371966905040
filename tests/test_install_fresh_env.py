"""``pip install -e .`` into a fresh venv that already has numpy >= 2.4 and pandas >= 3 (an inference team's
environment) downgrades nothing; then ``accelbench --help`` runs, the embedded server installs without its
numpy<2 pin, and a tiny model is quantized, written and served there. Needs the package registry (CI has it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as thttp
from packaging.version import Version

from accelbench.serving.server import free_port

ROOT = Path(__file__).resolve().parents[1]
MODEL = "identity__cpu-local__fp32"


def run(*cmd: str | Path, timeout: float = 900, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{cmd}: {done.stderr[-3000:]}"
    return done


def packages(python: Path) -> dict[str, Version]:
    listed = json.loads(
        run(python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check").stdout
    )
    return {p["name"].lower(): Version(p["version"]) for p in listed}


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_pip_install_into_a_numpy_2_pandas_3_environment_downgrades_nothing_and_serves(tmp_path):
    venv = tmp_path / "venv"
    run(getattr(sys, "_base_executable", sys.executable), "-m", "venv", venv)
    python, bindir = venv / "bin" / "python", venv / "bin"
    # --no-compile: pip resolves and installs exactly as without it, only the bytecode of the ~9,000 modules
    # installed (scipy, sympy, pandas, pyarrow...) is not written ahead; what this test guards is what pip picks
    # and that the installed commands run, and an import writes the bytecode it needs
    run(python, "-m", "pip", "install", "--quiet", "--no-compile", "numpy>=2.4", "pandas>=3")
    before = packages(python)
    assert before["numpy"] >= Version("2.4") and before["pandas"] >= Version("3")

    run(python, "-m", "pip", "install", "--quiet", "--no-compile", "-e", ROOT)  # what a user runs
    after = packages(python)
    downgraded = {n: f"{v} -> {after.get(n)}" for n, v in before.items() if n not in after or after[n] < v}
    assert not downgraded, downgraded
    assert after["numpy"] == before["numpy"] and after["pandas"] == before["pandas"]
    assert after["pyarrow"] >= Version("15")
    assert "Usage:" in run(bindir / "accelbench", "--help").stdout

    # the embedded server, without nvidia-pytriton's numpy<2 pin
    run(python, "-m", "accelbench.serving.install", "--no-stub-env")
    assert packages(python)["numpy"] == before["numpy"]
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True)
    complaints = [line for line in check.stdout.splitlines() if line.strip()]
    # only the server wheel's own client requirements are unmet, which accelbench never imports
    assert all(line.startswith("nvidia-pytriton ") for line in complaints), check.stdout

    env = dict(os.environ, ACCELBENCH_CACHE_DIR=str(tmp_path / "cache"))  # no stub environment: DLPack only
    cli = bindir / "accelbench"
    run(cli, "quantize", "builtin:identity", "--target", "cpu-local", "--precision", "fp32",
        "--out", tmp_path / "v", env=env)  # fmt: skip
    run(cli, "repository", tmp_path / "v" / MODEL, "--out", tmp_path / "repo", env=env)
    port = free_port()
    serve = subprocess.Popen(
        [str(cli), "serve", str(tmp_path / "repo"), "--http-port", str(port), "--grpc-port", str(free_port()),
         "--metrics-port", str(free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        line = serve.stdout.readline()
        while line and not line.startswith("READY"):
            line = serve.stdout.readline()
        assert MODEL in line, serve.stderr.read()[-2000:]
        with np.load(tmp_path / "v" / MODEL / "reference" / "inputs.npz") as data:
            [(name, x)] = [(k, np.ascontiguousarray(data[k][:2])) for k in data.files]
        request = thttp.InferInput(name, list(x.shape), "FP32")
        request.set_data_from_numpy(x)
        client = thttp.InferenceServerClient(f"127.0.0.1:{port}")
        result = client.infer(MODEL, [request])
        client.close()
        [output] = [o["name"] for o in result.get_response()["outputs"]]
        np.testing.assert_array_equal(result.as_numpy(output), x)
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        serve.wait(timeout=60)
