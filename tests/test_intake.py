"""Graph intake and the recipe fallback on graphs shaped like real exporters' output.

``paddle_like`` is what paddle2onnx writes (issue 16): opset 12, every weight a Constant node, dynamic batch
and spatial dimensions. The corpus tests (test_corpus.py) run the same paths on the real files.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelbench.errors import BadInputError
from accelbench.models import intake
from accelbench.models.graph_cost import graph_cost
from accelbench.models.intake import check_onnx_file
from accelbench.models.toolchains import VariantOptions, attempts
from accelbench.models.toolchains import onnxruntime as ort_tc
from tests.conftest import ACCELBENCH


def _const(name: str, array: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name))


def paddle_like(opset: int = 12) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = rng.normal(size=(16, 3, 3, 3)).astype(np.float32)
    b = rng.normal(size=(16,)).astype(np.float32)
    w2 = rng.normal(size=(16, 4)).astype(np.float32)
    nodes = [
        _const("w", w),
        _const("b", b),
        _const("w2", w2),
        _const("shape", np.array([0, -1], dtype=np.int64)),
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Reshape", ["g", "shape"], ["f"]),
        helper.make_node("MatMul", ["f", "w2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["prob"], axis=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["p2o.DynamicDimension.0", 3, "h", "w"])
    y = helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["p2o.DynamicDimension.1", 4])
    graph = helper.make_graph(nodes, "paddle_like", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="")
    model.ir_version = 7
    return model


WEIGHTS = 16 * 3 * 3 * 3 + 16 + 16 * 4  # float Constant tensors; the int64 Reshape shape is not a weight


def test_constant_weights_count_as_weights():
    model = paddle_like()
    assert not model.graph.initializer
    assert intake.weight_elements(model) == WEIGHTS
    cost = graph_cost(model, 1, "fp32", {"x": [-1, 3, 16, 16]})
    assert cost.params == WEIGHTS
    assert cost.weight_bytes == 4 * WEIGHTS  # every weight is read by a Conv or MatMul
    assert cost.flops_per_inference > 2 * 16 * 16 * 16 * 27
    assert "Constant" not in cost.by_op_type  # promoted, not counted as nodes


def test_promote_constants_keeps_a_constant_that_is_a_graph_output():
    node = _const("out", np.ones(3, dtype=np.float32))
    y = helper.make_tensor_value_info("out", TensorProto.FLOAT, [3])
    model = helper.make_model(helper.make_graph([node], "g", [], [y]))
    assert intake.promote_constants(model) == 0 and len(model.graph.node) == 1


def test_scalar_and_list_constant_attributes_are_tensors():
    floats = helper.make_node("Constant", [], ["a"], value_floats=[1.0, 2.0, 3.0])
    ints = helper.make_node("Constant", [], ["b"], value_ints=[1, 2])
    assert numpy_helper.to_array(intake.constant_tensor(floats)).tolist() == [1.0, 2.0, 3.0]
    assert intake.constant_tensor(ints).data_type == TensorProto.INT64


def test_opset_upgrade_and_its_failure_is_one_line():
    model = paddle_like(12)
    assert intake.opset(intake.upgrade_opset(model, 13)) == 13
    broken = paddle_like(12)
    broken.graph.node.append(helper.make_node("NoSuchOp", ["prob"], ["z"]))
    with pytest.raises(BadInputError, match=r"^opset 12 → 13 upgrade failed: .+") as err:
        intake.upgrade_opset(broken, 13)
    assert "\n" not in str(err.value)


def _feed(n: int = 4, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(size=(1, 3, 16, 16)).astype(np.float32)} for _ in range(n)]


def test_per_channel_qdq_on_opset12_is_upgraded_and_loads(tmp_path):
    src = tmp_path / "paddle.onnx"
    onnx.save(paddle_like(12), src)
    options = VariantOptions(
        calibration=_feed(), work_dir=tmp_path / "work", input_shapes={"x": [-1, 3, 16, 16]}
    )
    record = ort_tc.run_recipe("ort-static-qdq-int8", src, tmp_path / "q.onnx", options)
    assert record["per_channel"] is True
    quantized = onnx.load(str(tmp_path / "q.onnx"))
    assert intake.opset(quantized) >= 13
    axes = [a for n in quantized.graph.node if n.op_type == "DequantizeLinear" for a in n.attribute]
    assert any(a.name == "axis" for a in axes)  # per-channel weights really were written
    attempts.check_variant(tmp_path / "q.onnx", _feed(1)[0])


def test_the_issue_16_failure_is_caught_and_the_next_recipe_tried(tmp_path):
    """Per-channel QDQ written into an opset-12 graph (what accelbench did before) fails at session creation
    ("Unrecognized attribute: axis"); the attempt is recorded and the per-tensor recipe serves instead."""
    src = tmp_path / "paddle.onnx"
    onnx.save(paddle_like(12), src)
    pre = ort_tc.preprocess(src, tmp_path / "pre.onnx", symbolic=False)
    dst = tmp_path / "model.onnx"
    options = VariantOptions(calibration=_feed(), work_dir=tmp_path / "work")

    def make(recipe):
        if recipe == "old-per-channel-without-upgrade":
            return ort_tc.quantize_qdq(pre, dst, options.calibration, symmetric=False, per_channel=True)
        return ort_tc.run_recipe(recipe, src, dst, options)

    recipes = ("old-per-channel-without-upgrade", "ort-static-qdq-int8-per-tensor")
    recipe, record, tried = attempts.try_in_order(recipes, make, dst, _feed(1)[0], "test")
    assert recipe == "ort-static-qdq-int8-per-tensor" and record["per_channel"] is False
    assert [a["outcome"] for a in tried] == ["failed", "ok"]
    assert "axis" in tried[0]["reason"] and "\n" not in tried[0]["reason"]


def test_no_recipe_works_is_one_line_and_recorded(tmp_path):
    def make(recipe):
        raise RuntimeError(f"{recipe} broke\nwith a second line")

    with pytest.raises(BadInputError) as err:
        attempts.try_in_order(("a", "b"), make, tmp_path / "model.onnx", None, "int8 of m")
    assert (
        str(err.value) == "int8 of m: no recipe worked (a: RuntimeError: a broke; b: RuntimeError: b broke)"
    )
    recorded = json.loads((tmp_path / attempts.ATTEMPTS_FILE).read_text())
    assert [(a["recipe"], a["outcome"]) for a in recorded] == [("a", "failed"), ("b", "failed")]


def test_fallback_chain():
    assert attempts.chain("ort-static-qdq-int8", None) == (
        "ort-static-qdq-int8",
        "ort-static-qdq-int8-per-tensor",
        "ort-dynamic-int8",
    )
    assert attempts.chain("ort-static-qdq-int8", "ort-dynamic-int8") == ("ort-dynamic-int8",)
    # TensorRT reads symmetric QDQ only, so its fallbacks stay symmetric
    assert attempts.chain("qdq-int8-symmetric", None) == (
        "qdq-int8-symmetric",
        "qdq-int8-symmetric-per-tensor",
    )


def test_tensorrt_recipe_on_opset12_is_symmetric_and_upgraded(tmp_path):
    src = tmp_path / "paddle.onnx"
    onnx.save(paddle_like(12), src)
    options = VariantOptions(calibration=_feed(), work_dir=tmp_path / "work")
    record = ort_tc.run_recipe("qdq-int8-symmetric-per-tensor", src, tmp_path / "q.onnx", options)
    assert record["per_channel"] is False
    model = onnx.load(str(tmp_path / "q.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    zero_points = [inits[n.input[2]] for n in model.graph.node if n.op_type == "QuantizeLinear"]
    assert zero_points and all(int(z.max()) == 0 and z.dtype == np.int8 for z in zero_points)
    attempts.check_variant(tmp_path / "q.onnx", _feed(1)[0])


@pytest.fixture
def external_model(tmp_path):
    """A small model saved the way a >2 GB model must be: every tensor in an external data file."""
    model = paddle_like(13)
    intake.promote_constants(model)
    path = tmp_path / "src" / "big.onnx"
    path.parent.mkdir()
    onnx.save_model(model, str(path), save_as_external_data=True, location="big.weights", size_threshold=100)
    assert intake.has_external_data(onnx.load(str(path), load_external_data=False))
    return path


@pytest.mark.slow
def test_external_data_model_is_loaded_counted_and_quantized(external_model, tmp_path):
    from accelbench.models.graph_shapes import _run_shapes

    check_onnx_file(external_model)
    assert graph_cost(external_model, 1, "fp32", {"x": [-1, 3, 16, 16]}).params == WEIGHTS
    # the run that measures shapes ONNX inference cannot resolve loads the data where it lies
    assert _run_shapes(external_model, 2, {"x": [-1, 3, 16, 16]})["c"][0] == (2, 16, 16, 16)
    card = tmp_path / "big.toml"
    subprocess.run([ACCELBENCH, "models", "card", str(external_model), "--shape", "x:1,3,16,16", "--out", str(card)],
                   check=True, capture_output=True)  # fmt: skip
    out = tmp_path / "variants"
    run = subprocess.run([ACCELBENCH, "quantize", str(card), "--target", "cpu-local", "--precision", "int8",
                          "--out", str(out), "--json"], capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    fp32, int8 = json.loads(run.stdout)
    assert int8["accuracy"]["verdict"] in ("PASS", "FAIL") and int8["attempts"][-1]["outcome"] == "ok"
    # the FP32 copy keeps its tensors beside it, under the variant's own name, and loads from there
    assert "model.onnx.data" in fp32["files"]
    attempts.check_variant(out / fp32["name"] / "model.onnx", _feed(1)[0])
    # and the Triton repository carries the data file beside the model it serves
    from accelbench.serving.repository import write_repository

    repo = tmp_path / "repo"
    write_repository([out / fp32["name"]], repo, "local")
    served = repo / fp32["name"] / "1" / "model.onnx"
    assert (served.parent / "model.onnx.data").is_file()
    attempts.check_variant(served, _feed(1)[0])


def test_the_float_tail_is_what_follows_the_last_compute_op():
    model = paddle_like()
    for i, node in enumerate(model.graph.node):
        node.name = f"{node.op_type}_{i}"
    # Softmax follows the last MatMul; Reshape and Relu feed it, so they are quantized
    assert ort_tc.float_tail(model) == ["Softmax_9"]


def test_a_graph_onnxruntime_cannot_load_is_one_line(tmp_path):
    """The ONNX checker accepts an op from an unknown domain; ONNX Runtime does not: one line, exit 2."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph([node], "g", [x], [y])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10  # what this onnxruntime reads (onnx writes newer ones by default)
    onnx.save(model, tmp_path / "custom.onnx")
    run = subprocess.run([ACCELBENCH, "quantize", str(tmp_path / "custom.onnx"), "--target", "cpu-local",
                          "--precision", "int8", "--out", str(tmp_path / "v")], capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 2
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("accelbench: error: ONNX Runtime cannot load ") and "Frobnicate" in last, last
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("attempts_value", "message"),
    [
        ("ok", "field 'attempts': Input should be a valid list"),
        ([{"recipe": "r", "outcome": "ok"}], "field 'attempts[0].reason': Field required"),
        (
            [{"recipe": "r", "outcome": "maybe", "reason": ""}],
            "field 'attempts[0].outcome': Input should be 'ok' or 'failed'",
        ),
    ],
)
def test_manifest_attempts_are_checked(tmp_path, attempts_value, message):
    from accelbench.documents import to_dict
    from accelbench.models.manifest import write_manifest
    from tests.test_manifest import minimal_manifest

    with pytest.raises(BadInputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        write_manifest(tmp_path, minimal_manifest(attempts=attempts_value))
    good = [{"recipe": "ort-static-qdq-int8", "outcome": "failed", "reason": "x"}]
    assert [to_dict(a) for a in write_manifest(tmp_path, minimal_manifest(attempts=good)).attempts] == good
