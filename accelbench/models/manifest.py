"""The variant manifest (``manifest.json``, schema ``accelbench.variant/1``): how one variant was made.

One variant folder per (model, target, precision), see docs/architecture.md §3::

    <out>/<model>__<target>__<precision>/
        manifest.json  model.onnx | model.plan | model.neuron.pt  [build_engine.sh]  reference/{inputs,outputs}.npz

``write_manifest`` fills in ``files`` (sha256 of every other file in the folder), ``created_at`` and
``manifest_hash`` (sha256 of the manifest without ``created_at`` and ``manifest_hash``), validates, and writes
atomically. ``read_manifest`` validates and returns a :class:`Manifest` (a dict that also allows attribute access).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError
from accelbench.util import atomic_write_json, sha256_file, sha256_json, utc_now_iso

SCHEMA = "accelbench.variant/1"
MANIFEST_FILE = "manifest.json"
PRECISIONS = ("fp32", "fp16", "bf16", "int8")
FORMATS = ("onnx", "tensorrt-plan", "neuron")
VERDICTS = ("PASS", "FAIL", "NOT_RUN")
ENGINE_STATUSES = ("built", "must-build-on-target")

# field -> accepted python types (None means JSON null is allowed)
_FIELDS: dict[str, tuple] = {
    "schema": (str,),
    "name": (str,),
    "model": (str,),
    "card": (dict,),
    "source": (dict,),
    "target": (str,),
    "precision": (str,),
    "recipe": (str,),
    "format": (str,),
    "model_file": (str,),
    "toolchain": (dict,),
    "inputs": (list,),
    "outputs": (list,),
    "calibration": (dict, type(None)),
    "accuracy": (dict, type(None)),
    "graph_cost": (dict, type(None)),
    "engine": (dict, type(None)),
    "files": (dict,),
    "created_at": (str,),
    "manifest_hash": (str,),
}
_UNHASHED = ("created_at", "manifest_hash")
ATTEMPT_OUTCOMES = ("ok", "failed")


class Manifest(dict):
    """A validated manifest: a plain dict (JSON-ready) that also reads as attributes (``m.precision``)."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError as err:
            raise AttributeError(key) from err

    @property
    def verdict(self) -> str:
        """The accuracy verdict, NOT_RUN when no accuracy block was written."""
        return (self.get("accuracy") or {}).get("verdict", "NOT_RUN")


def variant_name(model: str, target: str, precision: str) -> str:
    """``<model>__<target>__<precision>``; also the Triton model name, so ``.`` becomes ``-``."""
    return "__".join(part.replace(".", "-") for part in (model, target, precision))


def manifest_hash(manifest: Mapping[str, Any]) -> str:
    """sha256 of the manifest without ``created_at`` and ``manifest_hash``: identifies a variant for resume."""
    return sha256_json({k: v for k, v in manifest.items() if k not in _UNHASHED})


def hash_files(variant_dir: str | os.PathLike) -> dict[str, str]:
    """sha256 of every file under the folder except the manifest, keyed by POSIX path relative to it."""
    root = Path(variant_dir)
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        # temporary files from an interrupted atomic write are not part of the variant
        if path.is_file() and rel != MANIFEST_FILE and not path.name.endswith(".tmp"):
            out[rel] = sha256_file(path)
    return out


def write_manifest(variant_dir: str | os.PathLike, manifest: Mapping[str, Any]) -> Manifest:
    """Complete (files, created_at, manifest_hash), validate and atomically write ``manifest.json``."""
    root = Path(variant_dir)
    data = dict(manifest)
    data.setdefault("schema", SCHEMA)
    data["files"] = hash_files(root)
    data["manifest_hash"] = manifest_hash(data)
    data["created_at"] = data.get("created_at") or utc_now_iso()
    validate_manifest(data, root / MANIFEST_FILE)
    atomic_write_json(root / MANIFEST_FILE, data)
    return Manifest(data)


def read_manifest(variant_dir: str | os.PathLike) -> Manifest:
    """Read and validate ``<dir>/manifest.json`` (``variant_dir`` may also be the file itself)."""
    path = Path(variant_dir)
    if path.is_dir() or path.name != MANIFEST_FILE:
        path = path / MANIFEST_FILE
    if not path.is_file():
        raise BadInputError(f"{path}: no variant manifest here (run `accelbench quantize` first)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadInputError(f"{path}: not valid JSON ({err})") from None
    validate_manifest(data, path)
    return Manifest(data)


def validate_manifest(data: Any, path: str | os.PathLike = MANIFEST_FILE) -> None:
    """Raise BadInputError naming the file and the first bad field."""

    def bad(field: str, why: str) -> BadInputError:
        return BadInputError(f"{path}: field '{field}' {why}")

    if not isinstance(data, dict):
        raise BadInputError(f"{path}: a manifest must be a JSON object")
    if data.get("schema") != SCHEMA:
        raise bad("schema", f"must be '{SCHEMA}', got {data.get('schema')!r}")
    for field, types in _FIELDS.items():
        if field not in data:
            raise bad(field, "is missing")
        if not isinstance(data[field], types):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise bad(field, f"must be {names}, got {type(data[field]).__name__}")
    _check_attempts(data, path)
    _check_choice(data["precision"], PRECISIONS, path, "precision")
    _check_choice(data["format"], FORMATS, path, "format")
    for side in ("inputs", "outputs"):
        for i, spec in enumerate(data[side]):
            if not (isinstance(spec, dict) and {"name", "dtype", "shape"} <= spec.keys()):
                raise bad(f"{side}[{i}]", "must have name, dtype and shape")
    if data["accuracy"] is not None:
        _check_choice(data["accuracy"].get("verdict"), VERDICTS, path, "accuracy.verdict")
    if data["engine"] is not None:
        _check_choice(data["engine"].get("status"), ENGINE_STATUSES, path, "engine.status")
    if "sha256" not in data["source"] or "uri" not in data["source"]:
        raise bad("source", "must have uri and sha256")


def _check_attempts(data: dict[str, Any], path: str | os.PathLike) -> None:
    """``attempts`` (optional): the recipes tried, each with recipe, outcome (ok | failed) and reason."""
    attempts = data.get("attempts", [])
    if not isinstance(attempts, list):
        raise BadInputError(f"{path}: field 'attempts' must be list, got {type(attempts).__name__}")
    for i, attempt in enumerate(attempts):
        if not (isinstance(attempt, dict) and {"recipe", "outcome", "reason"} <= attempt.keys()):
            raise BadInputError(f"{path}: field 'attempts[{i}]' must have recipe, outcome and reason")
        _check_choice(attempt["outcome"], ATTEMPT_OUTCOMES, path, f"attempts[{i}].outcome")


def _check_choice(value: Any, allowed: tuple[str, ...], path: str | os.PathLike, field: str) -> None:
    if value not in allowed:
        raise BadInputError(f"{path}: field '{field}' must be one of {', '.join(allowed)}; got {value!r}")


def verify_files(variant_dir: str | os.PathLike, manifest: Mapping[str, Any] | None = None) -> list[str]:
    """Names of files whose content no longer matches the manifest (missing files included)."""
    root = Path(variant_dir)
    manifest = manifest if manifest is not None else read_manifest(root)
    changed = []
    for rel, digest in manifest["files"].items():
        path = root / rel
        if not path.is_file() or sha256_file(path) != digest:
            changed.append(rel)
    return changed
