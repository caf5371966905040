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

import onnx

from accelbench.errors import BadInputError
from accelbench.models.builtin import builtin_onnx_path, default_cache_dir
from accelbench.models.card_writer import card_from_graph
from accelbench.models.cards import AccuracySpec, GeneratorSpec, ModelCard, TensorSpec, card_name, load_card
from accelbench.models.generative import DEFAULT_AGREEMENT, TASK, spec_from_hf_config
from accelbench.models.intake import check_onnx_file

# A plain .onnx has no card: compare outputs by max abs error at a loose default (write a card to do better).
INFERRED_MAX_ABS_TOLERANCE = 1e-2
INFERRED_COSINE_TOLERANCE = 0.99


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
        card = card_from_graph(path, shapes)  # its source is relative to a card file; here there is none
        return ResolvedModel(dataclasses.replace(card, source=f"onnx:{path.resolve()}"), path)
    if text.startswith("builtin:"):
        card = load_card(text)
        return ResolvedModel(card, onnx_for_card(card))
    if text.startswith("hf:") and is_causal_lm_dir(text[3:]):
        card = causal_lm_card(Path(text[3:]).expanduser())
        return ResolvedModel(card, onnx_for_card(card))
    if text.startswith("hf:"):
        path = _export_hf(text)
        return ResolvedModel(infer_card(path, name=card_name(text[3:])), path)
    path = Path(text).expanduser()
    if path.suffix.lower() == ".toml":
        card = load_card(path)
        return ResolvedModel(card, onnx_for_card(card))
    check_onnx_file(path)
    return ResolvedModel(infer_card(path), path)


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


def _tensor_specs(values, skip: set[str], batch: str, axes: dict[str, int | None]) -> tuple[TensorSpec, ...]:
    """Specs as the graph declares them: -1 where dynamic, the batch axis where ``axes`` (or, for outputs,
    the first axis when it is the batch) says."""
    specs = []
    fixed = batch.partition(":")[2]
    for value in values:
        if value.name in skip:
            continue
        tensor_type = value.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type).name
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim]
        if value.name in axes:
            axis = axes[value.name]
        else:  # an output: its first axis, when that is where a batch can be
            axis = 0 if dims and (dims[0] == -1 if batch == "dynamic" else str(dims[0]) == fixed) else None
        if axis is not None and batch == "dynamic":
            dims[axis] = -1
        specs.append(TensorSpec(value.name, dtype, tuple(dims), batch_axis=axis))
    return tuple(specs)


def infer_card(path: Path, name: str | None = None) -> ModelCard:
    """A card for a bare ONNX file: tensors from the graph, metric max_abs on the first output (cosine on
    ``sentence_embedding`` when the graph is a sentence-transformers export)."""
    model = onnx.load(str(path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    from accelbench.models.graph_batch import graph_batch

    found = graph_batch([v for v in model.graph.input if v.name not in initializers], set())
    inputs = _tensor_specs(model.graph.input, initializers, found.batch, found.axes)
    outputs = _tensor_specs(model.graph.output, set(), found.batch, {})
    token_like = any(s.dtype.startswith("int") and "ids" in s.name for s in inputs)
    seq = next((s.shape[1] for s in inputs if len(s.shape) > 1 and s.shape[1] > 0), None)
    generator = (
        GeneratorSpec(kind="tokens", seq_len=seq or 128)
        if token_like
        else GeneratorSpec(kind="uniform", low=-1.0, high=1.0)
    )
    # A sentence-transformers export (optimum, FIELD-NOTES) is an embedding model: compare by cosine.
    embedding = next((o.name for o in outputs if o.name == "sentence_embedding"), None)
    accuracy = (
        AccuracySpec("cosine", INFERRED_COSINE_TOLERANCE, embedding)
        if embedding
        else AccuracySpec("max_abs", INFERRED_MAX_ABS_TOLERANCE, outputs[0].name if outputs else None)
    )
    return ModelCard(
        name=name or card_name(path.stem),
        source=f"onnx:{path.resolve()}",
        task="embedding" if embedding else "other",
        batch=found.batch,
        inputs=inputs,
        outputs=outputs,
        generator=generator,
        accuracy=accuracy,
        description=f"inferred from {path.name}",
        card_path=None,
    )


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
