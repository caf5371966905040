"""Resolve a MODEL argument (``builtin:NAME``, ``hf:ID_OR_DIR``, a card ``.toml`` or a plain ``.onnx``) to a
model card and an ONNX file on disk."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from accelbench.errors import BadInputError
from accelbench.models.builtin import builtin_onnx_path, default_cache_dir
from accelbench.models.card_writer import card_from_graph
from accelbench.models.cards import AccuracySpec, GeneratorSpec, ModelCard, TensorSpec, card_name, load_card
from accelbench.models.generative import DEFAULT_AGREEMENT, TASK, spec_from_hf_config
from accelbench.models.intake import check_onnx_file


@dataclass(frozen=True)
class ResolvedModel:
    card: ModelCard
    onnx_path: Path


def resolve_model(arg: str | os.PathLike, shapes: Sequence[str] = ()) -> ResolvedModel:
    """The card and FP32 ONNX file for a MODEL argument; BadInputError for anything missing or malformed.

    ``shapes`` (``NAME:D1,D2,…``, as ``--shape`` gives them) fix a bare ONNX file's dynamic input sizes, as
    ``accelbench models card --shape`` does; a card or built-in model carries its shapes already."""
    text = os.fspath(arg)
    if shapes:
        if text.startswith(("builtin:", "hf:")) or Path(text).suffix.lower() == ".toml":
            raise BadInputError(
                f"--shape applies to a bare .onnx file; {text} has a model card: set the sizes in its "
                "[[inputs]] shapes"
            )
        path = Path(text).expanduser()
        return ResolvedModel(bare_onnx_card(path, shapes), path)
    if text.startswith("builtin:"):
        card = load_card(text)
        return ResolvedModel(card, onnx_for_card(card))
    if text.startswith("hf:") and is_causal_lm_dir(text[3:]):
        card = causal_lm_card(Path(text[3:]).expanduser())
        return ResolvedModel(card, onnx_for_card(card))
    if text.startswith("hf:"):
        path = _export_hf(text)
        return ResolvedModel(bare_onnx_card(path, name=card_name(text[3:])), path)
    path = Path(text).expanduser()
    if path.suffix.lower() == ".toml":
        card = load_card(path)
        return ResolvedModel(card, onnx_for_card(card))
    return ResolvedModel(bare_onnx_card(path), path)


def bare_onnx_card(path: Path, shapes: Sequence[str] = (), name: str | None = None) -> ModelCard:
    """The card of an ONNX file that has none: what ``accelbench models card`` would write for it
    (card_writer.card_from_graph, docs/models.md), its source absolute as there is no card file to be relative
    to."""
    card = card_from_graph(path, shapes, name=name)
    return dataclasses.replace(card, source=f"onnx:{path.resolve()}", card_path=None)


def generative_card(arg: str | os.PathLike) -> ModelCard | None:
    """The card when MODEL is a generative model (built-in, card or causal-LM checkpoint), without
    building or exporting anything; None for every other model."""
    text = os.fspath(arg)
    if text.startswith("hf:"):
        return causal_lm_card(Path(text[3:]).expanduser()) if is_causal_lm_dir(text[3:]) else None
    if text.startswith("builtin:") or Path(text).suffix.lower() == ".toml":
        card = load_card(text)
        return card if card.generative is not None else None
    return None


def onnx_for_card(card: ModelCard) -> Path:
    """The ONNX file a card's ``source`` names: built, exported or checked as needed."""
    scheme, value = card.source_scheme, card.source_value
    if card.generative is not None:
        from accelbench.models.export_llm import generative_files  # torch/optimum only for these

        return generative_files(card).onnx_path
    if scheme == "builtin":
        return builtin_onnx_path(value)
    if scheme == "hf":
        local = card.resolve_path(value)
        return _export_hf(f"hf:{local}" if local.is_dir() else card.source)
    path = card.resolve_path(value)
    check_onnx_file(path)
    return path


def is_causal_lm_dir(text: str) -> bool:
    """A local checkpoint folder whose config.json names a causal-LM architecture (…ForCausalLM)."""
    config = Path(text).expanduser() / "config.json"
    if not config.is_file():
        return False
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return any(str(a).endswith("ForCausalLM") for a in data.get("architectures") or [])


def causal_lm_card(folder: Path) -> ModelCard:
    """The card of a local causal-LM checkpoint (Llama, Qwen, Mistral, Phi, Gemma) from its config.json."""
    spec = spec_from_hf_config(folder / "config.json")
    return ModelCard(
        name=card_name(str(folder)),
        source=f"hf:{folder.resolve()}",
        task=TASK,
        inputs=(TensorSpec("input_ids", "int64", (-1, -1)),),
        outputs=(TensorSpec("logits", "float32", (-1, -1, spec.vocab_size)),),
        generator=GeneratorSpec(kind="tokens", vocab_size=spec.vocab_size, seq_len=128),
        accuracy=AccuracySpec("next_token_agreement", DEFAULT_AGREEMENT, "logits"),
        description=f"causal LM from {folder}",
        generative=spec,
    )


def _export_hf(source: str) -> Path:
    from accelbench.models.export_hf import export_hf  # optimum/torch only when an hf: model is asked for

    key = hashlib.sha256(source.encode()).hexdigest()[:12]
    out_dir = default_cache_dir().parent / "hf" / f"{card_name(source[3:])}-{key}"
    path = export_hf(source, out_dir)
    check_onnx_file(path)
    return path
