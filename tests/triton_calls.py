"""Plain tritonclient calls shared by the serving tests: the reference the served outputs are compared with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp

NP_TO_TRITON = {"float32": "FP32", "int64": "INT64", "int32": "INT32", "float16": "FP16"}


def infer(protocol: str, url: str, model: str, feeds: dict[str, np.ndarray], outputs: list[str]) -> dict:
    """One request through tritonclient (``url`` is HOST:PORT for either protocol); {output: array}."""
    lib = thttp if protocol == "http" else tgrpc
    client = lib.InferenceServerClient(url)
    try:
        inputs = []
        for name, array in feeds.items():
            tensor = lib.InferInput(name, list(array.shape), NP_TO_TRITON[str(array.dtype)])
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        result = client.infer(model, inputs, outputs=[lib.InferRequestedOutput(n) for n in outputs])
        return {n: result.as_numpy(n) for n in outputs}
    finally:
        client.close()


def reference_batch(variant: Path, rows: int) -> dict[str, np.ndarray]:
    """The first ``rows`` of a variant folder's reference inputs."""
    with np.load(variant / "reference" / "inputs.npz") as data:
        return {key: np.ascontiguousarray(data[key][:rows]) for key in data.files}
