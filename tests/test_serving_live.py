"""The real bundled tritonserver serving generated repositories: outputs equal in-process onnxruntime over
HTTP and gRPC, loopback-only listeners, statistics and metrics, remote checks, clean shutdown."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort
import psutil
import pytest
import triton_calls
from triton_calls import reference_batch

from accelbench.errors import BadInputError, ServerError
from accelbench.models.manifest import read_manifest
from accelbench.serving import LocalTriton, RemoteTriton, scrape_metrics, stats_delta, stats_snapshot
from accelbench.serving.http_client import HttpError, get_text
from accelbench.serving.repository import write_repository

pytestmark = pytest.mark.slow
ACCELBENCH = str(Path(sys.executable).parent / "accelbench")
VARIANTS = [
    ("builtin:identity", "cpu-local", "fp32", "identity__cpu-local__fp32"),
    ("builtin:minilm-l6", "c7i.xlarge", "fp32", "minilm-l6__c7i-xlarge__fp32"),
    ("builtin:minilm-l6", "c7i.xlarge", "int8", "minilm-l6__c7i-xlarge__int8"),
]


def family(pid: int) -> list[int]:
    """The server and every descendant (the python-backend stubs)."""
    proc = psutil.Process(pid)
    return [pid] + [child.pid for child in proc.children(recursive=True)]


def processes_using(repo: Path) -> list[psutil.Process]:
    """Any tritonserver or python-backend stub whose command line names ``repo`` (orphans included)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(repo) in cmdline and ("tritonserver" in cmdline or "triton_python_backend_stub" in cmdline):
            found.append(proc)
    return found


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie has exited: only its parent has not read its status yet)."""
    found = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                found.append(pid)
        except psutil.NoSuchProcess:
            pass
    return found


def assert_gone(pids: list[int]) -> None:
    left = alive(pids)
    assert not left, f"processes left behind: {left}"


@pytest.fixture(scope="module")
def variants(identity_variants, minilm_c7i_variants, tmp_path_factory) -> dict[str, Path]:
    """VARIANTS as `accelbench quantize` made them (tests/conftest.py: once per run), and the seq model."""
    folders = {"builtin:identity": identity_variants, "builtin:minilm-l6": minilm_c7i_variants[0]}
    found = {name: folders[model] / name for model, *_, name in VARIANTS}
    assert all((path / "manifest.json").is_file() for path in found.values()), found
    found[SEQ] = make_seq_variant(tmp_path_factory.mktemp("seq") / SEQ)
    return found


SEQ = "seq__cpu-local__fp32"


def make_seq_variant(vdir: Path) -> Path:
    """y = float(x) with a dynamic sequence dimension: requests of different lengths cannot share one ORT call."""
    import onnx
    from onnx import TensorProto, helper

    from accelbench.models.manifest import write_manifest

    vdir.mkdir(parents=True)
    x = helper.make_tensor_value_info("x", TensorProto.INT64, ["batch", "seq"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], "seq", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, vdir / "model.onnx")
    spec = {"card": {}, "source": {"uri": "test:seq", "sha256": "0" * 64}, "recipe": "test", "format": "onnx"}
    write_manifest(
        vdir,
        spec
        | {
            "name": SEQ,
            "model": "seq",
            "target": "cpu-local",
            "precision": "fp32",
            "model_file": "model.onnx",
            "toolchain": {"name": "onnxruntime", "version": "test"},
            "inputs": [{"name": "x", "dtype": "int64", "shape": [-1, -1]}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": [-1, -1]}],
            "calibration": None,
            "accuracy": None,
            "graph_cost": None,
            "engine": None,
        },
    )
    return vdir


@pytest.fixture(scope="module")
def server(variants, tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    write_repository(list(variants.values()), repo, "local", {"intra_op_threads": 2})
    triton = LocalTriton(repo)
    with triton:
        pids = family(triton.pid)
        yield triton
    assert_gone(pids)
    assert not processes_using(repo)


def in_process(variant: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(variant / "model.onnx"), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


def infer(protocol: str, triton, model: str, feeds: dict[str, np.ndarray], outputs: list[str]) -> dict:
    url = triton.http_address if protocol == "http" else triton.grpc_url
    return triton_calls.infer(protocol, url, model, feeds, outputs)


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    if np.issubdtype(want.dtype, np.floating):
        # same graph, same runtime: only thread-count reduction order may differ
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("name", [name for *_, name in VARIANTS])
def test_outputs_match_in_process_onnxruntime(server, variants, protocol, name):
    feeds = reference_batch(variants[name], rows=3)
    want = in_process(variants[name], feeds)
    got = infer(protocol, server, name, feeds, list(want))
    for key in want:
        assert_close(got[key], want[key])


def _ss_ip(line: str) -> str:
    """Local address column of an ``ss -ltn`` line: ``127.0.0.1:80`` or ``[::ffff:127.0.0.1]:80``."""
    return line.split()[3].rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")


def test_only_loopback_listeners(server):
    listeners = []
    for pid in family(server.pid):
        for conn in psutil.Process(pid).net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                listeners.append(conn.laddr)
    assert len({addr.port for addr in listeners}) >= 3  # HTTP, gRPC, metrics
    # gRPC listens on an IPv6 socket bound to the IPv4-mapped loopback (::ffff:127.0.0.1): still loopback only
    assert {addr.ip.removeprefix("::ffff:") for addr in listeners} == {"127.0.0.1"}, listeners
    ss = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True, check=False)
    if ss.returncode == 0:  # the same from the kernel's view, when iproute2 is installed
        mine = [line for line in ss.stdout.splitlines() if f"pid={server.pid}," in line]
        assert mine and all(_ss_ip(line) == "127.0.0.1" for line in mine), mine


def test_concurrent_requests_are_batched_and_split_back(server, variants):
    name = "identity__cpu-local__fp32"
    width = read_manifest(variants[name]).inputs[0].shape[1]
    before = stats_snapshot(server.http_url, name)
    results: dict[int, np.ndarray] = {}

    def one(i: int) -> None:
        x = np.full((1 + i % 3, width), float(i), np.float32)
        results[i] = infer("http", server, name, {"x": x}, ["y"])["y"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, y in results.items():
        np.testing.assert_array_equal(y, np.full((1 + i % 3, width), float(i), np.float32))
    delta = stats_delta(before, stats_snapshot(server.http_url, name))
    assert delta["success_count"] == 12
    assert delta["inference_count"] == sum(1 + i % 3 for i in range(12))
    assert sum(delta["batch_histogram"].values()) == delta["execution_count"]
    assert delta["mean_batch_size"] == delta["inference_count"] / delta["execution_count"]
    for key in ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us", "request_us"):
        assert delta[key] is not None and delta[key] >= 0
    assert delta["request_us"] >= delta["compute_infer_us"]


def test_metrics_live(server, variants):
    name = "minilm-l6__c7i-xlarge__int8"
    infer("grpc", server, name, reference_batch(variants[name], 2), ["sentence_embedding"])
    metrics = scrape_metrics(server.metrics_url)
    assert metrics["models"][name]["request_success"] >= 1
    assert metrics["models"][name]["request_duration_us"] > 0
    quantiles = metrics["models"][name]["request_summary_us_quantiles"]  # LocalTriton turns summaries on
    assert set(quantiles) >= {"0.5", "0.99"}
    assert metrics["cpu_memory_total_bytes"] and metrics["cpu_memory_total_bytes"] > 0
    assert metrics["gpu_power_w"] is None and metrics["energy_j"] is None  # no GPU here: absent, not 0


def test_remote_checks_the_served_config(server, variants):
    name = "minilm-l6__c7i-xlarge__int8"
    remote = RemoteTriton(server.http_url, grpc_url=server.grpc_url, metrics_url=server.metrics_url)
    manifest = read_manifest(variants[name])
    with remote:
        assert remote.server_version == server.server_version
        assert remote.check_model(name, manifest)["name"] == name
        wrong = manifest.inputs[0].model_copy(update={"dtype": "int32"})
        manifest = manifest.model_copy(update={"inputs": [wrong, manifest.inputs[1]]})
        with pytest.raises(BadInputError, match="input_ids is TYPE_INT64, the variant has TYPE_INT32"):
            remote.check_model(name, manifest)
        with pytest.raises(ServerError, match="not ready"):
            remote.check_model("no-such-model")
    with pytest.raises(ServerError, match="unreachable"):
        RemoteTriton("http://127.0.0.1:9").check_live()


def test_bad_config_fails_with_tritons_reason(identity_repo, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(identity_repo, bad)
    config = bad / "identity__cpu-local__fp32" / "config.pbtxt"
    config.write_text(config.read_text().replace("TYPE_FP32", "TYPE_INT64"))
    with pytest.raises(ServerError) as info:
        LocalTriton(bad, start_timeout_s=120).start()
    message = str(info.value)
    assert "failed to load 'identity__cpu-local__fp32'" in message
    assert "input 'x' is TYPE_INT64 in config.pbtxt but TYPE_FP32 in the ONNX graph" in message
    assert "\n" not in message

    model_py = bad / "identity__cpu-local__fp32" / "1" / "model.py"
    shutil.copy(identity_repo / "identity__cpu-local__fp32" / "config.pbtxt", config)
    initialize = "def initialize(self, args: dict[str, str]) -> None:"
    assert initialize in model_py.read_text()
    model_py.write_text(
        model_py.read_text().replace(initialize, initialize + "\n        raise RuntimeError('boom at load')")
    )
    with pytest.raises(ServerError, match="RuntimeError: boom at load") as info:
        LocalTriton(bad, start_timeout_s=120).start()
    assert "\n" not in str(info.value)

    # failing in a warmup request: Triton 2.51 either reports it or crashes; both end the start, in one line
    source = (identity_repo / "identity__cpu-local__fp32" / "1" / "model.py").read_text()
    execute, body = "    def execute(self, requests: ", "        feeds: list[Feed | None] = []"
    assert execute in source and body in source
    model_py.write_text(source.replace(body, "        1 / 0\n" + body))
    with pytest.raises(ServerError, match="failed to load|crashed with") as info:
        LocalTriton(bad, start_timeout_s=120).start()
    assert "\n" not in str(info.value) and "not ready after" not in str(info.value)
    assert not processes_using(bad)


def test_port_in_use_is_one_line(identity_repo):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ServerError, match=f"^port {port} is in use"):
            LocalTriton(identity_repo, http_port=port).start()


def test_a_chosen_port_taken_before_the_server_binds_it_starts_again_on_new_ones(identity_repo, monkeypatch):
    """tritonserver binds its endpoints after loading its models; a port chosen free may be taken meanwhile (a CI
    run: vLLM's engine, loading in the same server, took the metrics port). The server starts again on new ports;
    a port the caller gave stays theirs (test_port_in_use_is_one_line)."""
    import socket

    from accelbench.serving import server as server_module

    real, calls = server_module.free_port, itertools.count(1)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        # the third port chosen, the metrics port, is taken before the server binds it
        monkeypatch.setattr(
            server_module, "free_port", lambda host: taken if next(calls) == 3 else real(host)
        )
        with LocalTriton(identity_repo, start_timeout_s=120) as triton:
            assert triton.port_retries == 1 and taken not in triton._ports.values()
            assert triton.check_model("identity__cpu-local__fp32")["name"] == "identity__cpu-local__fp32"


def test_a_server_with_metrics_off_is_ready_without_its_metrics_endpoint(identity_repo):
    """Readiness waits for the metrics endpoint too (Triton starts it last), except where metrics are off."""
    with LocalTriton(identity_repo, extra_args=("--allow-metrics=false",), start_timeout_s=30) as triton:
        assert triton.check_model("identity__cpu-local__fp32")["name"] == "identity__cpu-local__fp32"
        with pytest.raises(HttpError):
            get_text(triton.metrics_url, timeout_s=2)


def test_explicit_models_and_no_process_left_after_an_exception(server):
    identity = "identity__cpu-local__fp32"
    with pytest.raises(RuntimeError, match="mid-test"), LocalTriton(server.repo, models=[identity]) as triton:
        pids = family(triton.pid)
        assert len(pids) == 2  # server + the one stub: the other models were not loaded
        states = {m["name"]: m.get("state") for m in triton.models()}
        assert states[identity] == "READY" and list(states.values()).count("READY") == 1
        assert triton.check_model(identity)["name"] == identity
        raise RuntimeError("mid-test")
    assert_gone(pids)
    with pytest.raises(BadInputError, match="no model"):
        LocalTriton(server.repo, models=["nope"]).start()


def test_serve_command_stops_cleanly_on_ctrl_c(identity_repo):
    proc = subprocess.Popen(
        [ACCELBENCH, "serve", str(identity_repo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("READY"):
                break
        header = json.dumps(lines)
        assert "identity__cpu-local__fp32" in lines[-1], header
        pid = int(lines[0].split("(pid ")[1].rstrip(")\n"))
        pids = family(pid)
        proc.send_signal(2)  # SIGINT, what Ctrl-C delivers
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_gone(pids)
    assert not processes_using(identity_repo)
    assert "http://127.0.0.1:" in "".join(lines)


def test_ctrl_c_during_start_leaves_nothing(identity_repo):
    import time

    proc = subprocess.Popen(
        [ACCELBENCH, "serve", str(identity_repo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        servers: list[psutil.Process] = []
        while not servers and time.monotonic() < deadline:
            servers = [c for c in psutil.Process(proc.pid).children() if c.name() == "tritonserver"]
            time.sleep(0.05)
        assert servers, "tritonserver never started"
        pids = family(servers[0].pid)
        proc.send_signal(2)  # interrupt while the readiness wait is (most likely) still running
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code in (0, 130), proc.stderr.read()
    # stubs that were starting get the group SIGKILL; the kernel takes a moment to reap them, longer on a loaded
    # machine (0.5 s was once too short at load 5): wait for that, not for anything that outlives the kill
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (alive(pids) or processes_using(identity_repo)):
        time.sleep(0.1)
    assert_gone(pids)
    assert not processes_using(identity_repo)


def test_requests_of_different_lengths_in_one_dynamic_batch(server):
    results: dict[int, np.ndarray] = {}

    def one(i: int) -> None:
        x = np.arange(i * 10, i * 10 + (1 + i % 2) * (2 + i % 4), dtype=np.int64).reshape(1 + i % 2, -1)
        results[i] = (x, infer("grpc", server, SEQ, {"x": x}, ["y"])["y"])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 10
    for x, y in results.values():
        np.testing.assert_array_equal(y, x.astype(np.float32))
