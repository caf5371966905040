"""Triton python-backend model written by accelbench (torch-cuda flavor): runs model.onnx with PyTorch.

The ONNX graph runs through accelbench's small ONNX->torch interpreter (onnx_torch.py, copied beside this
file) on the GPU in bf16/fp16, each batch size captured once as a CUDA graph (torch_runner.py, also beside
this file). Tensors cross the stub through DLPack both ways, never through numpy: the stub's numpy bridge
is built for numpy 1 and corrupts tensors under numpy 2, which is what the GPU machine has.
The dynamic batch of requests is concatenated into one call and split back per request.
Parameters (config.pbtxt, string values): onnx_file, device (cuda|cpu), dtype (bfloat16|float16|float32),
torch_mode (cuda_graphs|compile|eager), batch_buckets ("1,16,32"), static_dims (JSON: input -> dims without
the batch), intra_op_num_threads (CPU only; 0: torch's default), tensor_transport (always "dlpack").
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from types import ModuleType
from typing import Any

import torch
import triton_python_backend_utils as pb_utils
from torch.utils.dlpack import from_dlpack, to_dlpack

Feed = dict[str, torch.Tensor]  # input name -> the tensor the runner gets

_TORCH_TYPES = {
    "TYPE_FP32": torch.float32,
    "TYPE_FP16": torch.float16,
    "TYPE_BF16": torch.bfloat16,
    "TYPE_FP64": torch.float64,
    "TYPE_INT64": torch.int64,
    "TYPE_INT32": torch.int32,
    "TYPE_INT16": torch.int16,
    "TYPE_INT8": torch.int8,
    "TYPE_UINT8": torch.uint8,
    "TYPE_BOOL": torch.bool,
}
# ONNX TensorProto element types -> config data types, to check config.pbtxt against the graph at load
_ONNX_TYPES = {
    1: "TYPE_FP32",
    2: "TYPE_UINT8",
    3: "TYPE_INT8",
    5: "TYPE_INT16",
    6: "TYPE_INT32",
    7: "TYPE_INT64",
    9: "TYPE_BOOL",
    10: "TYPE_FP16",
    11: "TYPE_FP64",
    16: "TYPE_BF16",
}


def _sibling(version_dir: str, name: str) -> ModuleType:
    """Import NAME.py from the version folder by path: the stub only appends it to sys.path, so an
    installed module of the same name would otherwise win."""
    spec = importlib.util.spec_from_file_location(
        f"_accelbench_{name}", os.path.join(version_dir, f"{name}.py")
    )
    if spec is None or spec.loader is None:
        raise ValueError(f"{name}.py is missing beside model.py in {version_dir}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _check_io(config: dict[str, Any], graph: Any) -> None:
    """Fail the load with a clear reason when config.pbtxt and the ONNX graph disagree."""
    for key, tensors in (("input", graph.input), ("output", graph.output)):
        found = {t.name: _ONNX_TYPES.get(t.type.tensor_type.elem_type, "?") for t in tensors}
        for entry in config.get(key, []):
            name, declared = entry["name"], entry["data_type"]
            if name not in found:
                raise ValueError(
                    f"{key} {name!r} of config.pbtxt is not in the ONNX graph (it has {sorted(found)})"
                )
            if declared not in _TORCH_TYPES:
                raise ValueError(f"{key} {name!r} is {declared}: DLPack carries numeric tensors only")
            if found[name] != declared:
                raise ValueError(
                    f"{key} {name!r} is {declared} in config.pbtxt but {found[name]} in the ONNX graph"
                )


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        import onnx

        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        onnx_torch = _sibling(version_dir, "onnx_torch")
        torch_runner = _sibling(version_dir, "torch_runner")
        device = params.get("device") or "cuda"
        if device == "cuda":
            if not torch.cuda.is_available():
                raise ValueError("device=cuda but torch sees no GPU (torch.cuda.is_available() is False)")
            if args.get("model_instance_kind") == "GPU":  # the GPU Triton gave this instance
                device = f"cuda:{int(args.get('model_instance_device_id') or 0)}"
            torch.cuda.set_device(torch.device(device))
        elif int(params.get("intra_op_num_threads") or 0) > 0:
            torch.set_num_threads(int(params["intra_op_num_threads"]))
        dtype = torch_runner.DTYPES[params.get("dtype") or "float32"]
        model = onnx.load(os.path.join(version_dir, params.get("onnx_file") or "model.onnx"))
        _check_io(config, model.graph)
        interpreter = onnx_torch.OnnxTorch(model, device, dtype)
        self.input_names = [i["name"] for i in config["input"]]
        self.outputs = [(o["name"], _TORCH_TYPES[o["data_type"]]) for o in config["output"]]
        self.batched = int(config.get("max_batch_size", 0)) > 0
        # reshape { shape: [] } on a batch-only input: Triton sends [B, 1], the ONNX graph wants [B]
        self.reshape = {i["name"]: tuple(i["reshape"]["shape"]) for i in config["input"] if "reshape" in i}
        # graph scalars of a model that does not batch: Triton sends [1] (it has no scalars there)
        self.scalars = set((params.get("scalar_inputs") or "").split(",")) - {""}
        static = json.loads(params.get("static_dims") or "null") if self.batched else None
        buckets = [int(b) for b in (params.get("batch_buckets") or "").split(",") if b.strip()]
        self.runner = torch_runner.BucketRunner(
            lambda feeds: interpreter(feeds),
            static_dims={k: tuple(v) for k, v in static.items()} if static else None,
            input_dtypes={i["name"]: _TORCH_TYPES[i["data_type"]] for i in config["input"]},
            buckets=buckets,
            device=device,
            dtype=dtype,
            mode=params.get("torch_mode") or "cuda_graphs",
        )
        for note in self.runner.notes:
            pb_utils.Logger.log_info(f"{args['model_name']}: {note}")
        captured = [b.size for b in self.runner.buckets if b.captured]
        pb_utils.Logger.log_info(
            f"{args['model_name']}: torch {torch.__version__} on {device} in {dtype}, mode {self.runner.mode}, "
            f"buckets {[b.size for b in self.runner.buckets]}, CUDA graphs {captured}"
        )

    def execute(self, requests: list[pb_utils.InferenceRequest]) -> list[pb_utils.InferenceResponse | None]:
        feeds: list[Feed] = []
        for request in requests:
            feed: Feed = {}
            for name in self.input_names:
                given = pb_utils.get_input_tensor_by_name(request, name)
                if given is None:  # Triton refuses a request without a required input before execute
                    raise ValueError(f"no input {name!r}")
                tensor = from_dlpack(given.to_dlpack())
                if name in self.scalars:
                    tensor = tensor.reshape(())
                if name in self.reshape:
                    lead = (tensor.shape[0],) if self.batched else ()  # max_batch_size 0: the whole shape
                    tensor = tensor.reshape(lead + self.reshape[name])
                feed[name] = tensor
            feeds.append(feed)
        responses: list[pb_utils.InferenceResponse | None] = [None] * len(requests)
        for indices in self._groups(feeds):
            self._run_group(indices, feeds, responses)
        return responses

    def _groups(self, feeds: list[Feed]) -> list[list[int]]:
        # Requests share one call only when every non-batch dimension matches (e.g. the same sequence length)
        if not self.batched:
            return [[i] for i in range(len(feeds))]
        groups: dict[tuple[object, ...], list[int]] = {}
        for index, feed in enumerate(feeds):
            key = tuple(
                (name, tuple(feed[name].shape[1:]), str(feed[name].dtype)) for name in self.input_names
            )
            groups.setdefault(key, []).append(index)
        return list(groups.values())

    def _run_group(
        self, indices: list[int], feeds: list[Feed], responses: list[pb_utils.InferenceResponse | None]
    ) -> None:
        try:
            if len(indices) == 1:
                merged = feeds[indices[0]]
            else:
                merged = {n: torch.cat([feeds[i][n] for i in indices]) for n in self.input_names}
            # one copy of the whole batch to host memory, in the declared output types
            results = [
                out.to(dtype).cpu()
                for (_, dtype), out in zip(self.outputs, self.runner.run(merged), strict=True)
            ]
        except Exception as err:  # one bad request must not take the instance down
            for i in indices:
                responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"torch: {err}"))
            return
        start = 0
        for i in indices:
            size = next(iter(feeds[i].values())).shape[0] if self.batched else 0
            tensors = []
            for (name, _), value in zip(self.outputs, results, strict=True):
                part = (value[start : start + size] if self.batched else value).contiguous()
                tensors.append(pb_utils.Tensor.from_dlpack(name, to_dlpack(part)))
            responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
            start += size

    def finalize(self) -> None:
        self.runner = None
