"""The GPU device check's pieces that run without a GPU: the ONNX→torch interpreter and the script's flow."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]

from accelbench.models.builtin import build_builtin  # noqa: E402
from accelbench.models.cards import load_card  # noqa: E402
from accelbench.models.inputs import make_inputs  # noqa: E402
from accelbench.serving.onnx_torch import OnnxTorch  # noqa: E402


@pytest.mark.parametrize("name", ["identity", "minilm-l6", "resnet50"])
@pytest.mark.slow
def test_interpreter_matches_onnxruntime_in_fp32(name):
    model = build_builtin(name)
    feeds = make_inputs(load_card(f"builtin:{name}"), batch_size=2, count=1, seed=3)[0]
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    runner = OnnxTorch(model, "cpu", torch.float32)
    got = runner(runner.feeds(feeds))
    assert len(got) == len(expected)
    for want, have in zip(expected, got, strict=True):
        assert have.shape == want.shape
        np.testing.assert_allclose(have.numpy(), want, rtol=1e-4, atol=1e-4)


def test_interpreter_names_unsupported_ops():
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Einsum", ["x", "x"], ["y"], equation="ij,ij->i")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    with pytest.raises(NotImplementedError, match="Einsum"):
        OnnxTorch(helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]))


@pytest.mark.slow
def test_device_check_flow_on_cpu_writes_result_documents(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, str(ROOT / "bench" / "device_check.py"), "--out", str(out), "--device", "cpu",
           "--dtype", "fp32", "--quick", "--models", "identity", "--batches", "1,2"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    probe = json.loads((out / "probe.json").read_text())
    assert probe["catalog_match"]["id"] == "cpu-local"
    summary = json.loads((out / "summary.json").read_text())
    assert [r["batch"] for r in summary["rows"]] == [1, 2]
    assert all(r["measured_ips"] > 0 and r["projected_ips"] > 0 for r in summary["rows"])
    with tarfile.open(out / "results.tar.gz") as tar:
        docs = [json.load(tar.extractfile(m)) for m in tar.getmembers()]
    assert {d["schema"] for d in docs} == {"accelbench.result/1"}
    assert {d["origin"] for d in docs} == {"device-check"}
    [doc] = docs
    assert doc["variant"] == "identity__h200-sxm__fp32"
    # a step at batch b stands for b single-inference requests batched by the server
    assert [s["offered"]["concurrency"] for s in doc["steps"]] == [1, 2]
    assert [s["server_stats"]["mean_batch_size"] for s in doc["steps"]] == [1.0, 2.0]
    assert all(s["throughput_rps"] == s["throughput_ips"] > 0 for s in doc["steps"])

    # the committed H200 results can be rebuilt from their summary without measuring again
    rebuilt = tmp_path / "rebuilt"
    rebuilt.mkdir()
    for name in ("summary.json", "probe.json"):
        (rebuilt / name).write_text((out / name).read_text())
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "device_check.py"), "--rebuild-results", str(rebuilt)],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert (
        json.loads((rebuilt / "results" / "identity__h200-sxm__fp32.json").read_text())["steps"]
        == doc["steps"]
    )


@pytest.mark.slow
def test_committed_h200_results_report_a_measured_row(tmp_path):
    from click.testing import CliRunner

    from accelbench.cli import main

    results = sorted((ROOT / "bench" / "results" / "h200").glob("*/results"))
    assert results, "bench/results/h200/<date>/results is missing"
    run = CliRunner().invoke(
        main, ["report", str(results[-1]), "--slo-p99-ms", "20", "--out", str(tmp_path), "--json"]
    )
    assert run.exit_code == 0, run.output
    rows = json.loads(run.output)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    h200 = [r for r in rows if r.get("target") == "h200-sxm"]
    assert h200 and all(r.get("status") == "measured" for r in h200)


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA (torch sees none here)"
)
def test_device_check_on_a_gpu_uses_cuda_graphs_and_nvml(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, str(ROOT / "bench" / "device_check.py"), "--out", str(out), "--quick",
           "--models", "resnet50", "--batches", "1,8"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert all(r["cuda_graph"] for r in rows)
    assert all(r["power_w"] and r["joules_per_inference"] for r in rows)
