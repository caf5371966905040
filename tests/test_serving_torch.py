"""The torch-cuda flavor: its bucket runner in-process, and its generated model.py served by the real embedded
tritonserver on this CPU (device=cpu, float32): outputs equal onnxruntime, dynamic batches split back, DLPack
serving under numpy 2 without the stub's numpy<2 environment, and on a GPU with CUDA graphs in bf16."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from triton_calls import infer, reference_batch

torch = pytest.importorskip("torch")

from accelbench.models.builtin import build_builtin  # noqa: E402
from accelbench.models.cards import load_card  # noqa: E402
from accelbench.models.inputs import make_inputs  # noqa: E402
from accelbench.serving import LocalTriton, stats_delta, stats_snapshot  # noqa: E402
from accelbench.serving.onnx_torch import OnnxTorch  # noqa: E402
from accelbench.serving.repository import write_repository  # noqa: E402
from accelbench.serving.server import free_port  # noqa: E402
from accelbench.serving.torch_runner import BucketRunner  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# through the interpreter, not the console script: the GPU machine runs these tests without installing accelbench
ACCELBENCH = [sys.executable, "-m", "accelbench.cli"]
MODELS = ["identity__cpu-local__fp32", "minilm-l6__cpu-local__fp32"]
CPU = {"device": "cpu", "dtype": "float32", "instance_count": 1, "intra_op_threads": 2, "max_batch_size": 8}


def runner_for(
    name: str, buckets: list[int], mode: str = "cuda_graphs"
) -> tuple[OnnxTorch, BucketRunner, dict]:
    model = build_builtin(name)
    interpreter = OnnxTorch(model, "cpu", torch.float32)
    feeds = make_inputs(load_card(f"builtin:{name}"), batch_size=1, count=1, seed=0)[0]
    dims = {k: tuple(v.shape[1:]) for k, v in feeds.items()}
    dtypes = {k: torch.from_numpy(v).dtype for k, v in feeds.items()}
    runner = BucketRunner(interpreter, static_dims=dims, input_dtypes=dtypes, buckets=buckets, mode=mode)
    return interpreter, runner, feeds


def batch(name: str, rows: int, seed: int) -> dict[str, torch.Tensor]:
    feeds = make_inputs(load_card(f"builtin:{name}"), batch_size=rows, count=1, seed=seed)[0]
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in feeds.items()}


@pytest.mark.parametrize("rows", [1, 3, 4, 11])
@pytest.mark.slow
def test_buckets_pad_and_chunk_to_the_eager_result(rows):
    interpreter, runner, _ = runner_for("minilm-l6", [1, 2, 4])
    assert [b.size for b in runner.buckets] == [1, 2, 4] and runner.mode == "cuda_graphs"
    assert not any(b.captured for b in runner.buckets)  # no capture on a CPU; buffers and padding the same
    feeds = batch("minilm-l6", rows, seed=rows)
    want = interpreter(feeds)
    got = runner.run(feeds)
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape  # the padding rows are cut off again, chunks joined (11 = 4 + 4 + 3)
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_bucket_outputs_are_not_overwritten_by_the_next_batch():
    _, runner, _ = runner_for("identity", [2])
    first = runner.run({"x": torch.ones(2, 16)})[0]
    runner.run({"x": torch.zeros(2, 16)})
    assert torch.equal(first, torch.ones(2, 16))  # a view of the static buffer would now be zeros


def test_other_shapes_and_missing_shapes_run_eager():
    interpreter, runner, _ = runner_for("identity", [1, 2])
    feeds = {"x": torch.arange(16.0).reshape(2, 8)}  # width 8, the buckets hold 16
    assert not runner.fits(feeds)
    torch.testing.assert_close(runner.run(feeds)[0], feeds["x"])
    eager = BucketRunner(interpreter, static_dims=None, input_dtypes={}, buckets=[1, 2])
    assert eager.mode == "eager" and not eager.buckets and "running eager" in eager.notes[0]
    with pytest.raises(ValueError, match="torch_mode 'jit'"):
        BucketRunner(interpreter, static_dims=None, input_dtypes={}, buckets=[1], mode="jit")


@pytest.mark.parametrize("name", ["minilm-l6", "resnet50"])
@pytest.mark.slow
def test_an_fp16_graph_runs_although_its_casts_come_last(tmp_path, name):
    """onnxruntime's float16 converter appends the input casts after the nodes that read them; the interpreter
    orders the nodes itself, and accelbench's fp16 recipe (to_fp16) writes them sorted for the ONNX checker."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    from accelbench.models.toolchains.onnxruntime import to_fp16

    raw = convert_float_to_float16(build_builtin(name), keep_io_types=True)
    with pytest.raises(onnx.checker.ValidationError, match="topologically sorted"):
        onnx.checker.check_model(raw)  # out of order, so the interpreter's own ordering is what is tested
    feeds = make_inputs(load_card(f"builtin:{name}"), batch_size=2, count=1, seed=1)[0]
    want = ort.InferenceSession(raw.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    runner = OnnxTorch(raw, "cpu", torch.float32)  # fp16 weights computed in float32 here
    for w, g in zip(want, runner(runner.feeds(feeds)), strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g.numpy(), w, rtol=2e-2, atol=2e-2)
    onnx.save(build_builtin(name), tmp_path / "fp32.onnx")
    to_fp16(tmp_path / "fp32.onnx", tmp_path / "fp16.onnx")
    onnx.checker.check_model(str(tmp_path / "fp16.onnx"))  # the quantize attempts check every variant so


@pytest.mark.slow
def test_compile_mode_compiles_each_bucket_at_set_up_and_matches_eager():
    _, runner, _ = runner_for("identity", [1, 2], mode="compile")
    assert runner.mode == "compile" and [b.size for b in runner.buckets] == [1, 2]
    x = torch.randn(3, 16)
    torch.testing.assert_close(runner.run({"x": x})[0], x)  # 3 rows: a bucket of 2, then one of 1


def in_process(variant: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(variant / "model.onnx"), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


@pytest.fixture(scope="module")
def variants(identity_variants, tmp_path_factory) -> dict[str, Path]:
    """identity's FP32 cpu-local variant as tests/conftest.py made it (once per run), minilm-l6's made here."""
    out = tmp_path_factory.mktemp("variants")
    cmd = [*ACCELBENCH, "quantize", "builtin:minilm-l6", "--target", "cpu-local", "--precision", "fp32",
           "--out", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    found = {"identity__cpu-local__fp32": identity_variants / "identity__cpu-local__fp32"}
    return found | {name: out / name for name in MODELS if name not in found}


@pytest.fixture(scope="module")
def torch_repo(variants, tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("torch-repo")
    # a 50 ms queue delay so that concurrent single requests visibly share one execution
    write_repository(list(variants.values()), repo, "torch-cuda", CPU | {"max_queue_delay_us": 50000})
    return repo


@pytest.fixture(scope="module")
def server(torch_repo):
    with LocalTriton(torch_repo) as triton:
        yield triton


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("name", MODELS)
def test_served_outputs_match_onnxruntime(server, variants, protocol, name):
    feeds = reference_batch(variants[name], rows=3)
    want = in_process(variants[name], feeds)
    url = server.http_address if protocol == "http" else server.grpc_url
    got = infer(protocol, url, name, feeds, list(want))
    for key in want:
        assert got[key].shape == want[key].shape and got[key].dtype == want[key].dtype
        np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-4)
    log = "\n".join(server.log_lines())
    assert f"{name}: torch {torch.__version__} on cpu in torch.float32, mode cuda_graphs" in log


@pytest.mark.slow
def test_concurrent_requests_are_batched_by_triton_and_split_back(server, variants):
    name = "minilm-l6__cpu-local__fp32"
    rows = reference_batch(variants[name], rows=8)
    want = in_process(variants[name], rows)["sentence_embedding"]
    before = stats_snapshot(server.http_url, name)
    start, results = threading.Barrier(8), {}

    def one(i: int) -> None:
        feeds = {k: v[i : i + 1] for k, v in rows.items()}
        start.wait()
        results[i] = infer("http", server.http_address, name, feeds, ["sentence_embedding"])[
            "sentence_embedding"
        ]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(8):  # each request gets its own row back, not a neighbour's
        np.testing.assert_allclose(results[i][0], want[i], rtol=1e-4, atol=1e-4)
    delta = stats_delta(before, stats_snapshot(server.http_url, name))
    assert delta["success_count"] == 8 and delta["inference_count"] == 8
    assert max(int(b) for b in delta["batch_histogram"]) > 1, delta["batch_histogram"]
    assert delta["execution_count"] < 8


def _serve(repo: Path, cache: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    # an empty accelbench cache: no stub environment (python -m accelbench.serving.install) to fall back on
    env = dict(os.environ, PYTHONPATH=str(ROOT), ACCELBENCH_CACHE_DIR=str(cache))
    cmd = [*ACCELBENCH, "serve", str(repo), "--http-port", str(port),
           "--grpc-port", str(free_port()), "--metrics-port", str(free_port())]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # fmt: skip
    return proc, port


@pytest.mark.slow
def test_dlpack_serves_under_this_numpy_without_the_stub_environment(torch_repo, variants, tmp_path):
    """The stub's numpy bridge is built for numpy 1; DLPack never touches it, so the torch-cuda flavor serves
    exact outputs with this environment's numpy (2 in CI and on the GPU machine) and no stub environment."""
    proc, port = _serve(torch_repo, tmp_path / "empty-cache")
    try:
        ready = set()
        for line in proc.stdout:  # serve lists each model's state once the server is up
            if line.startswith("READY"):
                ready.update(name for name in MODELS if name in line)
            if ready == set(MODELS):
                break
        assert ready == set(MODELS), proc.stderr.read()[-2000:]
        assert not (tmp_path / "empty-cache" / "triton" / "stub-env").exists()
        for name in MODELS:
            feeds = reference_batch(variants[name], rows=2)
            want = in_process(variants[name], feeds)
            got = infer("http", f"127.0.0.1:{port}", name, feeds, list(want))
            for key in want:
                np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-4)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA (torch sees none here)"
)
def test_on_a_gpu_cuda_graphs_in_bf16(variants, tmp_path):
    overrides = {"device": "cuda", "dtype": "bfloat16", "instance_kind": "KIND_GPU", "instance_count": 1,
                 "max_batch_size": 8}  # fmt: skip
    write_repository(list(variants.values()), tmp_path / "repo", "torch-cuda", overrides)
    with LocalTriton(tmp_path / "repo") as triton:
        log = "\n".join(triton.log_lines())
        for name in MODELS:
            assert f"{name}: torch {torch.__version__} on cuda:0 in torch.bfloat16" in log
            assert "CUDA graphs [1, 2, 4, 8]" in log
            feeds = reference_batch(variants[name], rows=3)
            want = in_process(variants[name], feeds)
            got = infer("http", triton.http_address, name, feeds, list(want))
            for key in want:  # bf16 keeps ~3 significant digits
                cos = (got[key] * want[key]).sum() / (np.linalg.norm(got[key]) * np.linalg.norm(want[key]))
                assert got[key].shape == want[key].shape and cos > 0.99
