"""Generative (decoder-only, causal-LM) models: the card's ``[generative]`` table and the per-token costs.

A generative card (``task = "text-generation"``) says what the serving and cost stages need that an ONNX graph
does not: the tokenizer, the context length and the shape of the KV cache. The counts here are analytic
(from the architecture, docs/llm.md "Counting"): FLOPs per token are 2 × the matmul weights a token meets plus
attention over the context; bytes read per decode token are the weights plus the KV cache of the context.

Reference workload for the per-token figures: ISL 1024 / OSL 1024 (InferenceX's 1k/1k), clipped to the
context length. A prefill token attends on average to (ISL + 1) / 2 positions, a decode token to ISL + OSL / 2
(hardware/llm_roofline.py prefill_context and decode_context, which the projections use too).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError
from accelbench.hardware.llm_memory import KV_DTYPES, KV_PRECISION, SHAPE_KEYS, ModelShape, shape_fields
from accelbench.hardware.llm_roofline import decode_context, prefill_context, token_flops

TASK = "text-generation"
BUILTIN_TOKENIZER = "builtin:minilm-wordpiece"
REFERENCE_ISL = 1024
REFERENCE_OSL = 1024
DEFAULT_AGREEMENT = 0.9  # the card's accuracy.tolerance when a checkpoint has no card (docs/llm.md)
# the weight precisions whose exported graph keeps its KV cache at that precision; the others (weight-only
# int8 / int4 on CPUs) keep a float32 cache
FLOAT_KV_PRECISIONS = ("fp32", "fp16", "bf16", "fp8")
# the architectures hf:DIR accepts (config.json "model_type"); all are decoder-only with a KV cache
MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral", "phi3", "phi", "gemma", "gemma2", "gemma3_text")


# GenerativeSpec.to_dict()'s keys in the order cards and manifests have always written them
_DICT_KEYS = (
    "tokenizer",
    "context_length",
    "layers",
    "hidden_size",
    "heads",
    "kv_heads",
    "head_size",
    "intermediate_size",
    "vocab_size",
    "eos_token_id",
    "tie_word_embeddings",
    "hf_dir",
    "gate",
)


@dataclass(frozen=True, kw_only=True)
class GenerativeSpec(ModelShape):
    """A card's ``[generative]`` table: the transformer's shape (hardware.llm_memory.ModelShape, where its
    fields, validation and parameter, weight and KV counts are defined) and what serving it needs besides."""

    tokenizer: str  # a folder with tokenizer.json, or builtin:minilm-wordpiece
    eos_token_id: int | None = None
    hf_dir: str | None = None  # hf:DIR checkpoints: the folder with config.json and the weights
    # [generative.gate]: precision -> {agreement = lowest next-token agreement, kl = highest mean KL}
    gate: dict[str, dict[str, float]] | None = field(default=None, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        """The card's table (no name or source: the card has them)."""
        values = asdict(self)
        return {key: values[key] for key in _DICT_KEYS if values[key] is not None}

    # ------------------------------------------------------------------ counts
    def flops_per_token(self, context: float) -> float:
        """One token through the model attending to ``context`` positions (hardware/llm_roofline.token_flops)."""
        return token_flops(self.matmul_params, self.layers, self.heads, self.head_size, context)

    def kv_cache_bytes_per_token(self, kv_dtype: str = "float32") -> int:
        return int(self.kv_bytes_per_token(KV_PRECISION[kv_dtype]))

    @property
    def reference_isl(self) -> int:
        return min(REFERENCE_ISL, self.context_length // 2)

    @property
    def reference_osl(self) -> int:
        return min(REFERENCE_OSL, self.context_length - self.reference_isl)

    @property
    def prefill_context(self) -> float:
        return prefill_context(self.reference_isl)

    @property
    def decode_context(self) -> float:
        return decode_context(self.reference_isl, self.reference_osl)

    def graph_cost(
        self, precision: str, weight_bytes: float | None = None, kv_dtype: str = "float32"
    ) -> dict:
        """The manifest's ``graph_cost`` block (documents.GraphCost) for this model at ``precision``."""
        if weight_bytes is None:  # nothing measured: the linear layers at the precision, the rest at 16 bits
            weight_bytes = self.weight_bytes(precision)
        decode = self.flops_per_token(self.decode_context)
        return {
            "params": self.params,
            "flops_per_inference": decode,
            "weight_bytes": int(weight_bytes),
            "activation_bytes_per_inference": self.kv_cache_bytes_per_token(kv_dtype) * self.decode_context,
            "precision": precision,
            "flops_per_prefill_token": self.flops_per_token(self.prefill_context),
            "flops_per_decode_token": decode,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token(kv_dtype),
            "kv_dtype": kv_dtype,
            "context_length": self.context_length,
        }


def kv_dtype(precision: str) -> str:
    """The KV cache's dtype name in a graph exported at a weight precision (weight-only int8/int4 keep a
    float32 cache on CPU)."""
    return KV_DTYPES[precision if precision in FLOAT_KV_PRECISIONS else "fp32"][1]


def spec_from_table(table: dict[str, Any], origin: str) -> GenerativeSpec:
    """A card's ``[generative]`` table (or GenerativeSpec.to_dict()) → GenerativeSpec; BadInputError names
    the file and the field. The shape's keys are read by hardware.llm_memory.shape_fields."""
    shape = shape_fields(table, origin)
    known = {"tokenizer", "eos_token_id", "hf_dir", "gate"}
    unknown = sorted(set(table) - set(SHAPE_KEYS) - known)
    if unknown:
        raise BadInputError(f"{origin}: unknown field(s) in [generative]: {', '.join(unknown)}")
    try:
        return GenerativeSpec(
            tokenizer=str(table.get("tokenizer") or BUILTIN_TOKENIZER),
            eos_token_id=table.get("eos_token_id"),
            hf_dir=table.get("hf_dir"),
            gate=_gate_table(table.get("gate"), origin),
            **shape,
        )
    except BadInputError as err:
        raise BadInputError(f"{origin}: {err}") from None


def _gate_table(table: Any, origin: str) -> dict[str, dict[str, float]] | None:
    if table is None:
        return None
    bad = BadInputError(
        f"{origin}: field 'generative.gate': expected PRECISION = {{ agreement = 0.9, kl = 0.05 }} tables"
    )
    if not isinstance(table, dict):
        raise bad
    out = {}
    for precision, limits in table.items():
        if not isinstance(limits, dict) or set(limits) - {"agreement", "kl"}:
            raise bad
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in limits.values()):
            raise bad
        out[precision] = {k: float(v) for k, v in limits.items()}
    return out


