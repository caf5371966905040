"""`accelbench validate` on recorded real Jetson outputs, with the onnxruntime CPU stand-in for TensorRT.

The variant folders are real: an ONNX model, reference data written by the models stage's own writer, and a
manifest written by ``write_manifest``. Only the Jetson itself is recorded (tegrastats, nv_tegra_release,
nvpmodel -q, jetson_clocks --show, the device-tree model string).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from accelbench.cli import main
from accelbench.errors import BadInputError
from accelbench.experiment.validate import STANDIN_NOTE, JetsonInputs, validate_variant, write_junit
from accelbench.models.accuracy import write_reference
from accelbench.models.manifest import write_manifest

DATA = Path(__file__).parent / "data" / "experiment"
TARGET = "jetson-agx-orin-64gb"
GOOD = JetsonInputs(
    nv_tegra_release=str(DATA / "nv_tegra_release_r36.4.3.txt"),
    device_model=str(DATA / "device_tree_model_agx_orin.txt"),
    nvpmodel=str(DATA / "nvpmodel_q_maxn.txt"),
    jetson_clocks=str(DATA / "jetson_clocks_show_agx_orin_64gb_jp5.txt"),
    tegrastats=str(DATA / "tegrastats_agx_orin_64gb_jp5.txt"),
)


def _variant(tmp_path: Path, *, perturb: float = 0.0, requirement=None) -> Path:
    """A linear model y = x @ W (16 -> 8) made for the AGX Orin; ``perturb`` spoils its weights vs FP32."""
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((16, 8)).astype(np.float32)
    served = weight + perturb * rng.standard_normal(weight.shape).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [numpy_helper.from_array(served, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    vdir = tmp_path / f"linear__{TARGET}__int8"
    vdir.mkdir(parents=True)
    onnx.save(model, vdir / "model.onnx")
    x = rng.standard_normal((32, 16)).astype(np.float32)
    write_reference(vdir, {"x": x}, {"y": x @ weight})
    write_manifest(
        vdir,
        {
            "name": vdir.name,
            "model": "linear",
            "card": {"name": "linear", "accuracy": {"metric": "cosine", "tolerance": 0.99, "output": "y"}},
            "source": {"uri": "onnx:linear.onnx", "sha256": "0" * 64},
            "target": TARGET,
            "precision": "int8",
            "recipe": "qdq-int8-symmetric",
            "format": "onnx",
            "model_file": "model.onnx",
            "toolchain": {"name": "onnxruntime", "version": "test"},
            "inputs": [{"name": "x", "dtype": "float32", "shape": [-1, 16]}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": [-1, 8]}],
            "calibration": None,
            "accuracy": None,
            "graph_cost": None,
            "engine": {
                "status": "must-build-on-target",
                "script": "build_engine.sh",
                "host_requirement": requirement
                if requirement is not None
                else {"l4t": "36.4", "jetpack": "6.2"},
            },
        },
    )
    return vdir


def _status(verdict, name):
    return next(c.status for c in verdict.checks if c.name == name)


def test_good_recorded_sample_passes(tmp_path):
    verdict = validate_variant(
        _variant(tmp_path), TARGET, inputs=GOOD, latency_budget_ms=1000, request_count=50
    )
    assert verdict.passed, verdict.reasons
    for name in ("host", "versions", "engine load", "outputs", "latency", "memory"):
        assert _status(verdict, name) == "PASS", name
    assert STANDIN_NOTE in verdict.notes
    assert verdict.measurements["power_mode"]["nvpmodel"] == {"name": "MAXN", "id": 0}
    assert verdict.measurements["power_mode"]["jetson_clocks"]["pinned_to_max"] is False
    energy = verdict.measurements["energy"]
    assert energy["mean_power_mw"] == 2399 + 400 + 4032 + 301  # sum of AGX Orin rails in that sample
    assert energy["joules_per_inference"] > 0 and "recorded tegrastats" in energy["source"]
    assert verdict.measurements["accuracy"]["value"] == pytest.approx(1.0)


def test_failures_are_each_named(tmp_path):
    bad = JetsonInputs(
        **{**GOOD.__dict__, "nv_tegra_release": str(DATA / "nv_tegra_release_r35.3.1_first_line.txt")}
    )
    verdict = validate_variant(
        _variant(tmp_path, perturb=2.0), TARGET, inputs=bad, latency_budget_ms=1e-6, request_count=20
    )
    assert not verdict.passed
    reasons = "\n".join(verdict.reasons)
    assert "versions: l4t 35.3.1 on this host, variant built for 36.4" in reasons
    assert "jetpack 5.1.1 on this host, variant built for 6.2" in reasons
    assert "outputs: cosine" in reasons and "outside >= 0.99" in reasons
    assert "latency: p99" in reasons and "over budget" in reasons
    assert len(verdict.reasons) == 3  # host, memory, engine load still pass


def test_version_requirement_as_text(tmp_path):
    vdir = _variant(tmp_path, requirement="a Jetson AGX Orin with JetPack 6.2 (L4T R36.4.3), TensorRT 10.3")
    verdict = validate_variant(vdir, TARGET, inputs=GOOD, request_count=20)
    assert _status(verdict, "versions") == "PASS"
    assert any("TensorRT not importable here; variant wants TensorRT 10.3" in n for n in verdict.notes)
    assert _status(verdict, "latency") == "INFO"  # no budget given: recorded, not judged


def test_memory_of_the_wrong_module_and_a_full_one(tmp_path):
    small = JetsonInputs(
        **{**GOOD.__dict__, "tegrastats": str(DATA / "tegrastats_agx_orin_32gb_jp6_r36_datadog.txt")}
    )
    verdict = validate_variant(_variant(tmp_path), TARGET, inputs=small, request_count=20)
    assert any(r.startswith("memory:") and "wrong module" in r for r in verdict.reasons)
    # the same recorded sample on the module it came from: 29114 of 30697 MB used is over the 90 % limit
    full = validate_variant(
        _variant(tmp_path / "b"),
        "jetson-agx-orin-32gb",
        inputs=small,
        request_count=20,
        catalog_path=str(DATA / "catalog_agx_orin_32gb.toml"),
    )
    assert any(r.startswith("memory: peak RAM 29114 MB") and "over the 90 % limit" in r for r in full.reasons)


def test_not_a_jetson_and_another_module(tmp_path):
    nano = JetsonInputs(**{**GOOD.__dict__, "nv_tegra_release": None})
    verdict = validate_variant(_variant(tmp_path), TARGET, inputs=nano, request_count=20)
    if not Path("/etc/nv_tegra_release").exists():
        assert any(r.startswith("host: not a Jetson") for r in verdict.reasons)
    other = tmp_path / "model.txt"
    other.write_text("NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super\n")
    verdict = validate_variant(
        _variant(tmp_path / "c"),
        TARGET,
        inputs=JetsonInputs(**{**GOOD.__dict__, "device_model": str(other)}),
        request_count=20,
    )
    assert any("not a Jetson AGX Orin" in r for r in verdict.reasons)


def test_bad_input_is_an_error_not_a_verdict(tmp_path):
    with pytest.raises(BadInputError, match="validate is for Jetson targets"):
        validate_variant(_variant(tmp_path), "l4", inputs=GOOD)
    with pytest.raises(BadInputError, match="no variant manifest"):
        validate_variant(tmp_path / "nothing", TARGET, inputs=GOOD)


def test_cli_json_and_junit(tmp_path):
    vdir = _variant(tmp_path)
    junit = tmp_path / "validate.xml"
    args = ["validate", "--target", TARGET, str(vdir), "--json", "--junit", str(junit), "--requests", "20",
            "--latency-budget-ms", "1000", "--tegrastats", GOOD.tegrastats, "--nv-tegra-release", GOOD.nv_tegra_release,
            "--nvpmodel", GOOD.nvpmodel, "--jetson-clocks", GOOD.jetson_clocks, "--device-model", GOOD.device_model]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["verdict"] == "PASS" and STANDIN_NOTE in doc["notes"]
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("failures") == "0"
    assert {c.get("name") for c in suite.iter("testcase")} >= {
        "host",
        "versions",
        "outputs",
        "latency",
        "memory",
    }

    fail = CliRunner().invoke(main, [*args, "--latency-budget-ms", "0.000001"])  # the last value wins
    assert fail.exit_code == 1
    assert json.loads(fail.output)["verdict"] == "FAIL"
    assert ET.parse(junit).getroot().get("failures") == "1"
    text = CliRunner().invoke(
        main,
        [
            "validate",
            "--target",
            TARGET,
            str(vdir),
            "--requests",
            "20",
            "--nv-tegra-release",
            GOOD.nv_tegra_release,
        ],
    )
    assert STANDIN_NOTE in text.output


def test_junit_lists_every_failure(tmp_path):
    bad = JetsonInputs(
        **{**GOOD.__dict__, "nv_tegra_release": str(DATA / "nv_tegra_release_r32.7.6_nano_first_line.txt")}
    )
    verdict = validate_variant(_variant(tmp_path, perturb=2.0), TARGET, inputs=bad, request_count=20)
    write_junit(verdict, tmp_path / "j.xml")
    failures = [f.get("message") for f in ET.parse(tmp_path / "j.xml").getroot().iter("failure")]
    assert len(failures) == len(verdict.reasons) == 2
