"""Kubernetes Job manifests that run one campaign agent (``accelbench agent --once``) on a node with the target.

GPU nodes are chosen by the ``nvidia.com/gpu.product`` label that NVIDIA GPU Feature Discovery puts on them (the
NVML product name with spaces as dashes, e.g. ``NVIDIA-L4``) and one ``nvidia.com/gpu`` is requested; Inferentia
nodes are reached by requesting the Neuron device plugin's ``aws.amazon.com/neuron`` resource. The runner token
is read from a Secret (``kubectl create secret generic accelbench-runner --from-literal=token=...``). The pod
does not restart on its own: a job whose pod died is requeued by the server when its lease expires.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.hardware.catalog import HardwareTarget
from accelbench.util import atomic_write_text

# catalog id -> GPU Feature Discovery's product label (NVML names as in the recorded nvidia-smi outputs)
GPU_PRODUCTS = {
    "l4": "NVIDIA-L4",
    "l40s": "NVIDIA-L40S",
    "t4": "Tesla-T4",
    "a10g": "NVIDIA-A10G",
    "a100-sxm4-80gb": "NVIDIA-A100-SXM4-80GB",
    "a100-sxm4-40gb": "NVIDIA-A100-SXM4-40GB",
    "a100-pcie-40gb": "NVIDIA-A100-PCIE-40GB",
    "a100-pcie-80gb": "NVIDIA-A100-80GB-PCIe",
    "h100-sxm": "NVIDIA-H100-80GB-HBM3",
    "h100-pcie": "NVIDIA-H100-PCIe",
    "h200-sxm": "NVIDIA-H200",
}
NEURON_RESOURCE = "aws.amazon.com/neuron"
GPU_RESOURCE = "nvidia.com/gpu"
SECRET_NAME = "accelbench-runner"
DEFAULT_IMAGE = f"accelbench:{__version__}"  # built from the repository's Dockerfile


def job_manifest(target: HardwareTarget, server: str, image: str = DEFAULT_IMAGE) -> dict[str, Any]:
    """The batch/v1 Job for one target (a catalog entry); raises nothing, every field is data."""
    container: dict[str, Any] = {
        "name": "agent",
        "image": image,
        "command": [
            "accelbench",
            "agent",
            "--once",
            "--idle-exit",
            "1800",  # a pod whose campaign has no job for its target ends after half an hour
            "--server",
            server,
            "--target",
            target.id,
            "--work-dir",
            "/work",
        ],
        "env": [
            {"name": "ACCELBENCH_TOKEN", "valueFrom": {"secretKeyRef": {"name": SECRET_NAME, "key": "token"}}}
        ],
        "volumeMounts": [{"name": "work", "mountPath": "/work"}],
    }
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [{"name": "work", "emptyDir": {}}],
    }
    if target.toolchain == "neuron":
        container["resources"] = {"limits": {NEURON_RESOURCE: 1}}
    elif target.id in GPU_PRODUCTS:
        pod["nodeSelector"] = {"nvidia.com/gpu.product": GPU_PRODUCTS[target.id]}
        container["resources"] = {"limits": {GPU_RESOURCE: 1}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": f"accelbench-agent-{_slug(target.id)}-",
            "labels": {"app.kubernetes.io/name": "accelbench-agent", "accelbench/target": _slug(target.id)},
        },
        "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 86400, "template": {"spec": pod}},
    }


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def write_job(
    target: HardwareTarget, server: str, out: Path, dumper: type, image: str = DEFAULT_IMAGE
) -> Path:
    """Write ``<out>/<target>.k8s.yaml``; ``kubectl create -f`` it (generateName: one Job per create)."""
    import yaml

    path = Path(out) / f"{target.id}.k8s.yaml"
    header = (
        f"# Kubernetes Job written by accelbench {__version__} (`accelbench plan cloud --server`).\n"
        f"# Needs the token Secret: kubectl create secret generic {SECRET_NAME} --from-literal=token=TOKEN\n"
        f"# Launch: kubectl create -f {path.name}\n"
    )
    atomic_write_text(
        path,
        header + yaml.dump(job_manifest(target, server, image), Dumper=dumper, sort_keys=False, width=120),
    )
    return path
