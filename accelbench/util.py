"""Small helpers every stage needs: atomic writes, hashing, JSON, ISO timestamps."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates 0600; results and reports are meant to be shared, so apply the usual umask instead
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Stable JSON (sorted keys, 2-space indent, trailing newline) written atomically."""
    atomic_write_text(path, stable_json_text(obj))


def stable_json_text(obj: Any) -> str:
    """The JSON accelbench writes: sorted keys, 2-space indent, trailing newline (byte-identical reruns)."""
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n"


def _json_default(obj: Any) -> Any:
    # numpy scalars and paths show up in results; convert them rather than fail mid-run
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def sha256_file(path: str | os.PathLike, chunk_bytes: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def canonical_json_text(obj: Any) -> str:
    """Compact JSON with sorted keys: what ``sha256_json`` hashes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default)


def sha256_json(obj: Any) -> str:
    """Hash of a JSON-able object, independent of key order."""
    return hashlib.sha256(canonical_json_text(obj).encode("utf-8")).hexdigest()


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()
