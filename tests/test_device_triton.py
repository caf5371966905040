"""The served-GPU device run's pieces that run here: the nvidia-pytriton repack (on the installed wheel's real
files, then served from), the NVML energy attachment and summary, and the whole script rehearsed on this CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "device"))

import nvml_energy  # noqa: E402
import repack_pytriton  # noqa: E402
import triton_summary  # noqa: E402


def installed_pytriton() -> tuple[Path, metadata.Distribution]:
    try:
        dist = metadata.distribution("nvidia-pytriton")
    except metadata.PackageNotFoundError:
        pytest.skip("nvidia-pytriton is not installed")
    return Path(dist.locate_file("")), dist


def test_needed_reads_the_dynamic_section_like_readelf():
    site, _ = installed_pytriton()
    lib = site / "pytriton" / "tritonserver" / "backends" / "python" / "libtriton_python.so"
    names = repack_pytriton.needed(lib.read_bytes())
    assert "libc.so.6" in names and any(n.startswith("libtritonserver-") for n in names)
    if shutil.which("readelf"):
        out = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
        want = [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
        assert names == want
    with pytest.raises(ValueError, match="not a 64-bit"):
        repack_pytriton.needed(b"#!/bin/sh\n")


def wheel_from_install(out: Path) -> Path:
    """The installed nvidia-pytriton as a wheel again (its RECORD lists every file it installed)."""
    site, dist = installed_pytriton()
    path = out / f"nvidia_pytriton-{dist.version}-py3-none-manylinux_2_35_x86_64.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as wheel:
        for file in dist.files:
            source = Path(dist.locate_file(file))
            if source.is_file() and "__pycache__" not in file.parts and not str(file).startswith(".."):
                info = zipfile.ZipInfo(str(file))
                info.external_attr = source.stat().st_mode << 16  # pip wants S_IFREG with the x bits
                wheel.writestr(info, source.read_bytes())
    return path


@pytest.mark.slow
def test_repacked_wheel_installs_and_its_server_serves(tmp_path, identity_repo):
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    full = wheel_from_install(tmp_path)
    slim = repack_pytriton.repack(full, tmp_path / "slim", py)
    with zipfile.ZipFile(slim) as wheel:
        names = set(wheel.namelist())
    assert f"pytriton/tritonserver/python_backend_stubs/{py}/triton_python_backend_stub" in names
    assert not [n for n in names if "python_backend_stubs/" in n and f"/{py}/" not in n]  # one stub only
    assert not [n for n in names if "libpython3-" in n]  # the 3.13 stub's bundled libpython is gone
    assert not [n for n in names if n.startswith("pytriton/") and n.endswith(".py") and "__init__" not in n
                and "backends/python" not in n]  # fmt: skip
    site = tmp_path / "site"
    pip = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--no-deps",
        "--target",
        str(site),
        str(slim),
    ]
    subprocess.run(pip, check=True, capture_output=True)
    # serve the identity model from the slim install: nothing the server or the stub loads was dropped
    code = (
        "import numpy as np, tritonclient.http as h\n"
        "from accelbench.serving import LocalTriton\n"
        "from accelbench.serving.embedded import find_tritonserver\n"
        f"assert str(find_tritonserver().binary).startswith({str(site)!r})\n"
        f"with LocalTriton({str(identity_repo)!r}) as s:\n"
        "    x = np.arange(32, dtype=np.float32).reshape(2, 16); i = h.InferInput('x', [2, 16], 'FP32')\n"
        "    i.set_data_from_numpy(x)\n"
        "    y = h.InferenceServerClient(s.http_address).infer('identity__cpu-local__fp32', [i]).as_numpy('y')\n"
        "    assert np.array_equal(y, x); print('served', s.server_version)\n"
    )
    env = dict(
        os.environ, PYTHONPATH=f"{site}{os.pathsep}{ROOT}", ACCELBENCH_CACHE_DIR=str(tmp_path / "cache")
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0 and "served 2.51" in run.stdout, run.stderr[-2000:]
    assert slim.stat().st_size < 0.8 * full.stat().st_size  # compressed smaller than the full wheel stored


def test_repack_refuses_what_is_not_the_wheel(tmp_path):
    bogus = tmp_path / "nvidia_pytriton-0.7.0-py3-none-any.whl"
    bogus.write_bytes(b"not a zip")
    assert repack_pytriton.main([str(bogus), "--out", str(tmp_path / "o")]) == 2
    assert repack_pytriton.main([str(tmp_path / "other.whl"), "--out", str(tmp_path / "o")]) == 2


def _doc(start: str) -> dict:
    step = {"index": 0, "offered": {"concurrency": 8}, "started_at": start, "duration_s": 10.0, "throughput_rps": 500.0,
            "latency_us": {"p99": 900.0}, "metrics": {"energy_j": None}, "energy_per_request_j": None,
            "verdict": "VALID", "server_stats": {"mean_batch_size": 4.0}}  # fmt: skip
    return {"model": "resnet50", "variant": "resnet50__h200-sxm__fp16", "precision": "fp16", "steps": [step]}


def test_energy_is_mean_power_inside_the_step_over_throughput():
    start = "2026-12-01T10:00:00+00:00"
    t0 = datetime(2026, 12, 1, 10, tzinfo=timezone.utc).timestamp()
    # idle 100 W outside the step, 400 W inside; the first and last second (start known to 1 s) not counted
    samples = [(t0 + t, 400.0 if 0 <= t <= 10 else 100.0) for t in np.arange(-5, 15, 0.05)]
    samples = [(t, 900.0 if t0 + 0.5 > t >= t0 else w) for t, w in samples]  # a spike in the uncertain second
    doc = _doc(start)
    [row] = nvml_energy.attach(doc, samples)
    step = doc["steps"][0]
    assert step["metrics"]["nvml_power_w"] == pytest.approx(400.0)
    assert step["energy_per_request_j"] == pytest.approx(400.0 / 500.0) == row["j_per_request"]
    # a step too short to have samples inside its trimmed window gets none, not a guess
    assert nvml_energy.step_power(samples, t0, 1.5) is None
    served = {"energy_per_request_j": 0.5, "started_at": start, "duration_s": 10.0, "throughput_rps": 500.0}
    doc = {"steps": [served]}
    nvml_energy.attach(doc, samples)
    assert doc["steps"][0]["energy_per_request_j"] == 0.5  # the server's own energy counter is kept


def test_summary_puts_the_served_peak_next_to_the_in_process_figure(tmp_path):
    doc = _doc("2026-12-01T10:00:00+00:00")
    doc["steps"].append(dict(doc["steps"][0], index=1, throughput_rps=9000.0, verdict="INVALID"))
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    reference = ROOT / "bench" / "results" / "h200" / "2026-11-30" / "summary.json"
    assert triton_summary.main([str(path), "--out", str(tmp_path), "--in-process", str(reference)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    [peak] = summary["peaks"]
    in_process = max(
        r["measured_ips"] for r in json.loads(reference.read_text())["rows"] if r["model"] == "resnet50"
    )
    assert peak["served_peak_rps"] == 500.0  # the INVALID step is not a peak
    assert peak["served_over_in_process"] == pytest.approx(500.0 / in_process)
    assert "| resnet50__h200-sxm__fp16 | 8 | 500.0 |" in (tmp_path / "summary.md").read_text()


@pytest.mark.slow
def test_the_device_script_rehearsed_on_this_cpu(tmp_path):
    from accelbench.serving.embedded import cache_dir

    out, work = tmp_path / "out", tmp_path / "work"
    # short steps (at most 2 s while waiting for the sample floor) and short generations: the flow is checked
    # here, the figures on the device; the suite's cache, so llama-tiny and the backends copy are made once
    env = dict(os.environ, OUT=str(out), WORK=str(work), DEVICE="cpu", PYTHON=sys.executable,
               CONCURRENCY="1,2", DURATION="1", MAX_DURATION="2", WARMUP="0.5", LLM_ISL="32", LLM_OSL="8",
               LLM_CONCURRENCY="1,2",
               CACHE=str(cache_dir()))  # fmt: skip
    run = subprocess.run(["bash", str(ROOT / "bench" / "device" / "h200_triton.sh")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    log = (out / "log.txt").read_text()
    assert run.returncode == 0, log[-3000:]
    assert len(list(out.iterdir())) <= 8  # what comes back from the device is at most 8 files
    with tarfile.open(out / "results.tar.gz") as tar:
        names = tar.getnames()
        docs = {
            n: json.load(tar.extractfile(n))
            for n in names
            if n.startswith("results/") and n.endswith(".json")
        }
        [doc] = [d for d in docs.values() if d["model"] == "identity"]
        # part 4b: the generative model streamed by the torch-cuda Triton model (device=cpu here)
        [gen] = [d for d in docs.values() if d["model"] == "llama-tiny"]
        server_log = tar.extractfile("logs/server-identity.log").read().decode()
    assert doc["origin"] == "accelbench-loadtest" and [s["offered"]["concurrency"] for s in doc["steps"]] == [
        1,
        2,
    ]
    config = doc["provenance"]["repository_config"]
    assert 'key: "torch_mode"' in config and 'string_value: "dlpack"' in config
    assert "identity__cpu-local__fp32: torch" in server_log and "on cpu in torch.float32" in server_log
    assert gen["task"] == "text-generation" and all(
        s["generative"]["output_tokens_per_s"] for s in gen["steps"]
    )
    assert "| llama-tiny | cpu-local | fp32 | 1 |" in (out / "llm_summary.md").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert [r["concurrency"] for r in summary["rows"] if "identity" in json.dumps(r)] == [1, 2]
    assert "no NVML samples" in log or "nvml_power_w" in json.dumps(doc)


@pytest.mark.slow
def test_preflight_passes_here_on_cpu_and_names_the_missing_gpu():
    script = str(ROOT / "bench" / "device" / "preflight.py")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    ok = subprocess.run([sys.executable, script, "--device", "cpu"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "triton_python_backend_stub: missing libraries none" in ok.stdout and "/dev/shm:" in ok.stdout
    gpu = subprocess.run(
        [sys.executable, script, "--device", "cuda"], capture_output=True, text=True, env=env
    )
    import torch

    if not torch.cuda.is_available():
        assert gpu.returncode == 1 and "torch sees no GPU" in gpu.stderr and "Traceback" not in gpu.stderr
