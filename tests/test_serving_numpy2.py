"""The embedded tritonserver's python backend beside numpy 2: the stub's own numpy bridge (``as_numpy()``,
``Tensor(name, array)``, every BYTES tensor) is built for numpy 1, so models that cross it run in the stub's
numpy<2 environment (accelbench.serving.install) with exact outputs, are refused in one line when it is missing,
and models written with ``tensor_transport: dlpack`` need no such environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import psutil
import pytest
import tritonclient.http as thttp
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException

from accelbench.errors import BadInputError
from accelbench.models.manifest import write_manifest
from accelbench.serving import LocalTriton
from accelbench.serving.embedded import numpy_bridge_ok, stub_env_dir
from accelbench.serving.install import STUB_NUMPY, build_stub_env
from accelbench.serving.repository import write_repository
from accelbench.serving.server import free_port, numpy_bridge_models

ROOT = Path(__file__).resolve().parents[1]
TEXT = "text__cpu-local__fp32"
NUMERIC = "twice__cpu-local__fp32"
STRINGS = np.array([["héllo".encode()], [b""], [b"x" * 3000], ["\x00ü".encode()]], dtype=object)


def make_variant(vdir: Path, name: str, with_text: bool) -> Path:
    """y = x + x (FP32), and with_text: echo = text (BYTES) beside it, in one ONNX graph."""
    vdir.mkdir(parents=True)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])]
    nodes = [helper.make_node("Add", ["x", "x"], ["y"])]
    tensors = {"inputs": [{"name": "x", "dtype": "float32", "shape": [-1, 3]}],
               "outputs": [{"name": "y", "dtype": "float32", "shape": [-1, 3]}]}  # fmt: skip
    if with_text:
        inputs.append(helper.make_tensor_value_info("text", TensorProto.STRING, ["batch", 1]))
        outputs.append(helper.make_tensor_value_info("echo", TensorProto.STRING, ["batch", 1]))
        nodes.append(helper.make_node("Identity", ["text"], ["echo"]))
        tensors["inputs"].append({"name": "text", "dtype": "object", "shape": [-1, 1]})
        tensors["outputs"].append({"name": "echo", "dtype": "object", "shape": [-1, 1]})
    model = helper.make_model(
        helper.make_graph(nodes, name, inputs, outputs), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    onnx.save(model, vdir / "model.onnx")
    write_manifest(vdir, {
        "name": name, "model": name.split("__")[0], "card": {}, "source": {"uri": f"test:{name}", "sha256": "0" * 64},
        "target": "cpu-local", "precision": "fp32", "recipe": "test", "format": "onnx", "model_file": "model.onnx",
        "toolchain": {"name": "onnxruntime", "version": "test"}, **tensors, "calibration": None, "accuracy": None,
        "graph_cost": None, "engine": None,
    })  # fmt: skip
    return vdir


@pytest.fixture(scope="module")
def variants(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("variants")
    return {
        TEXT: make_variant(root / TEXT, TEXT, True),
        NUMERIC: make_variant(root / NUMERIC, NUMERIC, False),
    }


def transport(repo: Path, name: str) -> str:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    config = text_format.Parse((repo / name / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    return config.parameters["tensor_transport"].string_value


def test_the_writer_picks_dlpack_unless_a_tensor_is_bytes_or_numpy_is_asked_for(variants, tmp_path):
    write_repository(list(variants.values()), tmp_path / "a", "local")
    assert (transport(tmp_path / "a", NUMERIC), transport(tmp_path / "a", TEXT)) == ("dlpack", "numpy")
    assert numpy_bridge_models(tmp_path / "a", [NUMERIC, TEXT]) == [TEXT]
    write_repository([variants[NUMERIC]], tmp_path / "b", "local", {"tensor_transport": "numpy"})
    assert numpy_bridge_models(tmp_path / "b", [NUMERIC]) == [NUMERIC]
    with pytest.raises(BadInputError, match="text, echo are BYTES tensors"):
        write_repository([variants[TEXT]], tmp_path / "c", "local", {"tensor_transport": "dlpack"})


def stub_pids(server: LocalTriton) -> list[psutil.Process]:
    children = psutil.Process(server.pid).children(recursive=True)
    return [p for p in children if "triton_python_backend_stub" in " ".join(p.cmdline())]


@pytest.mark.slow
def test_bytes_and_numeric_tensors_cross_the_stub_exactly_in_its_environment(variants, tmp_path):
    """One server, a BYTES model (numpy bridge) beside a DLPack one: both run in the stub's environment, the
    DLPack model taking the bridge there (a numpy 1 array handed to from_dlpack would crash the stub)."""
    repo = tmp_path / "repo"
    write_repository(list(variants.values()), repo, "local", {"intra_op_threads": 1})
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    with LocalTriton(repo) as server:
        client = thttp.InferenceServerClient(server.http_address)
        try:
            inputs = [thttp.InferInput("x", [4, 3], "FP32"), thttp.InferInput("text", [4, 1], "BYTES")]
            inputs[0].set_data_from_numpy(x)
            inputs[1].set_data_from_numpy(STRINGS)
            got = client.infer(TEXT, inputs)
            assert got.as_numpy("echo").tolist() == STRINGS.tolist()  # bytes back, lengths and all
            np.testing.assert_array_equal(got.as_numpy("y"), x + x)
            got = client.infer(NUMERIC, inputs[:1])
            np.testing.assert_array_equal(got.as_numpy("y"), x + x)
            inputs[1].set_data_from_numpy(np.array([[b"\xff"]] * 4, dtype=object))
            with pytest.raises(InferenceServerException, match="bad input: 'utf-8' codec"):
                client.infer(TEXT, inputs)  # that request's own error; the instance goes on
            inputs[1].set_data_from_numpy(STRINGS)
            assert client.infer(TEXT, inputs).as_numpy("echo").tolist() == STRINGS.tolist()
        finally:
            client.close()
        for stub in stub_pids(server):  # under numpy 2 each stub ran with the stub environment first on PATH
            first = stub.environ()["PATH"].split(os.pathsep)[0]
            assert (first == str(stub_env_dir() / "bin")) != numpy_bridge_ok(), first


def serve(repo: Path, cache: Path) -> tuple[subprocess.Popen, int]:
    """``accelbench serve`` with ``cache`` as accelbench's cache (empty: no stub environment there)."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), ACCELBENCH_CACHE_DIR=str(cache))
    cmd = [sys.executable, "-m", "accelbench.cli", "serve", str(repo), "--http-port", str(port),
           "--grpc-port", str(free_port()), "--metrics-port", str(free_port())]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # fmt: skip
    return proc, port


