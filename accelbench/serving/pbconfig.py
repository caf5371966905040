"""Build Triton ``ModelConfig`` protobuf messages (tritonclient's generated module) per backend."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError
from accelbench.serving.plans import triton_dtype


def pb_module() -> Any:
    """tritonclient's generated ``model_config_pb2`` (imported when a config is built, not with this module)."""
    from tritonclient.grpc import model_config_pb2

    return model_config_pb2


@dataclass(frozen=True)
class TensorSpec:
    name: str
    data_type: str  # TYPE_FP32 ...
    dims: tuple[int, ...]  # without the batch dimension
    warmup_dims: tuple[int, ...]  # dims with every -1 made concrete
    batch_dim: int = -1  # the manifest's first dimension, listed only when the model does not batch


@dataclass(frozen=True)
class IoSpec:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    # a model that cannot batch on the first axis: max_batch_size 0 and every dims the whole tensor
    full: bool = False
    fixed_values: tuple[str, ...] = ()  # inputs the card gives a value: zero warmup data would be wrong

    @property
    def scalar_inputs(self) -> tuple[str, ...]:
        """Graph scalars of a model that does not batch: declared ``dims: [1]``, reshaped by model.py."""
        return tuple(s.name for s in self.inputs if self.full and not s.dims)

    @classmethod
    def from_manifest(
        cls, manifest: VariantManifest, shapes: dict[str, tuple[int, ...]] | None = None, batched: bool = True
    ) -> IoSpec:
        """Manifest ``inputs``/``outputs`` (first dim is the batch) → specs without the batch dim; not
        ``batched``: specs of the whole tensors (``shapes`` then are the reference's ``[runs, *run shape]``)."""
        shapes = shapes or {}
        if not batched:
            return cls._full(manifest, shapes)

        def specs(key: str) -> tuple[TensorSpec, ...]:
            entries = getattr(manifest, key)
            if not entries:
                raise BadInputError(f"variant {manifest.name!r}: manifest lists no {key}")
            out = []
            for entry in entries:
                shape = [int(d) for d in entry.shape or [-1]]
                dims = tuple(shape[1:])
                ref = shapes.get(entry.name, ())[1:]
                warm = tuple(
                    d if d > 0 else (ref[i] if i < len(ref) and ref[i] > 0 else 1) for i, d in enumerate(dims)
                )
                out.append(TensorSpec(entry.name, triton_dtype(entry.dtype), dims, warm, shape[0]))
            return tuple(out)

        return cls(specs("inputs"), specs("outputs"))

    @classmethod
    def _full(cls, manifest: VariantManifest, shapes: dict[str, tuple[int, ...]]) -> IoSpec:
        def specs(key: str) -> tuple[TensorSpec, ...]:
            out = []
            for entry in getattr(manifest, key):
                dims = tuple(int(d) for d in entry.shape)
                ref = shapes.get(entry.name, ())[1:]
                warm = tuple(d if d > 0 else (ref[i] if i < len(ref) else 1) for i, d in enumerate(dims))
                out.append(TensorSpec(entry.name, triton_dtype(entry.dtype), dims, warm))
            if not out:
                raise BadInputError(f"variant {manifest.name!r}: manifest lists no {key}")
            return tuple(out)

        values = tuple(e.name for e in manifest.inputs if e.value is not None)
        return cls(specs("inputs"), specs("outputs"), full=True, fixed_values=values)


def _base(name: str, io: IoSpec, defaults: Any, overrides: dict) -> Any:
    pb = pb_module()
    config = pb.ModelConfig(name=name)
    config.max_batch_size = 0 if io.full else int(overrides.get("max_batch_size", defaults.max_batch_size))
    batched = config.max_batch_size > 0
    for spec in io.inputs:
        tensor = config.input.add(name=spec.name, data_type=pb.DataType.Value(spec.data_type))
        if io.full and not spec.dims:  # Triton has no scalars without batching: [1], model.py reshapes
            tensor.dims.append(1)
            continue
        _set_dims(tensor, spec.dims if batched or io.full else (spec.batch_dim, *spec.dims))
    for spec in io.outputs:
        tensor = config.output.add(name=spec.name, data_type=pb.DataType.Value(spec.data_type))
        _set_dims(tensor, spec.dims if batched or io.full else (spec.batch_dim, *spec.dims))
    if config.max_batch_size > 0:
        batching = config.dynamic_batching
        batching.SetInParent()  # "dynamic_batching { }" even with nothing else set
        preferred = overrides.get("preferred_batch_sizes", defaults.preferred_batch_sizes)
        batching.preferred_batch_size.extend(int(b) for b in preferred if int(b) <= config.max_batch_size)
        delay = int(overrides.get("max_queue_delay_us", defaults.max_queue_delay_us))
        if delay:
            batching.max_queue_delay_microseconds = delay
    kind = overrides.get("instance_kind", defaults.instance_kind)
    count = int(overrides.get("instance_count", defaults.instance_count))
    config.instance_group.add(kind=pb.ModelInstanceGroup.Kind.Value(kind), count=max(count, 1))
    if overrides.get("warmup", True) and not io.fixed_values:  # zeros for a sample rate would be wrong
        _add_warmup(config, io)
    return config


