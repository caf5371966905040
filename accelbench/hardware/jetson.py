"""Parsers for what a Jetson says about itself: L4T release, module model, nvpmodel power mode.

Pure functions over text, tested on recorded real outputs (tests/data/hardware/). Formats: DOMAIN.md §5.1-5.2.
"""

from __future__ import annotations

import re
from typing import Any

# L4T → JetPack (subset of jtop's NVIDIA_JETPACK table, DOMAIN.md §5.1); unknown releases map to None.
L4T_TO_JETPACK = {
    "39.2.0": "7.2",
    "36.5.0": "6.2.2",
    "36.4.7": "6.2.1",
    "36.4.4": "6.2.1",
    "36.4.3": "6.2",
    "36.4.0": "6.1",
    "36.3.0": "6.0",
    "36.2.0": "6.0 DP",
    "35.5.0": "5.1.3",
    "35.4.1": "5.1.2",
    "35.3.1": "5.1.1",
    "35.2.1": "5.1",
    "35.1.0": "5.0.2",
}

_RELEASE_RE = re.compile(
    r"^#\s*R(?P<major>\d+)\s*\(release\),\s*REVISION:\s*(?P<revision>[\d.]+)(?P<rest>.*)$"
)


def parse_nv_tegra_release(text: str) -> dict[str, Any]:
    """``/etc/nv_tegra_release`` → ``{"l4t": "36.4.3", "jetpack": "6.2", "board": ..., ...}``.

    Raises ValueError when the first line is not an L4T release line.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    match = _RELEASE_RE.match(lines[0]) if lines else None
    if not match:
        first = lines[0][:80] if lines else "<empty>"
        raise ValueError(f"not an L4T release line: {first!r}")
    l4t = f"{match['major']}.{match['revision']}"
    fields = {}
    for part in match["rest"].split(","):
        if ":" in part:
            key, value = part.split(":", 1)
            fields[key.strip().lower()] = value.strip()
    result: dict[str, Any] = {
        "l4t": l4t,
        "jetpack": _jetpack_for(l4t),
        "board": fields.get("board"),
        "gcid": fields.get("gcid"),
        "eabi": fields.get("eabi"),
        "date": fields.get("date"),
    }
    for line in lines[1:]:
        if line.startswith("# KERNEL_VARIANT:"):
            result["kernel_variant"] = line.split(":", 1)[1].strip()
    return result


def _jetpack_for(l4t: str) -> str | None:
    if l4t in L4T_TO_JETPACK:
        return L4T_TO_JETPACK[l4t]
    if l4t.startswith("32.7."):
        return "4.6.x"
    if l4t.startswith("38.2."):
        return "7.0"
    return None


def parse_device_tree_model(raw: bytes | str) -> str:
    """``/proc/device-tree/model`` ends in a NUL byte; return the clean model string."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return text.replace("\x00", "").strip()


def jetson_catalog_id(model: str, memory_gb: float | None = None) -> str | None:
    """Catalog id for a Jetson module model string, or None when the catalog has no entry for it.

    The model string does not say the memory size, so ``memory_gb`` (what the OS reports, a little under the
    nominal size) tells the 64 GB AGX Orin from the 32 GB one, and the NX 16 GB / Nano 8 GB from smaller ones.
    """
    if "orin" not in model.lower():
        return None
    lowered = model.lower()
    if " nx" in lowered:
        candidate, min_gb = "jetson-orin-nx-16gb", 12.0
    elif "nano" in lowered:
        candidate, min_gb = "jetson-orin-nano-8gb", 6.0
    else:  # "Jetson AGX Orin", and the JetPack 5.0 pre-release "Orin Jetson-Small Developer Kit" (an AGX Orin)
        candidate, min_gb = "jetson-agx-orin-64gb", 48.0
    if memory_gb is not None and memory_gb < min_gb:
        return None
    return candidate


_MODE_RE = re.compile(r"NV Power Mode:\s*(?P<name>\w+)")


def parse_nvpmodel_query(text: str) -> dict[str, Any]:
    """``nvpmodel -q [--verbose]`` → ``{"mode_name": "MAXN", "mode_id": 0}``.

    The name follows ``NV Power Mode:`` and the numeric id is on the next line; warnings and verbose
    ``NVPM VERB:`` lines may come before or after. Raises ValueError when no mode line is present.
    """
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = _MODE_RE.search(line)
        if not match:
            continue
        mode_id = None
        for following in lines[index + 1 :]:
            if following.strip():
                mode_id = int(following.strip()) if following.strip().isdigit() else None
                break
        return {"mode_name": match["name"], "mode_id": mode_id}
    raise ValueError("no 'NV Power Mode:' line in nvpmodel output")
