"""Triton requests encoded once per payload, and answers checked without decoding every tensor (pure).

HTTP uses the binary tensor extension: a JSON header, then the raw tensors in the order listed, with
``Inference-Header-Content-Length`` giving the header's length; ``binary_data_output`` asks for every output
as raw bytes too. The whole HTTP/1.1 request (request line, headers, body) is built once per payload, so
sending it is one ``sendall``. gRPC requests are ``ModelInferRequest`` messages serialized once; the bytes
go through a raw unary call.

An answer's *lean* check reads only what is cheap: status, the JSON header (or the gRPC message's tensor
metadata), output names, datatypes, shapes and byte sizes. The *full* check also decodes every tensor
(numpy views of the raw bytes, BYTES elements walked by their length prefixes); it runs on every Nth answer
and on every answer that failed the lean check, so a failure is explained precisely.
"""

from __future__ import annotations

import json
import struct
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.loadtests.jsonwire import TritonJson

# Triton datatype ↔ numpy dtype (BYTES: numpy object arrays of bytes)
_TRITON = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}
_NUMPY = {np.dtype(v).name: k for k, v in _TRITON.items() if k != "BYTES"}
_BYTES_NAMES = ("object", "bytes", "bytes_", "str", "string", "BYTES")

GRPC_INFER_METHOD = "/inference.GRPCInferenceService/ModelInfer"


class WrongOutput(Exception):
    """The server answered, but not with the outputs the model promises."""


