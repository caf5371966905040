"""Roofline of a generative model: prefill bound by compute, decode bound by memory. Pure; units in names.

- Prefill of ISL tokens: FLOPs = ISL × one token's FLOPs at prefill_context(ISL) = (ISL + 1) / 2 positions
  (causal: token i attends to i), i.e. 2 × matmul params × ISL + attention 2 × layers × heads × head size ×
  ISL × (ISL + 1); bytes ≈ the weights once. TTFT bound = max(FLOPs ÷ peak, bytes ÷ bandwidth).
- One decode step at batch B with an average context c: bytes = weights read (all but an untied embedding
  table, of which a lookup reads one row) + B × c × KV bytes per token (each
  sequence reads its own cache); FLOPs = B × (2 × matmul params + 4 × layers × heads × head size × c).
  TPOT bound = max(FLOPs ÷ peak, bytes ÷ bandwidth). Tensor parallelism over t accelerators divides both by t
  and adds its all-reduces over the instance's links (allreduce_s) to every step and prefill. An instance-level
  catalog entry (inf2-48xlarge: 12 chips) is read per chip: its peak and bandwidth ÷ its chips.
- A steady batch of B sequences with ISL/OSL, as engines run it (in-flight batching, chunked prefill): every
  step decodes one token of each of the B sequences and carries prompt chunks of the sequences that join, on
  average B × ISL ÷ OSL prompt tokens a step (each sequence's ISL prompt tokens spread over its OSL steps), so
  the weights are read once for both (``step_s``). The step runs its matmuls and attention at the compute
  efficiency and reads the weights and the KV cache at the memory efficiency one after the other (time =
  FLOPs ÷ (peak × compute efficiency) + bytes ÷ (bandwidth × memory efficiency): fitted on the TensorRT-LLM
  tables, the additive step reproduces each target's rows within 1.06–1.17×, where max(compute, memory) and
  prefill-on-top-of-decode leave 1.2–1.4×), plus the step's all-reduces under TP. Output tokens/s = B ÷ step;
  tokens/s per user = 1 ÷ step (InferenceX's interactivity, 1000 / TPOT ms). The average decode context is
  decode_context(ISL, OSL) = ISL + OSL / 2.
- Efficiencies turn the bound into a projection: ``decode_efficiency`` is the fraction of the memory bandwidth
  a step reaches, ``prefill_efficiency`` the fraction of the compute peak (prefill and every step's matmuls;
  both fitted on published results, accelbench/reports/llm_projection.py). Left at 1 they give the bound.

Precision: the catalog peak of the weights' compute precision (INT4/W4A16 computes in FP16; llm_memory), times
the SKU's ``sustained_compute_fraction`` where the catalog gives one (a power-limited card's clocks sit below the
boost its datasheet peak is quoted at).
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import HardwareTarget
from accelbench.hardware.llm_memory import ModelShape, chips, compute_precision, runs_precision
from accelbench.hardware.roofline import RooflinePoint, batch_point, latency_lower_bound_s
from accelbench.hardware.roofline import checked_efficiency as _eff

TERA = 1e12
GIGA = 1e9
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def prefill_context(isl: float) -> float:
    """Positions a prefill token attends to on average: in a causal prompt token i sees itself and the i − 1
    before it, so the mean over i = 1 … ISL is (ISL + 1) / 2, exactly (prefill FLOPs = ISL × token_flops at
    this context). The one definition: the roofline, the projections and a manifest's graph_cost use it."""
    return (isl + 1) / 2


def decode_context(isl: float, osl: float) -> float:
    """The average context of a decode step over OSL steps: the ISL prompt plus half the output, the context
    growing from ISL to ISL + OSL (decode FLOPs and KV bytes per step are linear in it, so their mean is theirs
    at this context). The one definition, as prefill_context."""
    return isl + osl / 2


def token_flops(matmul_params: float, layers: int, heads: int, head_size: int, context: float) -> float:
    """One token through the model attending to ``context`` positions: 2 × the matmul weights, plus QKᵀ and AV
    over the context (4 × layers × heads × head size × context)."""
    return 2.0 * matmul_params + 4.0 * layers * heads * head_size * context


