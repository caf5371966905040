"""NVIDIA GPUs through NVML (``pynvml`` from nvidia-ml-py), and GPU name → catalog id.

``pynvml`` is imported inside ``read_nvml`` so hosts without it (or without a driver) still probe; the
module can be injected for tests. ``gpu_catalog_id`` is pure and tested on names from recorded nvidia-smi
outputs.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any


def _text(value: Any) -> str:
    # older pynvml releases return bytes, newer return str (DOMAIN.md §6.1)
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def cuda_version_from_int(version: int) -> str:
    """NVML's CUDA driver version integer (e.g. 12040) → ``"12.4"``."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def read_nvml(nvml: Any = None) -> dict[str, Any]:
    """Describe the NVIDIA GPUs NVML sees: ``{"present": bool, "reason"?, "driver_version", "gpus": [...]}``."""
    if nvml is None:
        try:
            import pynvml  # noqa: PLC0415 - optional toolchain, imported where needed
        except ImportError:
            return {"present": False, "reason": "no NVIDIA GPU (nvidia-ml-py/pynvml is not installed)"}
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return {"present": False, "reason": f"no NVIDIA GPU (NVML init failed: {_text(err)})"}
    try:
        count = nvml.nvmlDeviceGetCount()
        if count == 0:
            return {"present": False, "reason": "no NVIDIA GPU (NVML reports 0 devices)"}
        return {
            "present": True,
            "driver_version": _text(nvml.nvmlSystemGetDriverVersion()),
            "cuda_driver_version": cuda_version_from_int(nvml.nvmlSystemGetCudaDriverVersion()),
            "gpus": [_read_device(nvml, index) for index in range(count)],
        }
    except nvml.NVMLError as err:
        return {"present": False, "reason": f"NVML query failed: {_text(err)}"}
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def _read_device(nvml: Any, index: int) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    name = _text(nvml.nvmlDeviceGetName(handle))
    try:
        memory_total_bytes: int | None = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
    except nvml.NVMLError:  # a MIG parent without privileges may refuse; the rest is still worth reporting
        memory_total_bytes = None
    major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
    return {
        "index": index,
        "name": name,
        "memory_total_bytes": memory_total_bytes,
        "compute_capability": f"{major}.{minor}",
        "mig_mode": _mig_mode(nvml, handle),
        "catalog_id": gpu_catalog_id(name, memory_total_bytes=memory_total_bytes),
    }


def _mig_mode(nvml: Any, handle: Any) -> dict[str, Any]:
    try:
        current, pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError_NotSupported:
        return {"supported": False}
    except nvml.NVMLError as err:
        return {"supported": None, "error": _text(err)}
    return {
        "supported": True,
        "current": "enabled" if current else "disabled",
        "pending": "enabled" if pending else "disabled",
    }


_GIB = 1024**3


def gpu_catalog_id(name: str, memory_total_bytes: int | None = None) -> str | None:
    """Catalog id for an NVIDIA GPU product name (as NVML/nvidia-smi print it), or None if not in the catalog."""
    upper = name.upper()
    memory_gib = memory_total_bytes / _GIB if memory_total_bytes else None
    if "H200" in upper:
        return None if "NVL" in upper else "h200-sxm"
    if "H100" in upper:
        if "NVL" in upper or "94GB" in upper or "96GB" in upper:
            return None
        return "h100-pcie" if "PCIE" in upper else "h100-sxm"
    if "A100" in upper:
        big = "80GB" in upper or (memory_gib is not None and memory_gib > 60)
        form = "pcie" if "PCIE" in upper else "sxm4"
        return f"a100-{form}-{'80gb' if big else '40gb'}"
    if "L40S" in upper:
        return "l40s"
    if re.search(r"\bL4\b", upper):
        return "l4"
    if re.search(r"\bT4\b", upper):
        return "t4"
    if "A10G" in upper:
        return "a10g"
    return None


_SMI_L_RE = re.compile(r"^GPU \d+: (?P<name>.+?) \(UUID:", re.MULTILINE)
_SMI_Q_RE = re.compile(r"^\s*Product Name\s*:\s*(?P<name>.+?)\s*$", re.MULTILINE)
_SMI_X_RE = re.compile(r"<product_name>(?P<name>[^<]+)</product_name>")


def gpu_names_from_nvidia_smi(text: str) -> list[str]:
    """GPU product names from ``nvidia-smi -L``, ``-q`` or ``-q -x`` output (a fallback when NVML is absent)."""
    for pattern in (_SMI_L_RE, _SMI_Q_RE, _SMI_X_RE):
        names = [m["name"].strip() for m in pattern.finditer(text)]
        if names:
            return names
    return []
