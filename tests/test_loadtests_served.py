"""``accelbench loadtest --url U --model M`` on a model accelbench did not build: a python-backend model with a
dynamic dimension and a BYTES input, written here, served by the real tritonserver, load-tested through the
CLI with zero, random and perf_analyzer-JSON data; payload building and its bad inputs without a server."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from accelbench.errors import BadInputError
from accelbench.loadtests.served import ServedModel, ServedTensor, make_payloads, parse_shapes
from accelbench.serving import LocalTriton
from tests.test_manifest import variant_manifest

ACCELBENCH = str(Path(sys.executable).parent / "accelbench")
MODEL = "their_model"

MODEL_PY = textwrap.dedent("""
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
                text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
                total = x.sum(axis=1, keepdims=True).astype(np.float32)
                lengths = np.array([[len(t) for t in row] for row in text], dtype=np.int32)
                responses.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("SUM", total), pb_utils.Tensor("LEN", lengths),
                    pb_utils.Tensor("ECHO", text.astype(np.object_)),
                ]))
            return responses
""")
CONFIG = textwrap.dedent("""
    name: "their_model"
    backend: "python"
    max_batch_size: 4
    input [
      { name: "X" data_type: TYPE_FP32 dims: [ -1 ] },
      { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] }
    ]
    output [
      { name: "SUM" data_type: TYPE_FP32 dims: [ 1 ] },
      { name: "LEN" data_type: TYPE_INT32 dims: [ 1 ] },
      { name: "ECHO" data_type: TYPE_STRING dims: [ 1 ] }
    ]
    instance_group [ { kind: KIND_CPU count: 1 } ]