def spec_from_hf_config(config_path: Path, tokenizer: str | None = None) -> GenerativeSpec:
    """The spec of a local Hugging Face causal-LM checkpoint from its config.json (Llama, Qwen, Mistral, Phi,
    Gemma layouts)."""
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BadInputError(f"{config_path}: unreadable config.json ({err})") from None
    model_type = config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise BadInputError(
            f"{config_path}: model_type {model_type!r} is not a supported causal LM; "
            f"supported: {', '.join(MODEL_TYPES)}"
        )
    config = config.get("text_config", config) if model_type == "gemma3" else config
    try:
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        layers = int(config["num_hidden_layers"])
        vocab = int(config["vocab_size"])
        intermediate = int(config["intermediate_size"])
    except (KeyError, TypeError, ValueError) as err:
        raise BadInputError(f"{config_path}: missing or bad field {err} for a causal LM") from None
    head_size = int(config.get("head_dim") or hidden // heads)
    eos = config.get("eos_token_id")
    folder = config_path.parent
    return GenerativeSpec(
        tokenizer=tokenizer or (str(folder) if (folder / "tokenizer.json").is_file() else BUILTIN_TOKENIZER),
        context_length=int(config.get("max_position_embeddings") or 2048),
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=int(config.get("num_key_value_heads") or heads),
        head_size=head_size,
        intermediate_size=intermediate,
        vocab_size=vocab,
        eos_token_id=int(eos[0] if isinstance(eos, list) else eos) if eos is not None else None,
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        hf_dir=str(folder.resolve()),
    )