def _set_dims(tensor: Any, dims: tuple[int, ...]) -> None:
    if dims:
        tensor.dims.extend(dims)
    else:  # a batch-only tensor: Triton forbids empty dims, so [1] reshaped to []
        tensor.dims.append(1)
        tensor.reshape.SetInParent()


def _add_warmup(config: Any, io: IoSpec) -> None:
    pb = pb_module()
    sizes = sorted({1, config.max_batch_size} - {0})
    for size in sizes:
        warmup = config.model_warmup.add(name=f"zeros_b{size}", batch_size=size, count=1)
        for spec in io.inputs:
            data = warmup.inputs[spec.name]
            data.data_type = pb.DataType.Value(spec.data_type)
            dims = spec.warmup_dims if config.max_batch_size > 0 or io.full else (1, *spec.warmup_dims)
            data.dims.extend(dims or (1,))
            data.zero_data = True


def threads(defaults: Any, overrides: dict) -> int:
    threads = int(overrides.get("intra_op_threads", defaults.intra_op_threads))
    if threads > 0:
        return threads
    count = max(int(overrides.get("instance_count", defaults.instance_count)), 1)
    return max(1, (os.cpu_count() or 1) // count)


def _param(config: Any, key: str, value: str) -> None:
    config.parameters[key].string_value = value


def _scalars(config: Any, io: IoSpec) -> None:
    if io.scalar_inputs:
        _param(config, "scalar_inputs", ",".join(io.scalar_inputs))


def local_config(name: str, io: IoSpec, defaults: Any, overrides: dict) -> Any:
    """Python backend running ``model.onnx`` through onnxruntime (accelbench's ``model.py``)."""
    config = _base(name, io, defaults, overrides)
    config.backend = "python"
    _param(config, "onnx_file", "model.onnx")
    _scalars(config, io)
    _param(config, "intra_op_num_threads", str(threads(defaults, overrides)))
    _param(config, "device", "auto")
    _param(config, "tensor_transport", local_transport(name, io, overrides))
    return config


def local_transport(name: str, io: IoSpec, overrides: dict) -> str:
    """``dlpack`` (no tensor crosses the stub's numpy bridge, so numpy 2 is fine in the stub) unless a BYTES
    tensor needs that bridge or ``--set tensor_transport=numpy`` asks for it (docs/serving.md)."""
    strings = [s.name for s in io.inputs + io.outputs if s.data_type == "TYPE_STRING"]
    wanted = overrides.get("tensor_transport")
    if wanted == "dlpack" and strings:
        raise BadInputError(
            f"{name}: tensor_transport=dlpack, but {', '.join(strings)} are BYTES tensors and DLPack has no strings"
        )
    return "numpy" if strings else str(wanted or "dlpack")


def torch_config(name: str, io: IoSpec, defaults: Any, overrides: dict, torch_params: dict[str, str]) -> Any:
    """Python backend running ``model.onnx`` with PyTorch (the torch-cuda flavor's ``model.py``)."""
    config = _base(name, io, defaults, overrides)
    config.backend = "python"
    _param(config, "onnx_file", "model.onnx")
    _scalars(config, io)
    for key, value in torch_params.items():
        _param(config, key, value)
    return config


def onnxruntime_config(
    name: str,
    io: IoSpec,
    defaults: Any,
    overrides: dict,
    *,
    trt_precision: str | None,
    model_root: str,
) -> Any:
    """Native onnxruntime backend; on GPU targets the TensorRT accelerator at ``trt_precision``."""
    if io.scalar_inputs:
        raise BadInputError(
            f"{name}: Triton has no scalar inputs for a model that does not batch ({', '.join(io.scalar_inputs)}) "
            "and its onnxruntime backend cannot reshape [1] to []; serve it with the local or torch-cuda flavor"
        )
    config = _base(name, io, defaults, overrides)
    config.backend = "onnxruntime"
    config.platform = "onnxruntime_onnx"
    kind = overrides.get("instance_kind", defaults.instance_kind)
    if kind == "KIND_CPU" and overrides.get("intra_op_threads"):
        # only when asked: the writing host's core count says nothing about the target's
        _param(config, "intra_op_thread_count", str(overrides["intra_op_threads"]))
    if trt_precision:
        accel = config.optimization.execution_accelerators.gpu_execution_accelerator.add(name="tensorrt")
        accel.parameters["precision_mode"] = trt_precision
        accel.parameters["max_workspace_size_bytes"] = str(4 << 30)
        accel.parameters["trt_engine_cache_enable"] = "1"
        accel.parameters["trt_engine_cache_path"] = f"{model_root.rstrip('/')}/{name}/trt_cache"
    return config


def tensorrt_config(name: str, io: IoSpec, defaults: Any, overrides: dict) -> Any:
    """Native tensorrt backend for an engine built on (an identical) target."""
    config = _base(name, io, defaults, overrides)
    config.backend = "tensorrt"
    config.platform = "tensorrt_plan"
    return config
