"""Memory arithmetic for generative models: weights by precision, the KV cache, and what fits where. Pure.

- Parameters of a Llama-architecture decoder from its published config: per layer the attention projections
  (q, o: hidden × heads·head; k, v: hidden × kv_heads·head) and the SwiGLU MLP (3 × hidden × intermediate), the
  RMSNorm weights, the token embedding and the LM head (none when tied).
- Weights bytes by precision (WEIGHT_FORMATS): the transformer blocks' linear layers at the precision, the
  embedding, LM head and norms kept at 16 bits, as TensorRT-LLM / ModelOpt, AWQ and ONNX Runtime's MatMulNBits
  checkpoints do. INT4 counts its scales: one FP16 scale per group of 128 weights (AWQ's default group size),
  so 0.5 + 2/128 bytes per weight. FP8 and INT8 per-tensor / per-channel scales are negligible (not counted).
- KV cache bytes per token = 2 (K and V) × layers × KV heads × head size × bytes of the KV dtype.
- Fit: per accelerator, usable memory = (1 − ACTIVATION_RESERVE_FRACTION) × memory, as vLLM sizes it
  (gpu_memory_utilization, default 0.9, a fraction of the total memory: docs.vllm.ai engine arguments); the KV
  cache gets what is left of it after the weights and the activations of a forward pass (activation_bytes:
  vLLM profiles one of max_num_batched_tokens); the other 10 % is the CUDA context, NCCL and the runtime.
  Tensor parallelism over t accelerators of one instance splits the weights and the KV heads t ways (a KV head
  is never split: with t > KV heads each accelerator keeps ceil(KV heads / t)). The largest number of concurrent
  sequences at a context length is ⌊(usable − weights per accelerator) ÷ KV bytes per sequence per accelerator⌋;
  the model fits when that is at least 1. Catalog memory is read as GB (10⁹ bytes), the conservative reading of
  datasheets that mean GiB.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import HardwareTarget
from accelbench.hardware.catalog_schema import ELEMENT_BYTES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ACTIVATION_RESERVE_FRACTION = 0.10
MAX_NUM_TOKENS = (
    8192  # tokens one forward pass holds (vLLM max_num_batched_tokens, TensorRT-LLM max_num_tokens)
)
LOGIT_ROWS = 256  # sequences sampled per step whose FP32 logits are live (vLLM's default max_num_seqs)
INT4_GROUP_SIZE = 128
TP_DEGREES = (1, 2, 4, 8, 16)
CARDS_DIR = Path(__file__).resolve().parent.parent / "models" / "cards"

# precision -> bytes per weight of the blocks' linear layers (scales included), and what it stands for
WEIGHT_FORMATS: dict[str, tuple[float, str]] = {
    "fp32": (float(ELEMENT_BYTES["fp32"]), "FP32 weights"),
    "fp16": (float(ELEMENT_BYTES["fp16"]), "FP16 weights"),
    "bf16": (float(ELEMENT_BYTES["bf16"]), "BF16 weights"),
    "fp8": (float(ELEMENT_BYTES["fp8"]), "FP8 E4M3 weights (per-tensor scales)"),
    "int8": (
        float(ELEMENT_BYTES["int8"]),
        "INT8 weights (per-channel scales; SmoothQuant W8A8 or weight-only)",
    ),
    "int4": (
        0.5 + 2.0 / INT4_GROUP_SIZE,
        "INT4 weights, FP16 scale per group of 128 (AWQ W4A16, MatMulNBits)",
    ),
    "fp4": (0.5 + 1.0 / 16, "NVFP4 weights, FP8 scale per block of 16"),
}
# KV cache dtypes: precision name -> bytes per element, and the dtype name an exported graph's cache holds
_KV_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "fp8", "int8": "int8"}
KV_DTYPES: dict[str, tuple[float, str]] = {
    p: (float(ELEMENT_BYTES[p]), name) for p, name in _KV_NAMES.items()
}
KV_DTYPE_BYTES = {precision: size for precision, (size, _) in KV_DTYPES.items()}
# a graph's KV cache dtype name -> its precision name
KV_PRECISION = {name: precision for precision, (_, name) in KV_DTYPES.items()}
# the precision a target's compute runs at for each weight format (weight-only formats compute in FP16)
COMPUTE_PRECISION = {
    "fp32": "fp32",
    "fp16": "fp16",
    "bf16": "bf16",
    "fp8": "fp8",
    "int8": "int8",
    "int4": "fp16",
    "fp4": "fp4",
}

# The KV cache dtype engines pick by default for a weight format, where the target has FP8: TensorRT-LLM's
# ModelOpt FP8 checkpoints ship an FP8 KV cache (kv_cache_quant_algo FP8) and vLLM serves them with
# kv_cache_dtype "fp8"; every other format keeps a 16-bit cache (TensorRT-LLM's and vLLM's "auto": the model's
# activation dtype: FP32 for an FP32 model). NVFP4 on Jetson Thor runs an FP16 cache in TensorRT Edge-LLM's published tables.
FP8_KV_WITH = frozenset({"fp8"})


# the shape's counts: ModelShape's int fields, the keys of a card's [generative] table that shape_fields reads
SHAPE_COUNTS = (
    "layers",
    "hidden_size",
    "heads",
    "kv_heads",
    "head_size",
    "intermediate_size",
    "vocab_size",
    "context_length",
)
SHAPE_KEYS = (*SHAPE_COUNTS, "tie_word_embeddings")


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    """A decoder-only transformer's published shape (Llama architecture: GQA attention, SwiGLU MLP).

    The one declaration of the shape: a card's ``models.generative.GenerativeSpec`` extends it. Its fields are
    the keys of a card's ``[generative]`` table, which is why the checks name ``generative.KEY``; ``name`` and
    ``source`` say which model (empty in a card's spec, whose card holds them)."""

    name: str = ""
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_size: int
    intermediate_size: int
    vocab_size: int
    context_length: int
    tie_word_embeddings: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        for key in SHAPE_COUNTS:
            value = getattr(self, key)
            if not isinstance(value, int) or value <= 0:
                raise BadInputError(f"field 'generative.{key}': expected a positive integer, got {value!r}")
        if self.heads % self.kv_heads:
            raise BadInputError(
                f"field 'generative.kv_heads': {self.kv_heads} does not divide heads={self.heads}"
            )

    @property
    def linear_params_per_layer(self) -> int:
        q_o = 2 * self.hidden_size * self.heads * self.head_size
        k_v = 2 * self.hidden_size * self.kv_heads * self.head_size
        return q_o + k_v + 3 * self.hidden_size * self.intermediate_size

    @property
    def linear_params(self) -> int:
        """The transformer blocks' matmul weights (what quantization shrinks)."""
        return self.layers * self.linear_params_per_layer

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def norm_params(self) -> int:
        return (2 * self.layers + 1) * self.hidden_size

    @property
    def params(self) -> int:
        return self.linear_params + self.embedding_params + self.lm_head_params + self.norm_params

    @property
    def matmul_params(self) -> int:
        """Weights multiplied per token: the blocks and the LM head (the embedding is a lookup)."""
        return self.linear_params + self.vocab_size * self.hidden_size

    def weight_bytes(self, precision: str) -> float:
        """Bytes of the weights at ``precision`` (WEIGHT_FORMATS; embedding, LM head, norms at 16 bits)."""
        per_weight = weight_format(precision)[0]
        kept_16bit = self.embedding_params + self.lm_head_params + self.norm_params
        if precision == "fp32":
            return 4.0 * self.params
        return self.linear_params * per_weight + 2.0 * kept_16bit

    def kv_bytes_per_token(self, kv_dtype: str = "fp16") -> float:
        return kv_bytes_per_token(self.layers, self.kv_heads, self.head_size, kv_dtype)


def weight_format(precision: str) -> tuple[float, str]:
    try:
        return WEIGHT_FORMATS[precision]
    except KeyError:
        raise BadInputError(
            f"unknown weight precision {precision!r}; use one of {', '.join(WEIGHT_FORMATS)}"
        ) from None


def kv_bytes_per_token(layers: int, kv_heads: int, head_size: int, kv_dtype: str = "fp16") -> float:
    """2 (K and V) × layers × KV heads × head size × bytes of the KV dtype."""
    if kv_dtype not in KV_DTYPE_BYTES:
        raise BadInputError(f"unknown KV cache dtype {kv_dtype!r}; use one of {', '.join(KV_DTYPE_BYTES)}")
    return 2.0 * layers * kv_heads * head_size * KV_DTYPE_BYTES[kv_dtype]


def shape_fields(raw: Mapping[str, Any], origin: str) -> dict[str, Any]:
    """ModelShape's fields (but name and source) from a card's ``[generative]`` table: each count present and an
    int (a missing head_size is hidden_size ÷ heads, as in a Hugging Face config), the tie a bool. The one reader
    of the table's shape; ``BadInputError`` names ``origin`` and the field, ModelShape then checks the values."""
    values: dict[str, Any] = {}
    for key in SHAPE_COUNTS:
        value = raw.get(key)
        if key == "head_size" and value is None and values["heads"] > 0:
            value = values["hidden_size"] // values["heads"]
        if value is None:
            raise BadInputError(f"{origin}: missing field 'generative.{key}'")
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadInputError(f"{origin}: field 'generative.{key}': expected int, got {value!r}")
        values[key] = value
    values["tie_word_embeddings"] = bool(raw.get("tie_word_embeddings", False))
    return values


def shape_from_mapping(name: str, raw: Mapping[str, Any], source: str = "", origin: str = "") -> ModelShape:
    """A ModelShape from a card's ``[generative]`` table; one clear error naming ``origin`` (else the model)
    and the missing or bad field."""
    origin = origin or f"model {name!r}"
    values = shape_fields(raw, origin)
    try:
        return ModelShape(name=name, source=source, **values)
    except BadInputError as err:
        raise BadInputError(f"{origin}: {err}") from None


def load_shape(name_or_path: str) -> ModelShape:
    """The shape of a generative card: a packaged card's name (``llama-3.1-8b``) or a card TOML path."""
    path = Path(name_or_path)
    if path.suffix != ".toml" and "/" not in name_or_path:
        path = CARDS_DIR / f"{name_or_path.removeprefix('builtin:')}.toml"
    if not path.is_file():
        raise BadInputError(f"model card not found: {name_or_path} (a card TOML, or a packaged card name)")
    try:
        raw = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise BadInputError(f"cannot read model card {path}: {err}") from None
    gen = raw.get("generative")
    if not isinstance(gen, dict):
        raise BadInputError(f"model card {path} has no [generative] table (layers, heads, KV heads, ...)")
    name = str(raw.get("name") or path.stem)
    return shape_from_mapping(name, gen, str(raw.get("source") or path), origin=f"model card {path}")


# ------------------------------------------------------------------------------------------------ targets
def chips(target: HardwareTarget) -> int:
    """Chips an instance-level catalog entry's figures add up (inf2-48xlarge: 12); 1 for a per-accelerator one."""
    return int((getattr(target, "extra", {}) or {}).get("chips", 1) or 1)


def accelerator_memory_bytes(target: HardwareTarget) -> float:
    """Memory of ONE accelerator: catalog memory (GB), divided by the chips of an instance-level entry."""
    return float(target.memory_gb) * 1e9 / chips(target)


def tp_degrees(target: HardwareTarget) -> tuple[int, ...]:
    """The tensor-parallel degrees an instance of ``target`` allows: TP_DEGREES up to its accelerators."""
    limit = accelerators_per_instance(target)
    return tuple(t for t in TP_DEGREES if t <= limit)


def activation_bytes(shape: ModelShape, tp: int = 1) -> float:
    """Activation memory per accelerator an engine sets aside before sizing the KV cache: the live tensors of one
    forward pass over MAX_NUM_TOKENS tokens (vLLM profiles a forward of max_num_batched_tokens and TensorRT-LLM
    allocates for max_num_tokens, 8192 by default in both): per token the hidden state and residual, the
    attention's Q/K/V and output, and the MLP's gate, up and product, in 16 bits, split over TP; plus the FP32
    logits of the LOGIT_ROWS sequences sampled per step. An estimate of the
    profile, not a measurement; it matters only where the weights nearly fill the memory."""
    per_token = 4 * shape.hidden_size + 2 * (shape.heads + 2 * shape.kv_heads) * shape.head_size
    per_token += 3 * shape.intermediate_size
    logits = LOGIT_ROWS * shape.vocab_size * 4.0
    return (MAX_NUM_TOKENS * per_token * 2.0 + logits) / tp


def accelerators_per_instance(target: HardwareTarget) -> int:
    price = getattr(target, "price", None)
    n = int(getattr(price, "accelerators_per_instance", 1) or 1) if price is not None else 1
    chips = int((getattr(target, "extra", {}) or {}).get("chips", 1) or 1)
    return max(n, chips)


def runs_precision(target: HardwareTarget, precision: str) -> str | None:
    """None when the target runs ``precision`` (its compute precision has a catalog peak), else why not."""
    compute = COMPUTE_PRECISION.get(precision)
    if compute is None:
        return f"unknown precision {precision}"
    peaks = getattr(target, "peak_tflops", {}) or {}
    if compute in peaks:
        return None
    if compute in ("fp16", "bf16") and ({"fp16", "bf16"} & set(peaks)):
        return None
    return f"no {compute.upper()} on this target (the catalog has no {compute} peak)"


def compute_precision(target: HardwareTarget, precision: str) -> str:
    """The catalog peak a ``precision`` model computes at on ``target`` (FP16 and BF16 stand in for each other)."""
    compute = COMPUTE_PRECISION[precision]
    peaks = getattr(target, "peak_tflops", {}) or {}
    if compute in ("fp16", "bf16") and compute not in peaks:
        return "bf16" if compute == "fp16" else "fp16"
    return compute


@dataclass(frozen=True)
class ServingRecipe:
    """Precision as a serving engine runs it: the weights' format, the KV cache's dtype and the compute's.

    The one definition: the fit (KV bytes per sequence), the roofline (KV bytes read per step, the peak) and every
    generative row use it, so a projection and the fit it rests on read the same bytes."""

    weights: str  # a WEIGHT_FORMATS key
    kv_cache: str  # a KV_DTYPES key
    compute: str  # a catalog peak_tflops key
    kv_source: str  # why this KV dtype: the engines' default for the weights and target, or the option

    @property
    def label(self) -> str:
        return f"weights {self.weights}, KV {self.kv_cache}, compute {self.compute}"


def default_kv_dtype(target: HardwareTarget, precision: str) -> str:
    """The KV cache dtype engines default to for ``precision`` weights on ``target`` (FP8_KV_WITH)."""
    peaks = getattr(target, "peak_tflops", {}) or {}
    if precision in FP8_KV_WITH and "fp8" in peaks:
        return "fp8"
    if precision in ("fp32", "bf16"):  # "auto": the model's own dtype
        return precision
    return "bf16" if "bf16" in peaks and "fp16" not in peaks else "fp16"


def serving_recipe(target: HardwareTarget, precision: str, kv_dtype: str | None = None) -> ServingRecipe:
    """The recipe of ``precision`` weights on ``target``: the KV dtype given (``--kv-dtype``), else the engines'
    default (default_kv_dtype); ``BadInputError`` for an unknown precision or KV dtype."""
    weight_format(precision)
    if kv_dtype is not None and kv_dtype not in KV_DTYPES:
        raise BadInputError(f"unknown KV cache dtype {kv_dtype!r}; use one of {', '.join(KV_DTYPES)}")
    if kv_dtype is None:
        kv, why = default_kv_dtype(target, precision), "the engines' default for these weights on this target"
    else:
        kv, why = kv_dtype, "--kv-dtype"
    return ServingRecipe(precision, kv, compute_precision(target, precision), why)


@dataclass(frozen=True)
class MigFit:
    profile: str
    memory_gb: float
    sequences: int
    per_gpu: int


@dataclass(frozen=True)
class Fit:
    """Whether a model fits a target at a precision and context, and how many sequences it then holds."""

    target: str
    precision: str
    context: int
    fits: bool
    tp: int | None  # smallest tensor-parallel degree that fits (None: does not fit)
    sequences: int  # concurrent sequences at ``context`` on the TP group (0 when it does not fit)
    weight_bytes: float  # whole model
    kv_bytes_per_sequence: float  # whole model, at ``context``
    usable_bytes_per_accelerator: float
    reason: str
    interconnect: str = ""
    mig: tuple[MigFit, ...] = field(default_factory=tuple)


def max_sequences(usable_bytes: float, weight_bytes: float, kv_bytes_per_sequence: float) -> int:
    """⌊(usable − weights) ÷ KV per sequence⌋, 0 when the weights alone do not fit."""
    if kv_bytes_per_sequence <= 0:
        raise BadInputError("KV bytes per sequence must be positive")
    free = usable_bytes - weight_bytes
    return max(0, math.floor(free / kv_bytes_per_sequence + 1e-9))


def fit_bytes(
    target: HardwareTarget,
    precision: str,
    weight_bytes: float,
    kv_bytes_per_token: float,
    kv_heads: int,
    context: int,
    reserve: float = ACTIVATION_RESERVE_FRACTION,
    tp: int | None = None,
    activations: float = 0.0,
) -> Fit:
    """The fit of a model given its weight and per-token KV bytes (whole model) on ``target``: at ``tp``
    accelerators, else at the smallest TP degree that holds one sequence. ``activations``: bytes per accelerator
    at TP 1 (activation_bytes), set aside beside the weights and split over TP like them."""
    if not 0 <= reserve < 1:
        raise BadInputError(f"activation reserve must be in [0, 1), got {reserve!r}")
    if context < 1:
        raise BadInputError(f"context length must be >= 1, got {context!r}")
    usable = (1.0 - reserve) * accelerator_memory_bytes(target)
    kv_seq = kv_bytes_per_token * context
    interconnect = str((getattr(target, "extra", {}) or {}).get("interconnect", ""))
    # a fit that does not fit yet; the outcomes below replace what they find
    none = Fit(
        target=target.id,
        precision=precision,
        context=context,
        fits=False,
        tp=None,
        sequences=0,
        weight_bytes=weight_bytes,
        kv_bytes_per_sequence=kv_seq,
        usable_bytes_per_accelerator=usable,
        reason="",
        interconnect=interconnect,
    )
    why_not = runs_precision(target, precision)
    if why_not:
        return replace(none, reason=f"does not run {precision}: {why_not}")
    limit = accelerators_per_instance(target)
    degrees = tp_degrees(target) if tp is None else (tp,) if tp <= limit else ()
    for t in degrees:
        kv_share = math.ceil(kv_heads / t) / kv_heads
        n = max_sequences(usable, (weight_bytes + activations) / t, kv_seq * kv_share)
        if n >= 1:
            where = "" if t == 1 else f"; TP {t} over {interconnect or 'the instance interconnect'}"
            mig = _mig(target, weight_bytes + activations, kv_seq, reserve) if t == 1 else ()
            return replace(
                none,
                fits=True,
                tp=t,
                sequences=n,
                mig=mig,
                reason=f"fits: {n} sequence(s) of "
                f"{context} tokens beside {weight_bytes / 1e9:.3g} GB of weights{where}",
            )
    if tp is not None:
        limit = min(limit, tp)
    return replace(
        none,
        reason=(
            f"does not fit: weights {weight_bytes / 1e9:.3g} GB + one {context}-token sequence "
            f"{kv_seq / 1e9:.3g} GB > {limit} × {usable / 1e9:.3g} GB usable ({1 - reserve:.0%} of "
            f"{accelerator_memory_bytes(target) / 1e9:.3g} GB per accelerator, {limit} per instance)"
        ),
    )


def _mig(target: HardwareTarget, weight_bytes: float, kv_seq: float, reserve: float) -> tuple[MigFit, ...]:
    out = []
    for prof in getattr(target, "mig_profiles", ()) or ():
        if prof.compute_fraction >= 1:
            continue
        n = max_sequences((1.0 - reserve) * prof.memory_gb * 1e9, weight_bytes, kv_seq)
        if n >= 1:
            out.append(MigFit(prof.name, prof.memory_gb, n, prof.max_count))
    return tuple(out)


def fit_on(
    shape: ModelShape,
    target: HardwareTarget,
    precision: str,
    context: int,
    kv_dtype: str = "fp16",
    reserve: float = ACTIVATION_RESERVE_FRACTION,
    tp: int | None = None,
) -> Fit:
    """Does ``shape`` fit ``target`` at ``precision`` weights and ``context`` tokens per sequence (at ``tp``, else
    the smallest TP degree that holds one sequence), beside its activations (activation_bytes)?"""
    if context > shape.context_length:
        raise BadInputError(f"context {context} exceeds {shape.name}'s context length {shape.context_length}")
    return fit_bytes(
        target,
        precision,
        shape.weight_bytes(precision),
        shape.kv_bytes_per_token(kv_dtype),
        shape.kv_heads,
        context,
        reserve,
        tp,
        activation_bytes(shape),
    )
