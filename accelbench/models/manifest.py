"""The variant manifest (``manifest.json``, schema ``accelbench.variant/1``): how one variant was made.

One variant folder per (model, target, precision), see docs/architecture.md §3::

    <out>/<model>__<target>__<precision>/
        manifest.json  model.onnx | model.plan | model.neuron.pt  [build_engine.sh]  reference/{inputs,outputs}.npz

``write_manifest`` fills in ``files`` (sha256 of every other file in the folder), ``created_at`` and
``manifest_hash`` (sha256 of the manifest without ``created_at`` and ``manifest_hash``), validates, and writes
atomically. Both return the typed ``documents.VariantManifest`` (the schema); a manifest read and written again
is byte-identical.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelbench.documents import (
    VARIANT_SCHEMA,
    VariantManifest,
    dump_json,
    load_manifest,
    read_json,
)
from accelbench.errors import BadInputError
from accelbench.util import atomic_write_text, sha256_file, sha256_json, utc_now_iso

SCHEMA = VARIANT_SCHEMA
MANIFEST_FILE = "manifest.json"
_UNHASHED = ("created_at", "manifest_hash")


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


def write_manifest(variant_dir: str | os.PathLike, manifest: Mapping[str, Any]) -> VariantManifest:
    """Complete (files, created_at, manifest_hash), validate and atomically write ``manifest.json``."""
    root = Path(variant_dir)
    data = dict(manifest)
    data.setdefault("schema", SCHEMA)
    data["files"] = hash_files(root)
    data["manifest_hash"] = manifest_hash(data)
    data["created_at"] = data.get("created_at") or utc_now_iso()
    document = load_manifest(data, str(root / MANIFEST_FILE))
    atomic_write_text(root / MANIFEST_FILE, dump_json(document))
    return document


def read_manifest(variant_dir: str | os.PathLike) -> VariantManifest:
    """Read and validate ``<dir>/manifest.json`` (``variant_dir`` may also be the file itself)."""
    path = Path(variant_dir)
    if path.is_dir() or path.name != MANIFEST_FILE:
        path = path / MANIFEST_FILE
    if not path.is_file():
        raise BadInputError(f"{path}: no variant manifest here (run `accelbench quantize` first)")
    return load_manifest(read_json(path), str(path))


def validate_manifest(data: Any, path: str | os.PathLike = MANIFEST_FILE) -> None:
    """Raise BadInputError naming the file and the first bad field."""
    load_manifest(data, str(path))


def verify_files(variant_dir: str | os.PathLike, manifest: VariantManifest | None = None) -> list[str]:
    """Names of files whose content no longer matches the manifest (missing files included)."""
    root = Path(variant_dir)
    manifest = manifest if manifest is not None else read_manifest(root)
    changed = []
    for rel, digest in manifest.files.items():
        path = root / rel
        if not path.is_file() or sha256_file(path) != digest:
            changed.append(rel)
    return changed
