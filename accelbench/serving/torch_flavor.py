"""Planning for the ``torch-cuda`` repository flavor: a python-backend model that runs the variant's ONNX graph
with PyTorch on the GPU (``torch_model.py`` → ``model.py``, with ``onnx_torch.py`` and ``torch_runner.py``
copied beside it), for targets whose server has PyTorch but no TensorRT or onnxruntime-gpu.

Pure: turns the manifest, the target's defaults and the overrides into config parameters and the file list.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError

DEVICES = ("cuda", "cpu")
TORCH_MODES = ("cuda_graphs", "compile", "eager")
TORCH_DTYPES = ("bfloat16", "float16", "float32")
# the variant's precision names the compute dtype; int8 has no torch path here (the QDQ graph would run in float)
_PRECISION_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# files beside model.py: the stub runs it with the server's python, where accelbench need not be installed
RUNTIME_FILES = ("onnx_torch.py", "torch_runner.py")


def check_torch_overrides(overrides: dict) -> None:
    """Bad values of the flavor's own overrides: one message that lists the allowed ones."""
    for key, allowed in (("device", DEVICES), ("dtype", TORCH_DTYPES), ("torch_mode", TORCH_MODES)):
        value = overrides.get(key)
        if value is not None and value not in allowed:
            raise BadInputError(f"serving override {key}={value!r}: expected one of {', '.join(allowed)}")


def torch_dtype(manifest: VariantManifest, overrides: dict) -> str:
    if overrides.get("dtype"):
        return str(overrides["dtype"])
    precision = manifest.precision
    if precision not in _PRECISION_DTYPE:
        raise BadInputError(
            f"variant {manifest.name!r} is {precision}: the torch-cuda flavor serves fp32, fp16 or bf16 "
            "variants (quantize with --precision fp16), or pass --set dtype=bfloat16"
        )
    return _PRECISION_DTYPE[precision]


def static_dims(io: Any, shapes: dict[str, tuple[int, ...]]) -> dict[str, list[int]] | None:
    """Every input's non-batch dims with -1 taken from the reference inputs; None when one stays unknown
    (then the model runs eager: a CUDA graph needs fixed shapes)."""
    out: dict[str, list[int]] = {}
    for spec in io.inputs:
        ref = shapes.get(spec.name, ())[1:]
        dims = [d if d > 0 else (ref[i] if i < len(ref) else -1) for i, d in enumerate(spec.dims)]
        if any(d <= 0 for d in dims):
            return None
        out[spec.name] = dims
    return out


def buckets(max_batch_size: int, preferred: tuple[int, ...]) -> list[int]:
    """Batch sizes captured as CUDA graphs: powers of two, the preferred sizes and the maximum. A batch pads
    up to the next one, so padding never doubles the work."""
    if max_batch_size <= 0:
        return []
    powers = {1 << i for i in range(max_batch_size.bit_length()) if 1 << i <= max_batch_size}
    return sorted(powers | {max_batch_size} | {int(b) for b in preferred if 0 < int(b) <= max_batch_size})


def torch_params(
    manifest: VariantManifest,
    io: Any,
    shapes: dict,
    defaults: Any,
    overrides: dict,
    device_default: str,
    threads: int,
) -> dict[str, str]:
    """The config.pbtxt parameters that ``model.py`` reads (all string values)."""
    device = str(overrides.get("device") or device_default)
    max_batch = 0 if io.full else int(overrides.get("max_batch_size", defaults.max_batch_size))
    preferred = tuple(overrides.get("preferred_batch_sizes", defaults.preferred_batch_sizes))
    dims = static_dims(io, shapes)
    params = {
        "device": device,
        "dtype": torch_dtype(manifest, overrides),
        "torch_mode": str(overrides.get("torch_mode") or "cuda_graphs"),
        "batch_buckets": ",".join(str(b) for b in buckets(max_batch, preferred)),
        "static_dims": json.dumps(dims, sort_keys=True, separators=(",", ":")) if dims else "",
        # model.py never hands the stub a numpy array; the server start reads this to allow numpy 2
        "tensor_transport": "dlpack",
    }
    if device == "cpu":
        params["intra_op_num_threads"] = str(threads)
    return params


def instance_kind(overrides: dict, defaults: Any) -> str:
    """device=cpu without an explicit instance_kind runs on KIND_CPU (KIND_GPU fails to load without a GPU)."""
    if overrides.get("instance_kind"):
        return str(overrides["instance_kind"])
    return "KIND_CPU" if overrides.get("device") == "cpu" else defaults.instance_kind


def copies(onnx_file: Path) -> tuple[tuple[Path, str], ...]:
    package = resources.files("accelbench.serving")
    files = [(onnx_file, "1/model.onnx"), (Path(str(package / "torch_model.py")), "1/model.py")]
    files += [(Path(str(package / name)), f"1/{name}") for name in RUNTIME_FILES]
    return tuple(files)
