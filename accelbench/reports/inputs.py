"""Load result documents (accelbench.result/1) from files and folders, from one host or many.

The reports take documents, not paths (``build_report``/``render_report``): this module is the folder source;
the service's database is another.
"""

from __future__ import annotations

import json
from pathlib import Path

from accelbench.documents import RESULT_SCHEMA, ResultDocument, load_result
from accelbench.errors import BadInputError


def load_documents(paths: list[str] | tuple[str, ...]) -> list[ResultDocument]:
    """Every result document under ``paths`` (files, or folders searched recursively), each once.

    Other JSON files in the folders (variant manifests, telemetry) are skipped; a result document
    that is malformed is an error, because silently dropping a measurement would change the answer.
    """
    return [doc for _file, doc in load_documents_with_files(paths)]


def load_documents_with_files(paths: list[str] | tuple[str, ...]) -> list[tuple[Path, ResultDocument]]:
    """``load_documents``, with the file each document was read from (``accelbench push`` names it)."""
    if not paths:
        raise BadInputError("no results given: pass one or more result files or folders")
    found: dict[str, tuple[Path, ResultDocument]] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise BadInputError(f"results path not found: {given}")
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*.json") if p.is_file())
        for file in files:
            doc = _load_one(file, explicit=path.is_file())
            if doc is not None:
                found.setdefault(doc.content_hash(), (file, doc))  # the same file given twice counts once
    if not found:
        raise BadInputError(f"no {RESULT_SCHEMA} documents found in: {', '.join(map(str, paths))}")
    return list(found.values())


def _load_one(file: Path, explicit: bool) -> ResultDocument | None:
    try:
        text = file.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError) as err:
        raise BadInputError(f"cannot read results file {file}: {err}") from None
    except json.JSONDecodeError as err:
        if not explicit and RESULT_SCHEMA not in text[:4096]:
            return None  # some other broken JSON file in a results folder
        raise BadInputError(
            f"results file {file} is not valid JSON: {err.msg} at line {err.lineno}"
        ) from None
    if not explicit and not (isinstance(data, dict) and data.get("schema") == RESULT_SCHEMA):
        return None  # another kind of JSON file in a results folder (manifest, telemetry)
    return load_result(data, str(file))
