"""Triton python-backend model written by accelbench: runs model.onnx with onnxruntime.

The embedded tritonserver (nvidia-pytriton wheel) has only the python backend, so the "local" repository
flavour wraps each ONNX file in this module. The dynamic batch of requests is concatenated into one
onnxruntime call and the outputs are split back per request, so server-side batching is real.
Parameters (config.pbtxt, string values): onnx_file, intra_op_num_threads, device (auto|cpu|cuda),
allow_spinning (ORT worker spin-waiting; default "0": on a small host spinning starves the server threads),
tensor_transport ("dlpack": when the stub runs with numpy 2, numeric tensors cross it through DLPack, never
through its numpy bridge, which is built for numpy 1 and corrupts tensors under numpy 2; with numpy 1 (the
stub's own environment) they take the bridge, which costs less CPU per request: a from_dlpack output still
builds a numpy view through pybind11 in the 2.51 stub, and a numpy 1 array handed to from_dlpack crashes it;
"numpy": the bridge always). BYTES tensors always take the bridge (DLPack has no strings).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import numpy.typing as npt
import triton_python_backend_utils as pb_utils

Feed = dict[str, npt.NDArray[Any]]  # input name -> the array onnxruntime gets


_ORT_TYPES = {
    "tensor(float)": "TYPE_FP32",
    "tensor(double)": "TYPE_FP64",
    "tensor(float16)": "TYPE_FP16",
    "tensor(int64)": "TYPE_INT64",
    "tensor(int32)": "TYPE_INT32",
    "tensor(int16)": "TYPE_INT16",
    "tensor(int8)": "TYPE_INT8",
    "tensor(uint8)": "TYPE_UINT8",
    "tensor(bool)": "TYPE_BOOL",
    "tensor(string)": "TYPE_STRING",
}


def _check_io(config: dict[str, Any], session: Any) -> None:
    """Fail the load (a clean "failed to load" with this reason) when config.pbtxt and the ONNX graph
    disagree; found later, in a warmup sample, the same mismatch can crash tritonserver 2.51."""
    for key, tensors in (("input", session.get_inputs()), ("output", session.get_outputs())):
        graph = {t.name: _ORT_TYPES.get(t.type, t.type) for t in tensors}
        for entry in config.get(key, []):
            name, declared = entry["name"], entry["data_type"]
            if name not in graph:
                raise ValueError(
                    f"{key} {name!r} of config.pbtxt is not in the ONNX graph (it has {sorted(graph)})"
                )
            if graph[name] != declared:
                raise ValueError(
                    f"{key} {name!r} is {declared} in config.pbtxt but {graph[name]} in the ONNX graph"
                )


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        import onnxruntime as ort

        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        path = os.path.join(version_dir, params.get("onnx_file") or "model.onnx")
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(params.get("intra_op_num_threads") or 0)
        # one ORT call at a time per instance; a second pool would only fight the first for the cores
        options.inter_op_num_threads = 1
        # Spinning ORT workers burn the cores that Triton's own threads and the clients need on a small host
        options.add_session_config_entry(
            "session.intra_op.allow_spinning", params.get("allow_spinning") or "0"
        )
        providers: list[str | tuple[str, dict[str, int]]] = ["CPUExecutionProvider"]
        device = params.get("device") or "auto"
        if device in ("auto", "cuda") and "CUDAExecutionProvider" in ort.get_available_providers():
            # a KIND_GPU instance runs on the GPU Triton gave it; KIND_CPU instances use GPU 0
            gpu = (
                int(args.get("model_instance_device_id") or 0)
                if args.get("model_instance_kind") == "GPU"
                else 0
            )
            providers.insert(0, ("CUDAExecutionProvider", {"device_id": gpu}))
        self.session = ort.InferenceSession(path, options, providers=providers)
        _check_io(config, self.session)
        self.input_names = [i["name"] for i in config["input"]]
        self.outputs = [
            (o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in config["output"]
        ]
        numpy1 = int(np.__version__.split(".")[0]) < 2
        by_numpy = numpy1 or (params.get("tensor_transport") or "numpy") != "dlpack"
        self.numpy_bridge = {
            t["name"]
            for t in config["input"] + config["output"]
            if by_numpy or t["data_type"] == "TYPE_STRING"
        }
        # the stub hands BYTES as Python bytes; ORT would store str(b"...") for them, so they become text
        self.texts = {i["name"] for i in config["input"] if i["data_type"] == "TYPE_STRING"}
        self.batched = int(config.get("max_batch_size", 0)) > 0
        # reshape { shape: [] } on a batch-only input: Triton sends [B, 1], the ONNX graph wants [B]; on a
        # scalar input of a model that does not batch it sends [1] for the graph's []
        self.reshape = {i["name"]: tuple(i["reshape"]["shape"]) for i in config["input"] if "reshape" in i}
        # graph scalars of a model that does not batch: Triton sends [1] (it has no scalars there)
        self.scalars = set((params.get("scalar_inputs") or "").split(",")) - {""}

    def execute(self, requests: list[pb_utils.InferenceRequest]) -> list[pb_utils.InferenceResponse | None]:
        feeds: list[Feed | None] = []
        responses: list[pb_utils.InferenceResponse | None] = [None] * len(requests)
        for index, request in enumerate(requests):
            try:
                feeds.append(self._feed(request))
            except Exception as err:  # e.g. a BYTES input that is not UTF-8: only this request fails
                feeds.append(None)
                responses[index] = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"bad input: {err}"))
        for indices in self._groups(feeds):
            self._run_group(indices, feeds, responses)
        return responses

    def _feed(self, request: pb_utils.InferenceRequest) -> Feed:
        feed: Feed = {}
        for name in self.input_names:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is None:
                raise ValueError(f"no input {name!r}")
            array = tensor.as_numpy() if name in self.numpy_bridge else np.from_dlpack(tensor)
            if name in self.texts:
                array = np.vectorize(_text, otypes=[object])(array)
            if name in self.scalars:
                array = array.reshape(())
            if name in self.reshape:
                lead = (array.shape[0],) if self.batched else ()  # max_batch_size 0: the whole shape
                array = array.reshape(lead + self.reshape[name])
            feed[name] = array
        return feed

    def _groups(self, feeds: list[Feed | None]) -> list[list[int]]:
        # Requests can only share one ORT call when every non-batch dimension matches (e.g. same sequence
        # length); the rest run in their own groups.
        if not self.batched:
            return [[i] for i, feed in enumerate(feeds) if feed is not None]
        groups: dict[tuple[object, ...], list[int]] = {}
        for index, feed in enumerate(feeds):
            if feed is None:
                continue
            key = tuple((name, feed[name].shape[1:], str(feed[name].dtype)) for name in self.input_names)
            groups.setdefault(key, []).append(index)
        return list(groups.values())

    def _run_group(
        self, indices: list[int], feeds: list[Feed | None], responses: list[pb_utils.InferenceResponse | None]
    ) -> None:
        group = [feed for i in indices if (feed := feeds[i]) is not None]  # _groups left the failed ones out
        try:
            if len(group) == 1:
                merged = group[0]
            else:
                merged = {n: np.concatenate([feed[n] for feed in group]) for n in self.input_names}
            results = self.session.run([name for name, _ in self.outputs], merged)
        except Exception as err:  # one bad request must not take the instance down
            for i in indices:
                responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"onnxruntime: {err}"))
            return
        start = 0
        for i, feed in zip(indices, group, strict=True):
            size = next(iter(feed.values())).shape[0] if self.batched else 0
            tensors = []
            for (name, dtype), value in zip(self.outputs, results, strict=True):
                part = value[start : start + size] if self.batched else value
                part = np.ascontiguousarray(part.astype(dtype, copy=False))
                if name in self.numpy_bridge:
                    tensors.append(pb_utils.Tensor(name, part))
                else:
                    tensors.append(pb_utils.Tensor.from_dlpack(name, part))
            responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
            start += size

    def finalize(self) -> None:
        self.session = None
