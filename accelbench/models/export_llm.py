"""Causal-LM checkpoints to ONNX with their KV cache, offline, and the files a generative variant carries.

``generative_files(card)`` returns the Hugging Face checkpoint folder, the tokenizer folder and the ONNX file
(optimum's ``main_export(task="text-generation-with-past")``: inputs ``input_ids``, ``attention_mask``,
``position_ids``, ``past_key_values.N.key/value`` ``[batch, kv_heads, past, head_size]``; outputs ``logits`` and
``present.N.key/value``). The export runs in a child process whose environment says ``HF_HUB_OFFLINE=1``, so
no network is touched and this process's environment is left alone. Results are cached by content.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from accelbench.errors import BadInputError
from accelbench.models.builtin import SEED, default_cache_dir
from accelbench.models.cards import ModelCard
from accelbench.models.export_hf import optimum_export
from accelbench.models.generative import BUILTIN_TOKENIZER, GenerativeSpec
from accelbench.util import atomic_write_json

log = logging.getLogger(__name__)
EXPORT_TASK = "text-generation-with-past"
EXPORT_VERSION = 1  # raise when the export itself changes: cached builds then make a new folder


@dataclass(frozen=True)
class GenerativeFiles:
    hf_dir: Path  # config.json + weights
    tokenizer_dir: Path  # tokenizer.json (+ tokenizer_config.json, vocab.txt)
    onnx_path: Path  # model.onnx with the KV cache inputs


def generative_files(card: ModelCard) -> GenerativeFiles:
    """Build (builtin) or find (hf:DIR) the checkpoint, and export it once; later calls hit the cache."""
    spec = card.generative
    if spec is None:
        raise BadInputError(f"{card.name}: not a text-generation card")
    if card.source_scheme == "builtin":
        root = default_cache_dir() / f"{card.name}-{_builtin_version(card.name, spec)}"
        hf_dir = root / "hf"
        if not (hf_dir / "config.json").is_file():
            from accelbench.models.builtin.llama import build_llama_checkpoint

            log.info("building %s with fixed-seed weights", card.source)
            tmp = _scratch(hf_dir)
            build_llama_checkpoint(spec, tmp, SEED)
            _publish(tmp, hf_dir)
    else:
        hf_dir = Path(spec.hf_dir or card.resolve_path(card.source_value))
        if not (hf_dir / "config.json").is_file():
            raise BadInputError(f"{hf_dir}: not a Hugging Face model folder (no config.json)")
        root = default_cache_dir().parent / "hf-llm" / f"{_safe(hf_dir.name)}-{_fingerprint(hf_dir)}"
    tokenizer_dir = _tokenizer_dir(spec.tokenizer, root / "tokenizer")
    onnx_path = root / "onnx" / "model.onnx"
    if not onnx_path.is_file():
        export_causal_lm(hf_dir, onnx_path.parent)
    return GenerativeFiles(hf_dir, tokenizer_dir, onnx_path)


def export_causal_lm(hf_dir: Path, out_dir: Path) -> Path:
    """``out_dir/model.onnx`` from the checkpoint in ``hf_dir``, exported by optimum in a child process."""
    tmp = _scratch(out_dir)
    log.info("exporting %s to ONNX with its KV cache (optimum)", hf_dir)
    optimum_export(hf_dir, tmp, str(hf_dir), task=EXPORT_TASK, device="cpu")
    if not (tmp / "model.onnx").is_file():
        raise BadInputError(f"{hf_dir}: optimum wrote no model.onnx")
    atomic_write_json(tmp / "export.json", {"source": str(hf_dir), "task": EXPORT_TASK})
    _publish(tmp, out_dir)
    return out_dir / "model.onnx"


def _scratch(final: Path) -> Path:
    """A private folder beside ``final``: concurrent builders never write into each other's files."""
    import tempfile

    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))


def _publish(tmp: Path, final: Path) -> None:
    """Rename the finished folder into place; when another builder got there first, keep theirs."""
    import shutil

    try:
        tmp.rename(final)
    except OSError:  # final exists (a concurrent build of the same content finished first)
        shutil.rmtree(tmp, ignore_errors=True)


def _tokenizer_dir(tokenizer: str, cache: Path) -> Path:
    from accelbench.models.builtin.llama import copy_tokenizer

    if tokenizer == BUILTIN_TOKENIZER:
        if not (cache / "tokenizer.json").is_file():
            copy_tokenizer(cache)
        return cache
    path = Path(os.path.expanduser(tokenizer))
    if not (path / "tokenizer.json").is_file():
        raise BadInputError(f"tokenizer {tokenizer}: no tokenizer.json in that folder")
    return path


def _builtin_version(name: str, spec: GenerativeSpec) -> str:
    # the architecture only: the gate thresholds and the tokenizer do not change the checkpoint
    shape = {k: v for k, v in spec.to_dict().items() if k not in ("gate", "tokenizer", "hf_dir")}
    digest = hashlib.sha256(f"{name}:{SEED}:{sorted(shape.items())}".encode())
    digest.update(f"{EXPORT_TASK}:{EXPORT_VERSION}".encode())
    digest.update((Path(__file__).parent / "builtin" / "llama.py").read_bytes())
    return digest.hexdigest()[:12]


def _fingerprint(folder: Path) -> str:
    """Names, sizes and modification times of the checkpoint's files (hashing GBs of weights is too slow)."""
    digest = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:12]


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "model"