class ServerAnswer(Exception):
    """The server answered with an error (HTTP status ≥ 400 or a gRPC status)."""

    def __init__(self, status: int | str, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status_code = status


def triton_dtype(dtype: Any) -> str:
    """Triton's datatype name for a numpy dtype, or a dtype name such as ``"float32"`` or ``"object"``."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name in _TRITON:
        return name
    if name in _BYTES_NAMES or name.startswith(("bytes", "str")):
        return "BYTES"
    try:
        return _NUMPY[np.dtype(name).name]
    except (TypeError, KeyError):
        raise ValueError(f"no Triton datatype for {name!r}") from None


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype of a Triton datatype (``object`` for BYTES)."""
    if datatype not in _TRITON:
        raise ValueError(f"unsupported Triton datatype {datatype!r}")
    return np.dtype(_TRITON[datatype])


def serialize_bytes(arr: np.ndarray) -> bytes:
    """A BYTES tensor in Triton's binary form: each element, row-major, as a 4-byte LE length and bytes."""
    parts = []
    for item in arr.reshape(-1):
        data = item if isinstance(item, bytes) else str(item).encode("utf-8")
        parts += [struct.pack("<I", len(data)), data]
    return b"".join(parts)


def deserialize_bytes(raw: bytes | memoryview, count: int) -> list[bytes]:
    """``count`` BYTES elements from their binary form; ValueError unless they fill ``raw`` exactly."""
    out, pos, raw = [], 0, memoryview(raw)
    for _ in range(count):
        if pos + 4 > len(raw):
            raise ValueError("BYTES data ends inside a length prefix")
        (size,) = struct.unpack_from("<I", raw, pos)
        pos += 4
        if pos + size > len(raw):
            raise ValueError("BYTES data ends inside an element")
        out.append(bytes(raw[pos : pos + size]))
        pos += size
    if pos != len(raw):
        raise ValueError(f"{len(raw) - pos} bytes left after {count} BYTES elements")
    return out


def tensor_bytes(arr: np.ndarray) -> bytes:
    """The raw little-endian bytes Triton expects for one input tensor."""
    if triton_dtype(arr.dtype) == "BYTES":
        return serialize_bytes(arr)
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()


# ---- what an answer must carry ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputSpec:
    """One expected output: name, Triton datatype, shape with the batch dimension resolved (-1 = any)."""

    name: str
    datatype: str
    shape: tuple[int, ...]

    @property
    def item_size(self) -> int | None:
        return None if self.datatype == "BYTES" else numpy_dtype(self.datatype).itemsize


def output_specs(expected: Sequence[Mapping[str, Any]], batch_size: int) -> list[OutputSpec]:
    """From ``{"name", "dtype", "shape"[, "batched"]}`` dicts (manifest, card or server metadata): the first
    dimension is the batch one, replaced by ``batch_size``, unless ``"batched": False`` (a model whose
    ``max_batch_size`` is 0 has no batch dimension)."""
    specs = []
    for spec in expected:
        shape = [int(d) for d in spec["shape"]]
        if spec.get("batched", True) and shape:
            shape[0] = batch_size
        specs.append(OutputSpec(spec["name"], triton_dtype(spec["dtype"]), tuple(shape)))
    return specs


def _shape_problem(name: str, got: Sequence[int], want: tuple[int, ...]) -> str | None:
    if len(got) != len(want) or any(w not in (-1, g) for w, g in zip(want, got, strict=True)):
        return f"output {name}: shape {list(got)}, expected {list(want)}"
    return None


def check_tensors(
    tensors: Sequence[tuple[str, str, Sequence[int], int | None]], specs: list[OutputSpec]
) -> None:
    """Lean check of ``(name, datatype, shape, byte size or None)`` per returned output."""
    by_name = {t[0]: t for t in tensors}
    for spec in specs:
        got = by_name.get(spec.name)
        if got is None:
            raise WrongOutput(f"output {spec.name} missing")
        if got[1] != spec.datatype:
            raise WrongOutput(f"output {spec.name}: dtype {_name(got[1])}, expected {_name(spec.datatype)}")
        problem = _shape_problem(spec.name, got[2], spec.shape)
        if problem:
            raise WrongOutput(problem)
        size = got[3]
        if spec.item_size is not None and size is not None and size != spec.item_size * _count(got[2]):
            raise WrongOutput(f"output {spec.name}: {size} bytes for shape {got[2]} {spec.datatype}")


def _name(datatype: str) -> str:
    """numpy's name for a datatype in messages (``float32``), as the manifest spells it; BYTES stays."""
    return numpy_dtype(datatype).name if datatype in _TRITON and datatype != "BYTES" else str(datatype)


def decode_tensor(raw: bytes | memoryview, datatype: str, shape: list[int]) -> np.ndarray:
    """The full decode of one output; ValueError when the bytes do not match shape and datatype."""
    if datatype == "BYTES":
        return np.array(deserialize_bytes(raw, _count(shape)), dtype=object).reshape(shape)
    return np.frombuffer(raw, dtype=numpy_dtype(datatype).newbyteorder("<")).reshape(shape)


def _count(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# ---- HTTP ---------------------------------------------------------------------------------------------


def http_request(host: str, model: str, payload: dict[str, np.ndarray], output_names: list[str]) -> bytes:
    """The complete HTTP/1.1 request for one payload (keep-alive), built once and sent as is."""
    raws = [tensor_bytes(arr) for arr in payload.values()]
    header = {
        "inputs": [
            {
                "name": name,
                "shape": list(arr.shape),
                "datatype": triton_dtype(arr.dtype),
                "parameters": {"binary_data_size": len(raw)},
            }
            for (name, arr), raw in zip(payload.items(), raws, strict=True)
        ],
        "outputs": [{"name": n, "parameters": {"binary_data": True}} for n in output_names],
        "parameters": {"binary_data_output": True},
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    body = head + b"".join(raws)
    path = f"/v2/models/{urllib.parse.quote(model, safe='')}/infer"
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}",
        "Content-Type: application/octet-stream",
        f"Inference-Header-Content-Length: {len(head)}",
        f"Content-Length: {len(body)}",
        "",
        "",
    ]
    return "\r\n".join(lines).encode("latin-1") + body


@dataclass
class HttpAnswer:
    """One HTTP answer as read off the socket: status, the JSON header's length, the whole body (from the
    client, a view of its connection's buffer: check it before that connection's next exchange)."""

    status: int
    header_length: int | None
    body: bytes | bytearray | memoryview

    def header(self) -> TritonJson:
        end = self.header_length if self.header_length is not None else len(self.body)
        try:
            parsed = json.loads(bytes(self.body[:end]))
        except ValueError:
            raise WrongOutput("the answer's JSON header does not parse") from None
        if not isinstance(parsed, dict):
            raise WrongOutput(f"the answer's JSON header is a {type(parsed).__name__}, not an object")
        return parsed

    def raise_for_status(self) -> None:
        if self.status >= 400:
            try:
                message = json.loads(bytes(self.body)).get("error", "")
            except (ValueError, AttributeError):
                message = bytes(self.body[:200]).decode("utf-8", "replace")
            raise ServerAnswer(self.status, message or "no message")


def check_http(answer: HttpAnswer, specs: list[OutputSpec], full: bool) -> None:
    """Raise ServerAnswer or WrongOutput unless ``answer`` carries every expected output."""
    answer.raise_for_status()
    header = answer.header()
    outputs = header.get("outputs") or []
    tensors = [
        (
            o.get("name"),
            o.get("datatype"),
            list(o.get("shape") or []),
            (o.get("parameters") or {}).get("binary_data_size"),
        )
        for o in outputs
    ]
    start = answer.header_length or 0
    binary = sum(int(t[3] or 0) for t in tensors)
    if start + binary != len(answer.body):
        raise WrongOutput(f"binary outputs declare {binary} bytes, the body has {len(answer.body) - start}")
    check_tensors(tensors, specs)
    if full:
        view, pos = memoryview(answer.body), start
        for name, datatype, shape, size in tensors:
            if size is None:
                raise WrongOutput(f"output {name} came as JSON, not binary data")
            try:
                decode_tensor(view[pos : pos + int(size)], datatype, shape)
            except ValueError as err:
                raise WrongOutput(f"output {name}: {err}") from None
            pos += int(size)


class HttpChecker:
    """``check_http`` with a memory: the lean verdict depends only on the status, the header's bytes and
    the body's length, and a model answers every request of a payload with the same header (no request id
    is sent), so an answer whose header was already verified is not parsed again. Full checks always run."""

    def __init__(self, specs: list[OutputSpec], keep: int = 256) -> None:
        self.specs, self.keep = specs, keep
        self.verified: set[tuple[bytes, int]] = set()

    def __call__(self, answer: HttpAnswer, full: bool) -> None:
        key = None
        if answer.status == 200 and answer.header_length is not None:
            key = (bytes(answer.body[: answer.header_length]), len(answer.body))
            if not full and key in self.verified:
                return
        check_http(answer, self.specs, full)
        if key is not None and len(self.verified) < self.keep:
            self.verified.add(key)


# ---- gRPC ---------------------------------------------------------------------------------------------


def grpc_request(model: str, payload: dict[str, np.ndarray], output_names: list[str]) -> bytes:
    """A serialized ``ModelInferRequest`` with raw input contents, as tritonclient builds it."""
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=model)
    for name, arr in payload.items():
        request.inputs.add(name=name, datatype=triton_dtype(arr.dtype), shape=list(arr.shape))
        request.raw_input_contents.append(tensor_bytes(arr))
    for name in output_names:
        request.outputs.add(name=name)
    serialized: bytes = request.SerializeToString()
    return serialized


def check_grpc(raw: bytes, specs: list[OutputSpec], full: bool) -> None:
    """Raise WrongOutput unless a serialized ``ModelInferResponse`` carries every expected output."""
    from tritonclient.grpc import service_pb2

    try:
        response = service_pb2.ModelInferResponse.FromString(raw)
    except Exception:  # protobuf's DecodeError has no stable import path across its runtimes
        raise WrongOutput("the answer is not a ModelInferResponse") from None
    contents = response.raw_output_contents
    if len(contents) != len(response.outputs):
        raise WrongOutput(f"{len(response.outputs)} outputs but {len(contents)} raw contents")
    tensors = [
        (o.name, o.datatype, list(o.shape), len(c)) for o, c in zip(response.outputs, contents, strict=True)
    ]
    check_tensors(tensors, specs)
    if full:
        for (name, datatype, shape, _), content in zip(tensors, contents, strict=True):
            try:
                decode_tensor(content, datatype, shape)
            except ValueError as err:
                raise WrongOutput(f"output {name}: {err}") from None