""")
SERVED = ServedModel(
    MODEL, 4, (ServedTensor("X", "FP32", (-1,)), ServedTensor("TEXT", "BYTES", (1,))),
    (ServedTensor("SUM", "FP32", (1,)),),
)  # fmt: skip


@pytest.fixture(scope="module")
def triton(tmp_path_factory):
    repo = tmp_path_factory.mktemp("their_repo")
    (repo / MODEL / "1").mkdir(parents=True)
    (repo / MODEL / "1" / "model.py").write_text(MODEL_PY)
    (repo / MODEL / "config.pbtxt").write_text(CONFIG)
    with LocalTriton(repo) as server:
        yield server


def _loadtest(triton, out: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [ACCELBENCH, "loadtest", "--url", triton.http_url, "--grpc-url", triton.grpc_url, "--model", MODEL,
           "--concurrency", "2",
           "--duration", "1", "--warmup", "0.3", "--out", str(out), "--check-every", "3", "--json", *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_model_accelbench_did_not_build_with_zero_random_and_file_data(triton, tmp_path, protocol):
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": [
        {"X": {"content": [1.0, 2.0, 3.0], "shape": [3]}, "TEXT": ["héllo"]},
        {"X": {"content": [4.0, 5.0, 6.0], "shape": [3]}, "TEXT": {"content": ["a"], "shape": [1]}},
    ]}))  # fmt: skip
    for data_args in (["--input-data", "zero", "--shape", "X:5"], ["--input-data", "random", "--shape", "X:7"],
                      ["--input-data", str(data), "--batch", "2"]):  # fmt: skip
        run = _loadtest(triton, tmp_path / data_args[1].replace("/", "_"), "--protocol", protocol, *data_args)
        assert run.returncode == 0, run.stderr[-2000:]
        doc = json.loads(run.stdout)
        step = doc["steps"][0]
        assert sum(step["errors"].values()) == 0, step["last_error"]
        # every request we counted, the server counted as a success (no one-sided errors)
        assert step["requests"] == step["server_stats"]["success_count"] > 0
        assert doc["load_profile"]["input_data"] == data_args[1] and doc["load_profile"]["check_every"] == 3


@pytest.mark.slow
def test_a_foreign_result_is_priced_only_with_target_and_precision(triton, tmp_path):
    """Without --target/--precision the result cannot be priced: the report says so in one line, or lists it
    as left out beside priced results; with them the same server's result gets a cost row."""
    bare = _loadtest(triton, tmp_path / "bare", "--input-data", "zero", "--shape", "X:4")
    assert bare.returncode == 0, bare.stderr[-2000:]
    assert json.loads(bare.stdout)["target"] is None
    report = subprocess.run([ACCELBENCH, "report", str(tmp_path / "bare"), "--out", str(tmp_path / "r0")],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    lines = report.stderr.strip().splitlines()
    assert report.returncode == 2 and len(lines) == 1, report.stderr
    assert "no result document names the target and precision" in lines[0] and "--target ID" in lines[0]

    told = _loadtest(triton, tmp_path / "told", "--input-data", "zero", "--shape", "X:4",
                     "--target", "cpu-local", "--precision", "fp32")  # fmt: skip
    assert told.returncode == 0, told.stderr[-2000:]
    doc = json.loads(told.stdout)
    assert (doc["target"], doc["precision"]) == ("cpu-local", "fp32")
    (tmp_path / "told" / "bare.json").write_text((next((tmp_path / "bare").glob("*.json"))).read_text())
    report = subprocess.run([ACCELBENCH, "report", str(tmp_path / "told"), "--out", str(tmp_path / "r1")],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert report.returncode == 0, report.stderr[-2000:]
    md = (tmp_path / "r1" / "report.md").read_text()
    with open(tmp_path / "r1" / "results.csv", newline="") as table:
        rows = list(csv.DictReader(table))
    assert [
        (r["model"], r["target"], r["precision"], r["status"]) for r in rows if r["status"] == "measured"
    ] == [(MODEL, "cpu-local", "fp32", "measured")]  # the told run has its cost row; the bare one has none
    assert "Left out, not priced (1:" in md and "no target or precision" in md


@pytest.mark.slow
def test_a_dynamic_dimension_without_shape_is_one_line(triton, tmp_path):
    run = _loadtest(triton, tmp_path, "--input-data", "zero")
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "dynamic shape [-1]" in lines[0] and "--shape X:8" in lines[0], run.stderr


@pytest.mark.slow
def test_a_wrong_expectation_is_caught_on_every_answer(triton, tmp_path):
    # a manifest that promises a float16 SUM: the served model answers float32, every answer is wrong
    manifest = tmp_path / "manifest.json"
    outputs = [{"name": "SUM", "dtype": "float16", "shape": [-1, 1]}]
    manifest.write_text(json.dumps({"schema": "accelbench.variant/1", "name": MODEL, "outputs": outputs}))
    from accelbench.loadtests.api import measure
    from accelbench.loadtests.profiles import LoadProfile
    from accelbench.loadtests.sweep import SweepOptions

    # every answer is wrong, so no latency sample counts towards the floor: capped, or the step runs 60 s
    profile = LoadProfile(kind="closed", protocol="http", levels=(1,), duration_s=1.0, warmup_s=0.2,
                          max_duration_s=2.0, input_data="zero", shapes=("X:2",))  # fmt: skip
    doc, _ = measure(
        triton,
        model=MODEL,
        profile=profile,
        options=SweepOptions(tmp_path, manifest=variant_manifest(name=MODEL, outputs=outputs)),
    )
    step = doc.steps[0]
    assert step.errors.wrong_output == step.requests > 0
    assert "dtype float32, expected float16" in step.last_error


def test_payloads_from_metadata_zero_random_and_file(tmp_path):
    zero = make_payloads(SERVED, 2, 64, 0, "zero", {"X": (3,)})
    assert len(zero) == 1 and zero[0]["X"].shape == (2, 3) and not zero[0]["X"].any()
    assert zero[0]["TEXT"].dtype == object and zero[0]["TEXT"].shape == (2, 1)
    random = make_payloads(SERVED, 1, 8, 5, "random", {"X": (4,)})
    assert len(random) == 8 and random[0]["X"].dtype == np.float32
    assert make_payloads(SERVED, 1, 8, 5, "random", {"X": (4,)})[3]["TEXT"][0, 0] == random[3]["TEXT"][0, 0]
    data = tmp_path / "d.json"
    data.write_text(json.dumps({"data": [{"X": [1, 2], "TEXT": ["a"]}, {"X": [3, 4], "TEXT": ["bc"]},
                                         {"X": [5, 6], "TEXT": ["d"]}]}))  # fmt: skip
    # no --shape needed when the entries carry their shape; flat content takes it from --shape
    batches = make_payloads(SERVED, 2, 64, 0, str(data), {"X": (2,)})
    assert len(batches) == 2  # 3 entries in batches of 2, wrapping around
    assert batches[1]["X"].tolist() == [[5, 6], [1, 2]] and batches[0]["TEXT"].tolist() == [[b"a"], [b"bc"]]


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (lambda p: make_payloads(SERVED, 1, 4, 0, "zero", {}), "dynamic shape [-1]; give its size with --shape X:8"),
        (lambda p: make_payloads(SERVED, 8, 4, 0, "zero", {"X": (2,)}), "above model their_model's max_batch_size 4"),
        (lambda p: make_payloads(SERVED, 1, 4, 0, "zero", {"X": (2, 2)}), "does not fit its dims [-1]"),
        (lambda p: make_payloads(SERVED, 1, 4, 0, "zero", {"Y": (2,)}), "model their_model has inputs"),
        (lambda p: make_payloads(SERVED, 1, 4, 0, str(p / "nope.json"), {}), "no such file"),
        (lambda p: make_payloads(SERVED, 1, 4, 0, str(_write(p, "{")), {}), "not a JSON data file"),
        (lambda p: make_payloads(SERVED, 1, 4, 0, str(_write(p, '{"data": [{"X": [1]}]}')), {"X": (1,)}),
         "input 'TEXT' is missing"),
        (lambda p: make_payloads(SERVED, 1, 4, 0, str(_write(p, '{"data": [[{"X": [1]}]]}')), {}), "sequence"),
        (lambda p: make_payloads(SERVED, 1, 4, 0, str(_write(p, '{"data": [{"X": [1, 2, 3], "TEXT": ["a"]}]}')),
                                 {"X": (2,)}), "input 'X'"),
        (lambda p: parse_shapes(["X:0"]), "expected NAME:D1,D2"),
        (lambda p: parse_shapes(["X"]), "expected NAME:D1,D2"),
        (lambda p: make_payloads(ServedModel("u", 0, (), ()), 2, 4, 0, "zero", {}), "does not batch"),
    ],
)  # fmt: skip
def test_bad_payload_inputs_are_one_clear_error(tmp_path, call, text):
    with pytest.raises(BadInputError) as err:
        call(tmp_path)
    assert text in str(err.value) and "\n" not in str(err.value)


def _write(folder: Path, text: str) -> Path:
    path = folder / "data.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("manifest", "target", "precision", "text"),
    [
        (None, "l4", None, "--target and --precision go together"),
        (None, None, "int8", "--target and --precision go together"),
        (("l4", "int8"), "l40s", "int8", "--target l40s differs from the variant manifest's target l4"),
        (("l4", "int8"), "l4", "fp16", "--precision fp16 differs from the variant manifest's precision int8"),
    ],
)  # fmt: skip
def test_target_and_precision_are_checked_before_any_server_starts(
    tmp_path, manifest, target, precision, text
):
    from accelbench.loadtests import api

    if manifest is not None:
        manifest = variant_manifest(target=manifest[0], precision=manifest[1])
    with pytest.raises(BadInputError, match=text):
        api._check_where(manifest, target, precision)
    api._check_where(manifest, None, None)  # nothing given: nothing to check
