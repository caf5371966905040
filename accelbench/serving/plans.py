"""What planning one Triton model produces and starts from, shared by the flavours' planners: the plan
(``ModelPlan``), the per-target defaults (``ServingDefaults``) and numpy → Triton data type names.

Below ``repository.py``, ``pbconfig.py`` and ``llm_repository.py``, so each imports it at module level.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError

_NUMPY_TO_TRITON = {
    "bool": "TYPE_BOOL",
    "uint8": "TYPE_UINT8",
    "uint16": "TYPE_UINT16",
    "uint32": "TYPE_UINT32",
    "uint64": "TYPE_UINT64",
    "int8": "TYPE_INT8",
    "int16": "TYPE_INT16",
    "int32": "TYPE_INT32",
    "int64": "TYPE_INT64",
    "float16": "TYPE_FP16",
    "float32": "TYPE_FP32",
    "float64": "TYPE_FP64",
    "bfloat16": "TYPE_BF16",
    "object": "TYPE_STRING",
    "bytes": "TYPE_STRING",
    "str": "TYPE_STRING",
}


@dataclass(frozen=True)
class ServingDefaults:
    """Per-target Triton defaults; the catalog's ``triton`` block fills these, overrides replace them."""

    instance_kind: str = "KIND_CPU"
    instance_count: int = 1
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0
    max_batch_size: int = 8
    intra_op_threads: int = 0  # 0: cores / instances


@dataclass(frozen=True)
class ModelPlan:
    """What to write for one variant: the config message and the files to copy (source -> relative dest)."""

    name: str
    config: Any  # tritonclient.grpc.model_config_pb2.ModelConfig
    copies: tuple[tuple[Path, str], ...]
    backend: str
    notes: tuple[str, ...] = ()


def triton_dtype(numpy_dtype: str) -> str:
    """Config ``data_type`` name for a numpy dtype name."""
    try:
        return _NUMPY_TO_TRITON[str(numpy_dtype)]
    except KeyError:
        raise BadInputError(
            f"dtype {numpy_dtype!r} has no Triton type; known: {', '.join(sorted(_NUMPY_TO_TRITON))}"
        ) from None
