"""``RemoteTriton``: a Triton that is already running (an NGC container on an L4 host, a Kubernetes
service), checked before any stage relies on it: server live, model ready, served config matches."""

from __future__ import annotations

import urllib.parse

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError, ServerError
from accelbench.serving.http_client import TritonHttp, http_base


class RemoteTriton:
    """Same attributes as LocalTriton (``http_url``, ``grpc_url``, ``metrics_url``, ``pid`` = None).

    The gRPC and metrics endpoints default to Triton's port layout (HTTP 8000 → gRPC 8001, metrics
    8002) on the same host; pass them explicitly otherwise.
    """

    pid = None

    def __init__(self, url: str, grpc_url: str | None = None, metrics_url: str | None = None) -> None:
        self.http_url = http_base(url)
        parts = urllib.parse.urlsplit(self.http_url)
        if not parts.hostname:
            raise BadInputError(f"--url {url!r}: expected http://HOST:PORT")
        port = parts.port or 80
        self.host = parts.hostname
        self.http_address = f"{parts.hostname}:{port}"
        self.grpc_url = grpc_url or f"{parts.hostname}:{port + 1}"
        self.metrics_url = metrics_url or f"{parts.scheme}://{parts.hostname}:{port + 2}/metrics"
        self.server_version: str | None = None

    def __enter__(self) -> RemoteTriton:
        self.check_live()
        return self

    def __exit__(self, *exc: object) -> None:
        """Nothing to stop: the server is not ours."""

    def check_live(self) -> dict:
        meta = TritonHttp(self.http_url).metadata(timeout_s=5)
        self.server_version = meta.get("version")
        return meta

    def check_model(self, model: str, manifest: VariantManifest | None = None) -> dict:
        """See :func:`check_model`; also refreshes ``server_version``."""
        self.check_live()
        return check_model(self.http_url, model, manifest)


def check_model(http_url: str, model: str, manifest: VariantManifest | None = None) -> dict:
    """Model ready and, given the variant manifest, its served inputs/outputs match the variant's.

    Returns the served config (JSON form). ServerError when the server or model is unavailable;
    BadInputError naming the first difference when the config does not match.
    """
    triton = TritonHttp(http_url, timeout_s=5)
    status = triton.model_ready_status(model)
    if status != 200:
        raise ServerError(f"model {model!r} is not ready on {http_url} (HTTP {status})")
    config = triton.model_config(model)
    if manifest is not None:
        problem = config_mismatch(config, manifest)
        if problem:
            raise BadInputError(f"model {model!r} on {http_url} does not match the variant: {problem}")
    return config


def config_mismatch(config: dict, manifest: VariantManifest) -> str | None:
    """The first difference between a served config (JSON form) and a variant's inputs/outputs, or None."""
    from accelbench.serving.llm_repository import generative_mismatch, is_generative
    from accelbench.serving.plans import triton_dtype

    if is_generative(manifest):
        return generative_mismatch(config)
    batched = int(config.get("max_batch_size", 0) or 0) > 0
    for side, key in (("inputs", "input"), ("outputs", "output")):
        served = {t["name"]: t for t in config.get(key) or []}
        expected = {t.name: t for t in getattr(manifest, side)}
        if set(served) != set(expected):
            return f"{side} are {sorted(served)}, the variant has {sorted(expected)}"
        for name, spec in expected.items():
            got = served[name]
            want_type = triton_dtype(spec.dtype)
            if got.get("data_type") != want_type:
                return f"{name} is {got.get('data_type')}, the variant has {want_type}"
            dims = [int(d) for d in got.get("dims") or []]
            if "reshape" in got:
                dims = [int(d) for d in got["reshape"].get("shape") or []]
            want = [int(d) for d in spec.shape][1 if batched else 0 :]
            if not batched and not want and dims == [1]:
                continue  # a graph scalar: Triton has none without batching, it declares [1]
            if len(dims) != len(want) or any(
                a != b and -1 not in (a, b) for a, b in zip(dims, want, strict=False)
            ):
                return f"{name} has dims {dims}, the variant has {want}"
    return None