@pytest.mark.slow
@pytest.mark.skipif(numpy_bridge_ok(), reason="this environment's numpy < 2 serves the numpy bridge itself")
def test_without_the_stub_environment_bridge_models_are_refused_and_dlpack_ones_serve(variants, tmp_path):
    write_repository(list(variants.values()), tmp_path / "mixed", "local")
    proc, _ = serve(tmp_path / "mixed", tmp_path / "empty-cache")
    _, err = proc.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert proc.returncode == 3 and len(lines) == 1, err
    assert TEXT in lines[0] and "numpy<2" in lines[0] and "python -m accelbench.serving.install" in lines[0]

    write_repository([variants[NUMERIC]], tmp_path / "dlpack", "local")
    proc, port = serve(tmp_path / "dlpack", tmp_path / "empty-cache")
    try:
        line = proc.stdout.readline()
        while line and not line.startswith("READY"):
            line = proc.stdout.readline()
        assert NUMERIC in line, proc.stderr.read()[-2000:]
        x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
        request = thttp.InferInput("x", [2, 3], "FP32")
        request.set_data_from_numpy(x)
        client = thttp.InferenceServerClient(f"127.0.0.1:{port}")
        np.testing.assert_array_equal(client.infer(NUMERIC, [request]).as_numpy("y"), x + x)
        client.close()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)


@pytest.mark.slow
def test_the_stub_environment_holds_numpy_1_and_sees_this_environments_packages(tmp_path):
    env = build_stub_env(tmp_path / "stub-env")
    assert build_stub_env(env) == env  # built once
    python = env / "bin" / "python"
    probe = "import numpy, onnxruntime; print(numpy.__version__); print(numpy.__file__); print(onnxruntime.__file__)"
    version, numpy_file, ort_file = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert version.startswith("1.") and numpy_file.startswith(str(env)), (STUB_NUMPY, version, numpy_file)
    import onnxruntime

    assert ort_file == onnxruntime.__file__  # everything but numpy is this environment's
