"""Request payloads for a model accelbench did not build, from what the server says about it (like
perf_analyzer): input names, datatypes and shapes from the model metadata, ``max_batch_size`` from its config.

Data: ``zero``; ``random`` (seeded: floats uniform in [0, 1), integers uniform in [0, 100), booleans,
BYTES as 16 random letters); or a perf_analyzer JSON data file, ``{"data": [{"NAME": [...] | {"content":
[...], "shape": [...]} | {"b64": "..."}, ...}, ...]}``, one entry per batch element (a batch of N takes N
consecutive entries, wrapping around). Shapes never include the batch dimension: a dynamic dimension
takes its size from the entry's ``shape``, else from ``--shape NAME:D1,D2``, else it is an error.
"""

from __future__ import annotations

import base64
import json
import os
import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelbench.errors import BadInputError
from accelbench.loadtests import wire
from accelbench.loadtests.jsonwire import OutputSpec, UserJson
from accelbench.models.cards import parse_shape

DATA_MODES = ("zero", "random")
_LETTERS = np.array(list(string.ascii_letters))


@dataclass(frozen=True)
class ServedTensor:
    name: str
    datatype: str
    dims: tuple[int, ...]  # without the batch dimension; -1 = dynamic


@dataclass(frozen=True)
class ServedModel:
    name: str
    max_batch_size: int
    inputs: tuple[ServedTensor, ...]
    outputs: tuple[ServedTensor, ...]

    def expected_outputs(self) -> list[OutputSpec]:
        """What every answer must carry, in the form of the manifest's outputs."""
        batched = self.max_batch_size > 0
        return [
            {
                "name": t.name,
                "dtype": wire.numpy_dtype(t.datatype).name,
                "batched": batched,
                "shape": [-1, *t.dims] if batched else list(t.dims),
            }
            for t in self.outputs
        ]


def read_served(http_url: str, model: str) -> ServedModel:
    """The model's metadata and config from a running Triton."""
    from accelbench.serving.http_client import TritonHttp

    triton = TritonHttp(http_url, timeout_s=10)
    meta = triton.model_metadata(model)
    config = triton.model_config(model)
    max_batch = int(config.get("max_batch_size") or 0)

    def tensors(key: str) -> tuple[ServedTensor, ...]:
        out = []
        for t in meta.get(key) or []:
            shape = [int(d) for d in t.get("shape") or []]
            out.append(ServedTensor(t["name"], t["datatype"], tuple(shape[1:] if max_batch > 0 else shape)))
        return tuple(out)

    return ServedModel(model, max_batch, tensors("inputs"), tensors("outputs"))


def parse_shapes(texts: tuple[str, ...] | list[str]) -> dict[str, tuple[int, ...]]:
    """``("X:4,8", "T:1")`` → {"X": (4, 8), "T": (1,)}; one clear error for anything else."""
    return dict(parse_shape(text) for text in texts)


