"""Read result documents (schema accelbench.result/1) from files and folders, from one host or many."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError

RESULT_SCHEMA = "accelbench.result/1"
_REQUIRED = ("run_id", "model", "target", "precision", "steps")


@dataclass(frozen=True)
class LoadedResult:
    doc: dict[str, Any]
    path: str  # as given on the command line, joined with the file's place under it
    sha256: str  # of the document's content (sorted keys), identifies it in provenance


def load_results(paths: list[str] | tuple[str, ...]) -> list[LoadedResult]:
    """Every result document under ``paths`` (files, or folders searched recursively), sorted.

    Other JSON files in the folders (variant manifests, telemetry) are skipped; a result document
    that is malformed is an error, because silently dropping a measurement would change the answer.
    """
    if not paths:
        raise BadInputError("no results given: pass one or more result files or folders")
    found: dict[str, LoadedResult] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise BadInputError(f"results path not found: {given}")
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*.json") if p.is_file())
        for file in files:
            loaded = _load_one(file, explicit=path.is_file())
            if loaded is not None:
                found.setdefault(loaded.sha256, loaded)  # the same file given twice counts once
    if not found:
        raise BadInputError(f"no {RESULT_SCHEMA} documents found in: {', '.join(map(str, paths))}")
    return sorted(found.values(), key=lambda r: (r.doc["model"], r.doc["target"], r.doc["run_id"], r.sha256))


def _load_one(file: Path, explicit: bool) -> LoadedResult | None:
    try:
        text = file.read_text(encoding="utf-8")
        doc = json.loads(text)
    except (OSError, UnicodeDecodeError) as err:
        raise BadInputError(f"cannot read results file {file}: {err}") from None
    except json.JSONDecodeError as err:
        if not explicit and not _looks_like_result(text):
            return None
        raise BadInputError(
            f"results file {file} is not valid JSON: {err.msg} at line {err.lineno}"
        ) from None
    if not isinstance(doc, dict) or doc.get("schema") != RESULT_SCHEMA:
        if explicit:
            raise BadInputError(f"{file} is not an {RESULT_SCHEMA} result document")
        return None
    missing = [k for k in _REQUIRED if k not in doc]
    if missing or not isinstance(doc.get("steps"), list):
        raise BadInputError(
            f"result document {file} is malformed: missing {', '.join(missing) or 'steps list'}"
        )
    from accelbench.util import sha256_json

    return LoadedResult(doc, os.fspath(file), sha256_json(doc))


def _looks_like_result(text: str) -> bool:
    return RESULT_SCHEMA in text[:4096]
