"""Describe this host: CPU, memory, OS, Python, package versions, NVIDIA GPUs, Jetson, Neuron devices.

``probe_host()`` returns a JSON-able dict that is saved with every result. It never raises for missing
hardware: each section says what is present or why not. File paths, commands and the NVML module are
arguments so tests can feed recorded real outputs.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from accelbench.hardware import jetson, neuron, nvml

# Distributions whose versions matter for a result (looked up by metadata, never imported: torch and
# tensorrt take seconds to import and may not even load without a GPU).
PACKAGES = (
    "accelbench",
    "onnx",
    "onnxruntime",
    "onnxruntime-gpu",
    "tritonclient",
    "nvidia-pytriton",
    "locust",
    "numpy",
    "tensorrt",
    "torch",
    "optimum",
    "transformers",
    "nvidia-ml-py",
    "jetson-stats",
    "torch-neuronx",
)
COMMAND_TIMEOUT_S = 10.0
CPU_CATALOG_ID = "cpu-local"


def probe_host(
    *,
    cpuinfo_path: str = "/proc/cpuinfo",
    os_release_path: str = "/etc/os-release",
    tegra_release_path: str = "/etc/nv_tegra_release",
    device_tree_model_path: str = "/proc/device-tree/model",
    nvpmodel_cmd: Sequence[str] = ("nvpmodel", "-q"),
    neuron_ls_cmd: Sequence[str] = ("neuron-ls", "--json-output"),
    nvml_module: Any = None,
    known_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Everything accelbench records about the host; ``known_ids`` (catalog ids) validates the match."""
    memory_total_bytes = _memory_total_bytes()
    nvidia = nvml.read_nvml(nvml_module)
    jetson_info = probe_jetson(tegra_release_path, device_tree_model_path, nvpmodel_cmd, memory_total_bytes)
    neuron_info = probe_neuron(neuron_ls_cmd)
    return {
        "cpu": _cpu(cpuinfo_path),
        "memory_total_bytes": memory_total_bytes,
        "os": _os(os_release_path),
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "packages": package_versions(),
        "nvidia": nvidia,
        # flat list for callers that only need names/compute capability (the TensorRT toolchain reads it)
        "gpus": nvidia.get("gpus", []),
        "jetson": jetson_info,
        "neuron": neuron_info,
        "catalog_match": catalog_match(nvidia, jetson_info, neuron_info, known_ids),
    }


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution, None when absent."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _cpu(cpuinfo_path: str) -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path(cpuinfo_path).read_text("utf-8", "replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model name", "Hardware") and value.strip():
                model = value.strip()
                break
    except OSError:
        pass
    physical = None
    try:
        import psutil  # noqa: PLC0415 - a default dependency, but keep the probe usable without it

        physical = psutil.cpu_count(logical=False)
    except ImportError:
        pass
    return {
        "model": model,
        "architecture": platform.machine(),
        "cores_physical": physical,
        "cores_logical": os.cpu_count(),
    }


def _memory_total_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _os(os_release_path: str) -> dict[str, Any]:
    pretty = None
    try:
        for line in Path(os_release_path).read_text("utf-8", "replace").splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return {
        "system": platform.system(),
        "release": platform.release(),
        "distribution": pretty,
        "platform": platform.platform(),
    }


def run_command(cmd: Sequence[str]) -> tuple[bool, str]:
    """Run ``cmd``; (True, stdout) on success, else (False, one-line reason)."""
    if not cmd or shutil.which(cmd[0]) is None:
        return False, f"{cmd[0] if cmd else '<empty command>'} not found on PATH"
    try:
        done = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"{' '.join(cmd)} failed: {err}"
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()
        return False, f"{' '.join(cmd)} exited {done.returncode}: {last[-1] if last else 'no output'}"
    return True, done.stdout


def probe_jetson(
    tegra_release_path: str,
    device_tree_model_path: str,
    nvpmodel_cmd: Sequence[str],
    memory_total_bytes: int | None = None,
) -> dict[str, Any]:
    """Jetson L4T release, module model and power mode, or why this is not a Jetson."""
    release_file = Path(tegra_release_path)
    if not release_file.is_file():
        return {"present": False, "reason": f"no Jetson ({tegra_release_path} not found)"}
    info: dict[str, Any] = {"present": True}
    try:
        info.update(jetson.parse_nv_tegra_release(release_file.read_text("utf-8", "replace")))
    except ValueError as err:
        info["release_error"] = str(err)
    try:
        info["model"] = jetson.parse_device_tree_model(Path(device_tree_model_path).read_bytes())
    except OSError as err:
        info["model"] = None
        info["model_error"] = f"{device_tree_model_path}: {err.strerror or err}"
    ok, output = run_command(nvpmodel_cmd)
    if ok:
        try:
            info["power_mode"] = jetson.parse_nvpmodel_query(output)
        except ValueError as err:
            info["power_mode"] = {"error": str(err)}
    else:
        info["power_mode"] = {"error": output}
    memory_gb = memory_total_bytes / 1e9 if memory_total_bytes else None
    info["catalog_id"] = jetson.jetson_catalog_id(info["model"], memory_gb) if info["model"] else None
    return info


def probe_neuron(neuron_ls_cmd: Sequence[str]) -> dict[str, Any]:
    """AWS Neuron devices from ``neuron-ls --json-output``, or why there are none."""
    ok, output = run_command(neuron_ls_cmd)
    if not ok:
        return {"present": False, "reason": f"no Neuron device ({output})"}
    try:
        devices = neuron.parse_neuron_ls_json(output)
    except ValueError as err:
        return {"present": False, "reason": f"could not parse neuron-ls output: {err}"}
    if not devices:
        return {"present": False, "reason": "no Neuron device (neuron-ls lists none)"}
    instance_type = os.environ.get("ACCELBENCH_INSTANCE_TYPE")
    return {
        "present": True,
        "devices": devices,
        "catalog_id": neuron.neuron_catalog_id(devices, instance_type),
    }


def catalog_match(
    nvidia: dict[str, Any],
    jetson_info: dict[str, Any],
    neuron_info: dict[str, Any],
    known_ids: Sequence[str] | None,
) -> dict[str, Any]:
    """The catalog id this host runs as: first NVIDIA GPU, else the Jetson, else Neuron, else cpu-local."""
    candidates = []
    if nvidia.get("present"):
        gpu = nvidia["gpus"][0]
        candidates.append((gpu.get("catalog_id"), f"NVIDIA GPU 0: {gpu['name']}"))
    if jetson_info.get("present"):
        candidates.append((jetson_info.get("catalog_id"), f"Jetson: {jetson_info.get('model')}"))
    if neuron_info.get("present"):
        candidates.append((neuron_info.get("catalog_id"), f"{len(neuron_info['devices'])} Neuron device(s)"))
    for target_id, reason in candidates:
        if target_id and (known_ids is None or target_id in known_ids):
            return {"id": target_id, "reason": reason}
    if candidates:
        return {
            "id": CPU_CATALOG_ID,
            "reason": f"{candidates[0][1]} has no catalog entry; falling back to the CPU",
        }
    return {"id": CPU_CATALOG_ID, "reason": "no accelerator found; this host runs as the CPU target"}
