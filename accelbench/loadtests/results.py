"""The result document (schema ``accelbench.result/1``, docs/architecture.md §5): build, resume, write.

The file is rewritten atomically after every step, so an interrupted run keeps what it finished. A rerun
with the same ``provenance.manifest_hash`` and ``load_profile`` continues after the finished steps; a step
that was cut short (``"aborted"``) is measured again.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError
from accelbench.util import atomic_write_json, utc_now_iso

SCHEMA = "accelbench.result/1"
_PACKAGES = ("accelbench", "locust", "tritonclient", "hdrhistogram", "gevent", "grpcio", "numpy", "psutil")


def package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def host_probe() -> dict[str, Any]:
    """What the load generator ran on (the accelerator is described by the server side and the catalog)."""
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def run_id(variant: str, profile_label: str) -> str:
    return f"{variant}__{profile_label}"


def new_document(
    *,
    model: str,
    variant: str,
    manifest: dict[str, Any] | None,
    load_profile: dict[str, Any],
    server: dict[str, Any],
    repository_config: str = "",
    command: str = "",
    profile_label: str,
) -> dict[str, Any]:
    """An empty document (no steps yet) with the provenance of this run."""
    manifest = manifest or {}
    accuracy = manifest.get("accuracy") or {}
    return {
        "schema": SCHEMA,
        "run_id": run_id(variant, profile_label),
        "origin": "accelbench-loadtest",
        "model": manifest.get("model", model),
        "variant": variant,
        "target": manifest.get("target"),
        "precision": manifest.get("precision"),
        "batch_size": load_profile["batch_size"],
        "accuracy": {k: accuracy.get(k) for k in ("metric", "value", "verdict")} if accuracy else None,
        "graph_cost": manifest.get("graph_cost"),
        "provenance": {
            "host": host_probe(),
            "packages": package_versions(),
            "manifest_hash": manifest.get("manifest_hash", ""),
            "repository_config": repository_config,
            "server": server,
            "created_at": utc_now_iso(),
            "command": command,
        },
        "load_profile": load_profile,
        "steps": [],
        "complete": False,
    }


def load_document(path: str | os.PathLike) -> dict[str, Any] | None:
    """The document at ``path``, or None when there is none; BadInputError when it is not ours."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise BadInputError(f"{path}: not a readable result document ({err})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise BadInputError(f"{path}: schema is not {SCHEMA}")
    return doc


def resumable(doc: dict[str, Any] | None, manifest_hash: str, load_profile: dict[str, Any]) -> bool:
    """True when ``doc`` measured the same variant under the same load profile."""
    return bool(
        doc
        and doc["provenance"].get("manifest_hash", "") == manifest_hash
        and doc.get("load_profile") == load_profile
    )


def finished_steps(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Steps that ran to their end (VALID or INVALID); a step cut short is measured again."""
    return [s for s in doc.get("steps", []) if not s.get("aborted")]


def save(doc: dict[str, Any], path: str | os.PathLike) -> None:
    doc["steps"].sort(key=lambda s: s["index"])
    atomic_write_json(path, doc)


def put_step(doc: dict[str, Any], step: dict[str, Any], path: str | os.PathLike) -> None:
    """Record ``step`` (replacing an earlier attempt at the same index) and rewrite the file."""
    doc["steps"] = [s for s in doc["steps"] if s["index"] != step["index"]] + [step]
    save(doc, path)
