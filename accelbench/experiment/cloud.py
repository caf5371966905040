"""`accelbench plan cloud`: one SkyPilot task YAML per cloud target of a spec.

Each task installs accelbench on a machine with that accelerator, runs ``accelbench run SPEC --target ID`` (the
spec restricted to that target, measured there), and copies ``results/`` and ``report/`` into a bucket mounted
at ``/accelbench-results/<target>/``. With ``server`` (a results service running campaigns) the task instead runs
``accelbench agent --once --server URL --target ID``: the host takes its target's job from the campaign, pushes
its results to the server and ends; the runner token comes from a SkyPilot secret (``--secret ACCELBENCH_TOKEN``). Gather the buckets' ``*/results`` folders and run ``accelbench report``
over all of them to merge hosts. Jetson (edge) targets and the local CPU are not cloud machines: they are
skipped with the reason, as are targets without a toolchain accelbench can drive (TPU).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from accelbench import __version__
from accelbench.experiment.spec import ExperimentSpec
from accelbench.hardware.catalog import Catalog, HardwareTarget
from accelbench.util import atomic_write_text

# catalog id -> SkyPilot accelerator name (`sky show-gpus`)
SKY_ACCELERATORS = {
    "a100-sxm4-80gb": "A100-80GB",
    "a100-sxm4-40gb": "A100",
    "a100-pcie-40gb": "A100",
    "a100-pcie-80gb": "A100-80GB",
    "h100-sxm": "H100",
    "h100-pcie": "H100",
    "h200-sxm": "H200",
    "l4": "L4",
    "l40s": "L40S",
    "t4": "T4",
    "a10g": "A10G",
    # inf2.xlarge carries one Inferentia2 chip (skypilot-catalog aws vms.csv: AcceleratorName Inferentia2, count 1)
    "inf2-xlarge": "Inferentia2",
}
TOKEN_ENV = "ACCELBENCH_TOKEN"
AGENT_WORK_DIR = "~/accelbench-work"
SKY_CLOUDS = ("aws", "gcp", "azure")
REMOTE_SPEC = "~/accelbench/spec.toml"
RESULTS_MOUNT = "/accelbench-results"
NEURON_INDEX = "https://pip.repos.neuron.amazonaws.com"
_EXTRAS = {"tensorrt": "gpu,tensorrt", "neuron": "", "onnxruntime-cpu": ""}


def _resources(target: HardwareTarget) -> dict[str, Any] | str:
    """SkyPilot resources for a catalog target, or why it cannot be a cloud task."""
    price = target.price
    if target.kind in ("edge-gpu", "edge"):
        return "a Jetson is not a cloud machine: run `accelbench run SPEC --target ID` on the device (docs/jetson.md)"
    if target.toolchain not in _EXTRAS:
        return f"accelbench has no {target.toolchain} toolchain to measure with; it stays projected"
    # the priced instance, when it is one accelerator on a cloud SkyPilot launches
    single = (
        price if price and price.accelerators_per_instance == 1 and price.provider in SKY_CLOUDS else None
    )
    if target.id in SKY_ACCELERATORS:
        res: dict[str, Any] = {"accelerators": f"{SKY_ACCELERATORS[target.id]}:1", "disk_size": 100}
        if single:  # the instance the catalog prices: measure what the report charges for
            res.update(
                infra=f"{single.provider}/{single.region}" if single.region else single.provider,
                instance_type=single.instance,
            )
        return res
    if single:
        infra = f"{single.provider}/{single.region}" if single.region else single.provider
        return {"infra": infra, "instance_type": single.instance, "disk_size": 100}
    return f"no single-accelerator cloud instance for {target.id} in the catalog (price provider {getattr(price, 'provider', None)})"


def _setup(target: HardwareTarget, pip_spec: str) -> str:
    lines = [
        "set -euo pipefail",
        "python3 -m venv ~/accelbench-venv",
        "source ~/accelbench-venv/bin/activate",
        "pip install --upgrade pip",
    ]
    if target.toolchain == "neuron":
        # torch-neuronx and neuronx-cc on plain PyPI are placeholders; the real wheels are on Neuron's index
        lines.append(f"pip install --extra-index-url {NEURON_INDEX} torch-neuronx neuronx-cc")
    lines.append(f"pip install '{pip_spec}'")
    return "\n".join(lines) + "\n"


def _run_agent(target_id: str, server: str) -> str:
    return (
        "\n".join(
            [
                "set -euo pipefail",
                "source ~/accelbench-venv/bin/activate",
                # --idle-exit: a host whose campaign has no job for it stops (and stops billing) after half an hour
                f"accelbench agent --once --idle-exit 1800 --server {server} --target {target_id} --work-dir {AGENT_WORK_DIR}",
            ]
        )
        + "\n"
    )


def _run(target_id: str) -> str:
    return (
        "\n".join(
            [
                "set -euo pipefail",
                "source ~/accelbench-venv/bin/activate",
                f"accelbench run {REMOTE_SPEC} --target {target_id} --out ~/accelbench-out",
                f"mkdir -p {RESULTS_MOUNT}/{target_id}",
                f"cp -r ~/accelbench-out/results ~/accelbench-out/report ~/accelbench-out/run.json {RESULTS_MOUNT}/{target_id}/",
            ]
        )
        + "\n"
    )


def _default_pip_spec(target: HardwareTarget) -> str:
    extras = _EXTRAS.get(target.toolchain, "")
    return f"accelbench[{extras}]=={__version__}" if extras else f"accelbench=={__version__}"


def task_for(
    spec: ExperimentSpec,
    spec_path: str | os.PathLike,
    target_id: str,
    catalog: Catalog,
    bucket: str | None = None,
    pip_spec: str | None = None,
    server: str | None = None,
) -> dict[str, Any] | str:
    """The SkyPilot task (as a dict) for one target, or the reason there is none."""
    target = catalog.get(target_id)
    resources = _resources(target)
    if isinstance(resources, str):
        return f"{target_id}: {resources}"
    if server:  # the spec travels in the campaign, the results go to the server: no mounts needed
        return {
            "name": f"accelbench-agent-{_slug(target_id)}",
            "resources": resources,
            "envs": {"ACCELBENCH_TARGET": target_id},
            "secrets": {TOKEN_ENV: None},  # given at launch: sky launch --secret ACCELBENCH_TOKEN
            "setup": _setup(target, pip_spec or _default_pip_spec(target)),
            "run": _run_agent(target_id, server),
        }
    store = bucket or f"accelbench-{_slug(spec.name)}-results"
    mount: dict[str, Any] = (
        {"source": bucket, "mode": "MOUNT"} if bucket else {"name": store, "mode": "MOUNT"}
    )
    return {
        "name": f"accelbench-{_slug(spec.name)}-{_slug(target_id)}",
        "resources": resources,
        "file_mounts": {REMOTE_SPEC: str(Path(spec_path).resolve()), RESULTS_MOUNT: mount},
        "envs": {"ACCELBENCH_TARGET": target_id},
        "setup": _setup(target, pip_spec or _default_pip_spec(target)),
        "run": _run(target_id),
    }


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _dumper() -> type:
    import yaml

    class Dumper(yaml.SafeDumper):
        """Multi-line shell scripts as literal blocks, so the YAML reads like the script it runs."""

    def text(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
        style = "|" if "\n" in data else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    Dumper.add_representer(str, text)
    return Dumper


def write_cloud_plan(
    spec: ExperimentSpec,
    spec_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    bucket: str | None = None,
    pip_spec: str | None = None,
    catalog_path: str | None = None,
    server: str | None = None,
) -> list[tuple[Path | None, str | None]]:
    """Write ``<out>/<target>.sky.yaml`` per cloud target; returns (path, None) or (None, why skipped).

    With ``server`` the tasks run the campaign agent, and a Kubernetes Job per target is written beside them.
    """
    from accelbench.hardware.catalog import load_catalog

    catalog = load_catalog(catalog_path)
    import yaml

    _Dumper = _dumper()  # noqa: N806 - a class
    out = Path(out_dir)
    written: list[tuple[Path | None, str | None]] = []
    ids = [t.id for t in spec.targets if t.mode != "url"]  # a url target is already served somewhere
    ids += [spec.baseline] if spec.baseline not in ids else []
    if server:  # a campaign queues a job per measured target only; projected ones stay projected
        ids = [t.id for t in spec.targets if t.mode == "local"]
    for target_id in ids:
        task = task_for(spec, spec_path, target_id, catalog, bucket, pip_spec, server)
        if isinstance(task, str):
            written.append((None, task))
            continue
        path = out / f"{target_id}.sky.yaml"
        secret = f" --secret {TOKEN_ENV}" if server else ""
        header = (
            f"# SkyPilot task written by accelbench {__version__} (`accelbench plan cloud`).\n"
            f"# Launch: sky launch -c {task['name']}{secret} {path.name}   (then: sky down {task['name']})\n"
        )
        atomic_write_text(path, header + yaml.dump(task, Dumper=_Dumper, sort_keys=False, width=120))
        written.append((path, None))
        if server:
            from accelbench.experiment.kube import write_job

            written.append((write_job(catalog.get(target_id), server, out, _Dumper), None))
    return written
