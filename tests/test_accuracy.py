"""Accuracy metrics (tables + hypothesis properties) and the gate on a real ONNX model with ORT."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from onnx import TensorProto, helper

from accelbench.errors import BadInputError
from accelbench.models.accuracy import (
    compare,
    cosine_similarity,
    gate,
    max_abs_error,
    not_run,
    read_reference,
    top1_agreement,
    verdict,
    write_reference,
)

finite = st.floats(-1e3, 1e3, allow_nan=False, width=32)
vectors = arrays(np.float32, st.tuples(st.integers(1, 5), st.integers(2, 16)), elements=finite)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([[1, 0]], [[1, 0]], [1.0]),
        ([[1, 0]], [[0, 1]], [0.0]),
        ([[1, 0]], [[-1, 0]], [-1.0]),
        ([[3, 4]], [[6, 8]], [1.0]),
        ([[0, 0]], [[0, 0]], [1.0]),  # both zero: identical
        ([[0, 0]], [[1, 0]], [0.0]),
        ([[1, 1], [1, 0]], [[1, 1], [1, 1]], [1.0, np.sqrt(0.5)]),
    ],
)
def test_cosine_table(a, b, expected):
    np.testing.assert_allclose(
        cosine_similarity(np.array(a, float), np.array(b, float)), expected, atol=1e-12
    )


def test_cosine_is_per_vector_on_last_axis():
    a = np.ones((2, 3, 4))
    b = a.copy()
    b[1, 2] = -1
    cos = cosine_similarity(a, b)
    assert cos.shape == (6,)
    assert cos.min() == pytest.approx(-1.0)
    assert compare("cosine", a, b) == (pytest.approx(4 / 6), pytest.approx(-1.0))


@given(vectors)
def test_cosine_with_itself_is_one(x):
    nonzero = np.linalg.norm(x.astype(np.float64), axis=1) > 0
    np.testing.assert_allclose(cosine_similarity(x, x)[nonzero], 1.0, atol=1e-9)


@given(vectors, st.data())
def test_cosine_symmetric_and_bounded(x, data):
    y = data.draw(arrays(np.float32, x.shape, elements=finite))
    np.testing.assert_allclose(cosine_similarity(x, y), cosine_similarity(y, x), atol=1e-12)
    assert np.all(np.abs(cosine_similarity(x, y)) <= 1.0)


@settings(max_examples=50)
@given(vectors, st.data(), st.floats(1e-2, 1e2))
def test_cosine_scale_invariant(x, data, scale):
    y = data.draw(arrays(np.float32, x.shape, elements=finite))
    big_enough = (np.linalg.norm(x.astype(np.float64), axis=1) > 1e-3) & (
        np.linalg.norm(y.astype(np.float64), axis=1) > 1e-3
    )
    np.testing.assert_allclose(
        cosine_similarity(x.astype(np.float64) * scale, y)[big_enough],
        cosine_similarity(x, y)[big_enough],
        atol=1e-9,
    )


@pytest.mark.parametrize(
    ("ref", "cand", "expected"),
    [
        ([[0.1, 0.9], [0.8, 0.2]], [[0.2, 0.7], [0.6, 0.4]], 1.0),
        ([[0.1, 0.9], [0.8, 0.2]], [[0.9, 0.1], [0.6, 0.4]], 0.5),
        ([[0.1, 0.9], [0.8, 0.2]], [[0.9, 0.1], [0.1, 0.4]], 0.0),
    ],
)
def test_top1_table(ref, cand, expected):
    assert top1_agreement(np.array(ref), np.array(cand)) == expected


def test_max_abs_and_verdicts():
    assert max_abs_error(np.array([1.0, 2.0]), np.array([1.5, 1.0])) == 1.0
    assert verdict("cosine", 0.995, 0.99) == "PASS"
    assert verdict("cosine", 0.985, 0.99) == "FAIL"
    assert verdict("top1", 0.95, 0.95) == "PASS"
    assert verdict("max_abs", 0.0, 0.0) == "PASS"
    assert verdict("max_abs", 1e-3, 1e-4) == "FAIL"
    assert verdict("cosine", float("nan"), 0.99) == "FAIL"
    assert not_run("cosine", 0.99, "a TensorRT plan")["verdict"] == "NOT_RUN"


def test_compare_rejects_shape_mismatch_and_unknown_metric():
    with pytest.raises(BadInputError, match="shapes differ"):
        compare("cosine", np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(BadInputError, match="unknown accuracy metric"):
        compare("bleu", np.ones(2), np.ones(2))


def _scale_model(path, factor):
    """y = x * factor, a real ONNX model for the gate."""
    node = helper.make_node("Mul", ["x", "k"], ["y"])
    graph = helper.make_graph(
        [node],
        "scale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor("k", TensorProto.FLOAT, [4], factor)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    return path


def test_gate_passes_scaled_and_fails_distorted(tmp_path):
    x = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)
    ref = {"y": x}
    scaled = _scale_model(tmp_path / "scaled.onnx", [2.0] * 4)  # cosine ignores scale
    distorted = _scale_model(tmp_path / "distorted.onnx", [1.0, -1.0, 1.0, 0.0])
    good = gate(scaled, {"x": x}, ref, "cosine", 0.99, "y")
    assert good["verdict"] == "PASS" and good["value"] == pytest.approx(1.0) and good["samples"] == 10
    bad = gate(distorted, {"x": x}, ref, "cosine", 0.99, "y")
    assert bad["verdict"] == "FAIL" and bad["worst"] < 0.9
    assert gate(scaled, {"x": x}, ref, "max_abs", 1e-3, "y")["verdict"] == "FAIL"
    with pytest.raises(BadInputError, match="not among the model outputs"):
        gate(scaled, {"x": x}, ref, "cosine", 0.99, "z")


def test_reference_round_trip(tmp_path):
    inputs = {"x": np.arange(6, dtype=np.float32).reshape(3, 2)}
    outputs = {"y": np.ones((3, 5), np.float32)}
    write_reference(tmp_path, inputs, outputs)
    back_in, back_out = read_reference(tmp_path)
    np.testing.assert_array_equal(back_in["x"], inputs["x"])
    np.testing.assert_array_equal(back_out["y"], outputs["y"])
    assert sorted(p.name for p in (tmp_path / "reference").iterdir()) == ["inputs.npz", "outputs.npz"]
    with pytest.raises(BadInputError):
        read_reference(tmp_path / "nowhere")