def make_payloads(
    served: ServedModel,
    batch_size: int,
    count: int,
    seed: int,
    input_data: str | os.PathLike[str],
    shapes: dict[str, tuple[int, ...]],
) -> list[dict[str, np.ndarray]]:
    """``count`` payloads (fewer when a data file has fewer batches), each input-name → array."""
    _check_batch(served, batch_size)
    unknown = sorted(set(shapes) - {t.name for t in served.inputs})
    if unknown:
        raise BadInputError(
            f"--shape names {unknown}: model {served.name} has inputs {[t.name for t in served.inputs]}"
        )
    batched = served.max_batch_size > 0
    if str(input_data) in DATA_MODES:
        rng = np.random.default_rng(seed)
        dims = {t.name: _dims(served.name, t, shapes.get(t.name)) for t in served.inputs}
        payloads = []
        for _ in range(count if input_data == "random" else 1):  # zeros are all alike: one payload
            payloads.append(
                {
                    t.name: _generated(
                        t, ([batch_size] if batched else []) + list(dims[t.name]), str(input_data), rng
                    )
                    for t in served.inputs
                }
            )
        return payloads
    entries = _read_data_file(Path(input_data))
    per_payload = batch_size if batched else 1
    n = min(count, max(1, -(-len(entries) // per_payload)))
    return [
        _from_entries(
            served,
            [entries[(k * per_payload + j) % len(entries)] for j in range(per_payload)],
            shapes,
            batched,
            Path(input_data),
        )
        for k in range(n)
    ]


def _check_batch(served: ServedModel, batch_size: int) -> None:
    if served.max_batch_size == 0 and batch_size != 1:
        raise BadInputError(
            f"model {served.name} does not batch (max_batch_size 0); drop --batch {batch_size}"
        )
    if served.max_batch_size and batch_size > served.max_batch_size:
        raise BadInputError(
            f"--batch {batch_size} is above model {served.name}'s max_batch_size {served.max_batch_size}"
        )


def _dims(model: str, tensor: ServedTensor, given: tuple[int, ...] | None) -> tuple[int, ...]:
    if given is None:
        if -1 in tensor.dims:
            example = ",".join("8" if d == -1 else str(d) for d in tensor.dims)
            raise BadInputError(
                f"input {tensor.name!r} of {model} has a dynamic shape {list(tensor.dims)}; "
                f"give its size with --shape {tensor.name}:{example}"
            )
        return tensor.dims
    if len(given) != len(tensor.dims) or any(
        d not in (-1, g) for d, g in zip(tensor.dims, given, strict=True)
    ):
        raise BadInputError(
            f"--shape {tensor.name}:{','.join(map(str, given))} does not fit its dims {list(tensor.dims)}"
        )
    return given


def _generated(tensor: ServedTensor, shape: list[int], mode: str, rng: np.random.Generator) -> np.ndarray:
    if tensor.datatype == "BYTES":
        size = int(np.prod(shape))
        if mode == "zero":
            items = [b"0"] * size
        else:
            items = ["".join(rng.choice(_LETTERS, 16)).encode() for _ in range(size)]
        return np.array(items, dtype=object).reshape(shape)
    dtype = wire.numpy_dtype(tensor.datatype)
    if mode == "zero":
        return np.zeros(shape, dtype=dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, size=shape).astype(dtype)
    return rng.random(size=shape).astype(dtype)


def _read_data_file(path: Path) -> list[UserJson]:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise BadInputError(f"--input-data {path}: no such file (or use zero / random)") from None
    except (OSError, ValueError) as err:
        raise BadInputError(f"--input-data {path}: not a JSON data file ({err})") from None
    entries = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise BadInputError(f'--input-data {path}: expected {{"data": [{{INPUT: values, ...}}, ...]}}')
    if any(isinstance(e, list) for e in entries):
        raise BadInputError(f"--input-data {path}: sequence streams (lists of steps) are not supported")
    if not all(isinstance(e, dict) for e in entries):
        raise BadInputError(f'--input-data {path}: every entry of "data" must be an object of inputs')
    return entries


def _from_entries(
    served: ServedModel,
    entries: list[UserJson],
    shapes: dict[str, tuple[int, ...]],
    batched: bool,
    path: Path,
) -> dict[str, np.ndarray]:
    payload = {}
    for tensor in served.inputs:
        arrays = [_entry_array(served.name, tensor, e, shapes.get(tensor.name), path) for e in entries]
        if len({a.shape for a in arrays}) > 1:
            raise BadInputError(f"--input-data {path}: input {tensor.name!r} changes shape within one batch")
        payload[tensor.name] = np.stack(arrays) if batched else arrays[0]
    return payload


def _entry_array(
    model: str, tensor: ServedTensor, entry: UserJson, given: tuple[int, ...] | None, path: Path
) -> np.ndarray:
    where = f"--input-data {path}: input {tensor.name!r}"
    if tensor.name not in entry:
        raise BadInputError(f"{where} is missing from an entry (it has {sorted(entry)})")
    value = entry[tensor.name]
    if isinstance(value, dict) and "shape" in value:
        given = tuple(int(d) for d in value["shape"])
    shape = _dims(model, tensor, given)
    content = value.get("content") if isinstance(value, dict) else value
    try:
        if isinstance(value, dict) and "b64" in value:
            decoded = wire.decode_tensor(base64.b64decode(value["b64"]), tensor.datatype, list(shape))
            copied: np.ndarray = decoded.copy()
            return copied
        if tensor.datatype == "BYTES":
            items = [
                c if isinstance(c, bytes) else str(c).encode()
                for c in np.asarray(content, dtype=object).reshape(-1)
            ]
            return np.array(items, dtype=object).reshape(shape)
        return np.asarray(content, dtype=wire.numpy_dtype(tensor.datatype)).reshape(shape)
    except (ValueError, TypeError) as err:  # binascii.Error is a ValueError
        raise BadInputError(f"{where}: {err} (shape {list(shape)}, {tensor.datatype})") from None
