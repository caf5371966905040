"""Parser for ``neuron-ls --json-output`` (AWS Inferentia/Trainium devices) and the catalog match.

Pure functions; the format is the JSON array documented in aws-neuron-sdk ``neuron-ls.rst`` (DOMAIN.md §4).
"""

from __future__ import annotations

import json
from typing import Any

GIB = 1024**3

# (cores per device, device memory GiB, device count) → catalog id, for hosts whose instance type is unknown.
# inf2.xlarge and inf2.8xlarge both have one 2-core 32 GiB chip; the smaller (cheaper) one is assumed.
_SIGNATURES = {
    (2, 32, 1): "inf2-xlarge",
    (2, 32, 12): "inf2-48xlarge",
    (4, 8, 1): "inf1-xlarge",
}


def parse_neuron_ls_json(text: str) -> list[dict[str, Any]]:
    """``neuron-ls --json-output`` → one dict per device (index, cores, memory, core ids, PCI BDF, processes).

    Raises ValueError when the text is not the JSON array neuron-ls prints.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"neuron-ls output is not JSON: {err}") from None
    if not isinstance(data, list):
        raise ValueError("neuron-ls JSON output is not a list of devices")
    devices = []
    for entry in data:
        if not isinstance(entry, dict) or "neuron_device" not in entry:
            raise ValueError("neuron-ls JSON entry without 'neuron_device'")
        devices.append(
            {
                "index": entry["neuron_device"],
                "neuroncores": entry.get("nc_count"),
                "memory_bytes": entry.get("memory_size"),
                "neuroncore_ids": entry.get("neuroncore_ids", []),
                "bdf": entry.get("bdf"),
                "logical_neuroncore_config": entry.get("logical_neuroncore_config"),
                "processes": [
                    p.get("command") for p in entry.get("neuron_processes", []) if isinstance(p, dict)
                ],
            }
        )
    return devices


def neuron_catalog_id(devices: list[dict[str, Any]], instance_type: str | None = None) -> str | None:
    """Catalog id for a Neuron host: from its instance type when known, else from the device signature."""
    if instance_type:
        candidate = instance_type.strip().replace(".", "-")
        return candidate if candidate.startswith(("inf1-", "inf2-")) else None
    if not devices:
        return None
    first = devices[0]
    memory_gib = round((first.get("memory_bytes") or 0) / GIB)
    return _SIGNATURES.get((int(first.get("neuroncores") or 0), memory_gib, len(devices)))
