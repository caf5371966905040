"""Built-in benchmark models: they build, cache atomically and run in real onnxruntime with finite outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from accelbench.errors import BadInputError
from accelbench.models.builtin import build_builtin, builtin_onnx_path
from accelbench.models.cards import load_card
from accelbench.models.inputs import make_inputs

EXPECTED_OUTPUTS = {
    "identity": {"y": (2, 16)},
    "minilm-l6": {"token_embeddings": (2, 128, 384), "sentence_embedding": (2, 384)},
    "bert-base": {"last_hidden_state": (2, 128, 768), "pooler_output": (2, 768)},
    "resnet50": {"logits": (2, 1000)},
}


def _session(name: str) -> ort.InferenceSession:
    return ort.InferenceSession(str(builtin_onnx_path(name)), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("name", list(EXPECTED_OUTPUTS))
@pytest.mark.slow
def test_builtin_runs_with_finite_outputs_matching_its_card(name: str) -> None:
    card = load_card(f"builtin:{name}")
    session = _session(name)
    assert [i.name for i in session.get_inputs()] == [t.name for t in card.inputs]
    assert [o.name for o in session.get_outputs()] == [t.name for t in card.outputs]
    assert session.get_inputs()[0].shape[0] == "batch"
    feeds = make_inputs(card, batch_size=2, count=1, seed=0)[0]
    outputs = dict(zip(EXPECTED_OUTPUTS[name], session.run(list(EXPECTED_OUTPUTS[name]), feeds), strict=True))
    for out_name, shape in EXPECTED_OUTPUTS[name].items():
        assert outputs[out_name].shape == shape
        assert np.isfinite(outputs[out_name]).all()
    if name != "identity":  # random weights must still give inputs-dependent, non-degenerate outputs
        other = session.run(None, make_inputs(card, batch_size=2, count=1, seed=1)[0])
        assert not np.allclose(other[0], session.run(None, feeds)[0])


def test_identity_is_identity() -> None:
    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    assert np.array_equal(_session("identity").run(["y"], {"x": x})[0], x)


def test_minilm_sentence_embedding_is_normalised_and_ignores_padding() -> None:
    card = load_card("builtin:minilm-l6")
    feeds = make_inputs(card, batch_size=4, count=1, seed=5)[0]
    session = _session("minilm-l6")
    emb = session.run(["sentence_embedding"], feeds)[0]
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
    assert (feeds["attention_mask"] == 0).any()
    changed = dict(feeds)
    changed["input_ids"] = np.where(feeds["attention_mask"] == 0, 2000, feeds["input_ids"])
    np.testing.assert_allclose(session.run(["sentence_embedding"], changed)[0], emb, atol=1e-5)


def test_resnet50_params_and_ops() -> None:
    model = onnx.load(str(builtin_onnx_path("resnet50")))
    ops = {n.op_type for n in model.graph.node}
    assert ops == {"Conv", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Flatten", "Gemm"}
    assert model.opset_import[0].version == 17
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    assert 25.4e6 < params < 25.7e6  # 25.6 M published, BatchNorm folded into conv biases

    # v1.5: the first bottleneck of stages 2-4 strides in its 3x3 conv, not its 1x1
    def attr(node: onnx.NodeProto, name: str) -> tuple[int, ...]:
        return tuple(next(a.ints for a in node.attribute if a.name == name))

    strided = [n for n in model.graph.node if n.op_type == "Conv" and attr(n, "strides") == (2, 2)]
    kernels = sorted(attr(n, "kernel_shape") for n in strided)
    assert kernels == [(1, 1)] * 3 + [(3, 3)] * 3 + [(7, 7)]


def test_cache_is_reused_and_written_atomically(tmp_path: Path) -> None:
    path = builtin_onnx_path("identity", cache_dir=tmp_path)
    assert path.parent == tmp_path and path.name.startswith("identity-") and path.suffix == ".onnx"
    stamp = path.stat().st_mtime_ns
    assert builtin_onnx_path("identity", cache_dir=tmp_path) == path
    assert path.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temp files left behind
    onnx.checker.check_model(str(path))


@pytest.mark.slow
def test_build_is_deterministic_and_rejects_unknown_names() -> None:
    assert build_builtin("minilm-l6").SerializeToString() == build_builtin("minilm-l6").SerializeToString()
    with pytest.raises(BadInputError, match="unknown built-in model 'gpt2'; available: identity, minilm-l6"):
        build_builtin("gpt2")