@dataclass(frozen=True)
class LlmCost:
    """What the roofline needs of a model: matmul parameters, weight bytes, KV bytes per token, attention size."""

    matmul_params: float
    weight_bytes: float  # read per step: every weight but an untied embedding table (a lookup reads one row)
    kv_bytes_per_token: float
    layers: int
    heads: int
    head_size: int

    @classmethod
    def of(cls, shape: ModelShape, precision: str, kv_dtype: str = "fp16") -> LlmCost:
        lookup_only = 0.0 if shape.tie_word_embeddings else 2.0 * shape.embedding_params
        return cls(
            float(shape.matmul_params),
            shape.weight_bytes(precision) - lookup_only,
            shape.kv_bytes_per_token(kv_dtype),
            shape.layers,
            shape.heads,
            shape.head_size,
        )

    def token_flops(self, context: float) -> float:
        return token_flops(self.matmul_params, self.layers, self.heads, self.head_size, context)

    def prefill_flops(self, isl: int) -> float:
        """ISL tokens, each attending on average to prefill_context(ISL) = (ISL + 1) / 2 positions."""
        return isl * self.token_flops(prefill_context(isl))

    def decode_flops(self, batch: int, context: float) -> float:
        return batch * self.token_flops(context)

    def decode_bytes(self, batch: int, context: float) -> float:
        return self.weight_bytes + batch * context * self.kv_bytes_per_token


@dataclass(frozen=True)
class Roof:
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    compute_precision: str
    link_bytes_per_s: float = 0.0  # to the other accelerators of the instance, each way (0: none known)


def roof(target: HardwareTarget, precision: str) -> Roof:
    """ONE accelerator's compute peak for the weights' compute precision and its memory bandwidth."""
    why_not = runs_precision(target, precision)
    if why_not:
        raise BadInputError(f"target {target.id!r} does not run {precision}: {why_not}")
    compute = compute_precision(target, precision)
    n = chips(target)  # an instance-level entry (inf2-48xlarge) adds up its chips: one chip's roof
    sustained = float(target.extra.get("sustained_compute_fraction", 1.0))  # power-limited SKUs (catalog)
    peak = float(target.peak_tflops[compute]) * TERA * sustained / n
    bandwidth = float(target.memory_bw_gbs) * GIGA / n
    link = float((getattr(target, "extra", {}) or {}).get("interconnect_gbs", 0) or 0) * GIGA
    return Roof(peak, bandwidth, compute, link)


def allreduce_s(cost: LlmCost, tokens: float, tp: int, r: Roof) -> float:
    """Tensor parallelism's communication for ``tokens`` tokens: two all-reduces per layer (after attention and
    after the MLP, Megatron-style, as TensorRT-LLM and vLLM split a Llama) of the tokens' 16-bit hidden states
    (heads × head size), each a ring moving 2 (t − 1) / t of the message through every accelerator's link.
    0 at TP 1 or where the catalog has no link figure (interconnect_gbs)."""
    if tp <= 1 or r.link_bytes_per_s <= 0:
        return 0.0
    message = tokens * cost.heads * cost.head_size * 2.0
    return 2 * cost.layers * 2.0 * (tp - 1) / tp * message / r.link_bytes_per_s


def ttft_s(cost: LlmCost, r: Roof, isl: int, tp: int = 1, prefill_efficiency: float = 1.0) -> float:
    """Prefill time of one ISL-token prompt: compute at the efficiency, never faster than reading the weights."""
    peak = r.peak_flops_per_s * _eff("prefill_efficiency", prefill_efficiency)
    flops, moved = cost.prefill_flops(isl) / tp, cost.weight_bytes / tp
    return latency_lower_bound_s(flops, moved, peak, r.bandwidth_bytes_per_s)


def tpot_s(
    cost: LlmCost, r: Roof, batch: int, context: float, tp: int = 1, decode_efficiency: float = 1.0
) -> float:
    """One decode step at ``batch`` with ``context`` tokens per sequence, at the decode efficiency."""
    e = _eff("decode_efficiency", decode_efficiency)
    flops, moved = cost.decode_flops(batch, context) / tp, cost.decode_bytes(batch, context) / tp
    return latency_lower_bound_s(flops, moved, r.peak_flops_per_s * e, r.bandwidth_bytes_per_s * e)


