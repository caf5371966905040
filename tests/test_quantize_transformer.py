"""Transformer QDQ recipe: node roles, SmoothQuant's exactness in float, TensorRT's default on builtin:minilm-l6."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from accelbench.cli import main
from accelbench.documents import to_dict
from accelbench.models.accuracy import run_onnx_cpu
from accelbench.models.inputs import make_inputs
from accelbench.models.loader import resolve_model
from accelbench.models.manifest import read_manifest
from accelbench.models.toolchains import onnxruntime as ort_tc
from accelbench.models.toolchains import tensorrt as trt_tc
from accelbench.models.toolchains import transformer_qdq as tq

pytestmark = pytest.mark.slow  # each test quantizes or runs a six-layer encoder (seconds of CPU)


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    resolved = resolve_model("builtin:minilm-l6")
    pre = ort_tc.preprocess(resolved.onnx_path, tmp_path_factory.mktemp("pre") / "pre.onnx")
    return resolved, pre, onnx.load(str(pre))


def test_node_roles_on_six_layer_encoder(minilm):
    _, _, model = minilm
    ffn_out, ffn_in = tq.gelu_fed_matmuls(model), tq.ffn_in_matmuls(model)
    assert len(tq.weight_matmuls(model)) == 36 and len(tq.attention_matmuls(model)) == 12
    assert len(ffn_out) == 6 and len(ffn_in) == 6 and not set(ffn_out) & set(ffn_in)
    producer = {o: n for n in model.graph.node for o in n.output}
    for name in tq.context_matmuls(model):  # softmax·V: one input comes straight from the Softmax
        node = next(n for n in model.graph.node if n.name == name)
        assert any(producer[t].op_type == "Softmax" for t in node.input if t in producer)
    excluded = tq.exclusions(model)
    assert sorted(excluded.values()).count(tq.REASON_CONTEXT) == 6
    assert [n for n, r in excluded.items() if r == tq.REASON_FFN_OUT] == ffn_out


def test_smooth_quant_is_exact_in_float(minilm, tmp_path):
    resolved, pre, model = minilm
    feeds = make_inputs(resolved.card, batch_size=1, count=4, seed=3)
    smoothed = tq.smooth_quant(pre, tmp_path / "sq.onnx", tq.ffn_in_matmuls(model), feeds)
    assert len(smoothed) == 6
    out = onnx.load(str(tmp_path / "sq.onnx"))
    assert sum(n.name.endswith("_SmoothQuant") for n in out.graph.node) == 6
    batch = {k: np.concatenate([f[k] for f in feeds]) for k in feeds[0]}
    ref, got = run_onnx_cpu(pre, batch), run_onnx_cpu(tmp_path / "sq.onnx", batch)
    for name, value in ref.items():  # x·W = (x/s)·(s·W): only rounding may differ
        np.testing.assert_allclose(got[name], value, rtol=1e-3, atol=1e-4)
    weights = {i.name for i in out.graph.initializer}
    assert not any(
        n.input[1] in weights and "smoothquant" not in n.input[1]
        for n in out.graph.node
        if n.name in smoothed
    )


def test_tensorrt_int8_default_for_transformers_is_smoothquant(tmp_path):
    assert trt_tc.default_recipe("int8", "transformer") == "qdq-int8-symmetric-smoothquant"
    assert trt_tc.default_recipe("int8", "cnn") == "qdq-int8-symmetric"
    args = ["quantize", "builtin:minilm-l6", "--target", "l4", "--precision", "int8", "--out", str(tmp_path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    folder = tmp_path / "minilm-l6__l4__int8"
    m = read_manifest(folder)
    cal = to_dict(m.calibration)
    assert m.recipe == "qdq-int8-symmetric-smoothquant" and cal["samples"] > 0 and cal["seed"] == 0
    assert cal["method"] == "Percentile" and cal["smoothquant"]["alpha"] == tq.SMOOTHQUANT_ALPHA
    assert (cal["matmuls"], cal["quantized_matmuls"]) == (48, 36) and len(cal["excluded_nodes"]) == 12
    model = onnx.load(str(folder / "model.onnx"))
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    qdq = [n for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    zero_points = [inits[n.input[2]] for n in qdq if len(n.input) > 2]
    assert zero_points and all(zp.dtype == np.int8 and not zp.any() for zp in zero_points)
    quantized = {
        n.name
        for n in model.graph.node
        if n.op_type == "MatMul" and any(t.endswith("DequantizeLinear_Output") for t in n.input)
    }
    assert quantized and not quantized & set(cal["excluded_nodes"])
    assert m.accuracy.verdict in ("PASS", "FAIL") and m.accuracy.value is not None
