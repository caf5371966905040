"""Built-in benchmark models built with onnx.helper: no download, no torch, weights from a fixed seed.

``build_builtin(name)`` returns the ModelProto; ``builtin_onnx_path(name)`` builds it once and caches the file
under ``~/.cache/accelbench/builtin/<name>-<version-hash>.onnx`` (``ACCELBENCH_CACHE_DIR`` or
``XDG_CACHE_HOME`` move it). The hash covers the builder source, so changing a builder makes a new file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import onnx

from accelbench.errors import BadInputError
from accelbench.models.builtin._graph import BATCH_DIM, FLOAT, GraphBuilder
from accelbench.models.builtin.resnet import build_resnet50
from accelbench.models.builtin.transformer import BERT_BASE, MINILM_L6, build_encoder
from accelbench.util import atomic_write_bytes

SEED = 20261129
IDENTITY_WIDTH = 16


def _build_identity(name: str, seed: int) -> onnx.ModelProto:
    g = GraphBuilder(seed)
    g.op("Identity", ["x"], output="y")
    return g.model(
        name, [("x", FLOAT, [BATCH_DIM, IDENTITY_WIDTH])], [("y", FLOAT, [BATCH_DIM, IDENTITY_WIDTH])]
    )


_BUILDERS: dict[str, Callable[[str, int], onnx.ModelProto]] = {
    "identity": _build_identity,
    "minilm-l6": lambda name, seed: build_encoder(name, MINILM_L6, seed),
    "bert-base": lambda name, seed: build_encoder(name, BERT_BASE, seed),
    "resnet50": build_resnet50,
}
BUILTIN_NAMES: tuple[str, ...] = tuple(_BUILDERS)


def _check_name(name: str) -> None:
    if name not in _BUILDERS:
        raise BadInputError(f"unknown built-in model {name!r}; available: {', '.join(BUILTIN_NAMES)}")


def build_builtin(name: str) -> onnx.ModelProto:
    """Build the built-in model ``name`` in memory (bert-base is ~440 MB of FP32 weights)."""
    _check_name(name)
    return _BUILDERS[name](name, SEED)


def builtin_version(name: str) -> str:
    """12 hex digits identifying the builder code and seed that make ``name``."""
    _check_name(name)
    digest = hashlib.sha256(f"{name}:{SEED}".encode())
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:12]


def default_cache_dir() -> Path:
    if env := os.environ.get("ACCELBENCH_CACHE_DIR"):
        return Path(env) / "builtin"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "accelbench" / "builtin"


def builtin_onnx_path(name: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Path of the cached ONNX file for ``name``, building it first if it is not there yet."""
    path = Path(cache_dir or default_cache_dir()) / f"{name}-{builtin_version(name)}.onnx"
    if not path.is_file():
        # Atomic: a concurrent builder or a reader never sees half a file; the content is deterministic,
        # so two racing builders write identical bytes.
        atomic_write_bytes(path, build_builtin(name).SerializeToString())
    return path