def step_s(
    cost: LlmCost,
    r: Roof,
    batch: int,
    context: float,
    prefill_tokens: float,
    isl: int,
    tp: int = 1,
    memory_efficiency: float = 1.0,
    compute_efficiency: float = 1.0,
) -> float:
    """One engine step under in-flight batching: one decode token for each of ``batch`` sequences at ``context``
    and ``prefill_tokens`` prompt tokens of ISL-token prompts (chunked prefill) in the same step, the weights read
    once. Compute time (matmuls and attention at the compute efficiency) plus memory time (weights and KV cache
    at the memory efficiency): the step's GEMMs and its attention's KV reads do not overlap."""
    ec = _eff("compute_efficiency", compute_efficiency)
    em = _eff("memory_efficiency", memory_efficiency)
    flops = cost.decode_flops(batch, context) + prefill_tokens * cost.token_flops(prefill_context(isl))
    moved = cost.decode_bytes(batch, context)
    return (flops / (r.peak_flops_per_s * ec) + moved / (r.bandwidth_bytes_per_s * em)) / tp


def prefill_point(cost: LlmCost, r: Roof, target_id: str, precision: str, isl: int) -> RooflinePoint:
    """The prefill bound (ttft_s at efficiency 1) as a roofline point: one ISL-token prompt, weights read once."""
    flops, moved = cost.prefill_flops(isl), cost.weight_bytes
    return batch_point(target_id, precision, isl, flops, moved, r.peak_flops_per_s, r.bandwidth_bytes_per_s)


def decode_point(
    cost: LlmCost, r: Roof, target_id: str, precision: str, batch: int, context: float
) -> RooflinePoint:
    """The decode bound (tpot_s at efficiency 1) as a roofline point: one token for each of ``batch`` sequences."""
    flops, moved = cost.decode_flops(batch, context), cost.decode_bytes(batch, context)
    return batch_point(target_id, precision, batch, flops, moved, r.peak_flops_per_s, r.bandwidth_bytes_per_s)


@dataclass(frozen=True)
class FrontierPoint:
    batch: int
    ttft_s: float
    tpot_s: float
    tokens_per_s_per_user: float
    output_tokens_per_s: float  # whole TP group
    output_tokens_per_s_per_accelerator: float
    bound: str  # "memory" | "compute" (of the decode step)


def frontier(
    cost: LlmCost,
    r: Roof,
    isl: int,
    osl: int,
    max_batch: int,
    tp: int = 1,
    decode_efficiency: float = 1.0,
    prefill_efficiency: float = 1.0,
    batches: tuple[int, ...] = BATCHES,
    step_floor_s: float = 0.0,
) -> list[FrontierPoint]:
    """The projected throughput–interactivity frontier: one point per batch up to ``max_batch`` (included).

    ``step_floor_s``: no decode step is shorter (launches, sampling, scheduling cost time the roofline does not
    see), so tokens/s grows with batch while the step stays at the floor and saturates once the roofline's step
    is longer."""
    if isl < 1 or osl < 1:
        raise BadInputError(f"ISL and OSL must be >= 1, got {isl}/{osl}")
    context = decode_context(isl, osl)
    prefill = ttft_s(cost, r, isl, tp, prefill_efficiency) + allreduce_s(cost, isl, tp, r)
    sizes = sorted({b for b in batches if b <= max_batch} | ({max_batch} if max_batch >= 1 else set()))
    out = []
    for b in sizes:
        chunks = b * isl / osl
        step = max(
            step_s(cost, r, b, context, chunks, isl, tp, decode_efficiency, prefill_efficiency), step_floor_s
        ) + allreduce_s(cost, b + chunks, tp, r)  # the step's decode tokens and prompt chunks
        thr = b / step
        compute = cost.decode_flops(b, context) / r.peak_flops_per_s
        bound = "compute" if compute > cost.decode_bytes(b, context) / r.bandwidth_bytes_per_s else "memory"
        out.append(FrontierPoint(b, prefill, step, 1.0 / step, thr, thr / tp, bound))
    return out
