"""Projected prefill and decode bounds of a generative model on catalog targets (nothing here is measured).

The bounds are the LLM roofline's (accelbench/hardware/llm_roofline.py: what the reports project from), on the
card's reference workload (accelbench.models.generative). Prefill: one prompt of the reference ISL, its tokens
batched through the model once (the weights read once): the bound on TTFT and on prefill tokens/s. Decode: one
token per sequence for a batch of sequences at the reference decode context (weights read once per step, each
sequence's KV cache read): the bound on TPOT and on output tokens/s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.hardware.catalog import HardwareTarget
from accelbench.hardware.llm_memory import KV_PRECISION
from accelbench.hardware.llm_roofline import LlmCost, decode_point, prefill_point, roof
from accelbench.hardware.roofline import RooflinePoint
from accelbench.models.generative import GenerativeSpec, kv_dtype


@dataclass(frozen=True)
class PhasePoint:
    phase: str  # prefill | decode
    tokens: int  # prefill: prompt tokens; decode: sequences in the batch
    point: RooflinePoint

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "tokens": self.tokens, **self.point.to_dict()}


def phase_points(
    spec: GenerativeSpec, targets: Sequence[HardwareTarget], batches: Sequence[int], precision: str
) -> list[PhasePoint]:
    """Per target the prefill point at the reference ISL, then a decode point per batch."""
    cost = LlmCost.of(spec, precision, KV_PRECISION[kv_dtype(precision)])
    points = []
    for target in targets:
        r = roof(target, precision)
        prefill = prefill_point(cost, r, target.id, precision, spec.reference_isl)
        points.append(PhasePoint("prefill", spec.reference_isl, prefill))
        for batch in batches:
            decode = decode_point(cost, r, target.id, precision, batch, spec.decode_context)
            points.append(PhasePoint("decode", batch, decode))
    return points


def describe(spec: GenerativeSpec, precision: str, weight_bytes: float) -> list[str]:
    """The lines ``models inspect`` prints for a generative model."""
    kv = spec.kv_cache_bytes_per_token(kv_dtype(precision))
    return [
        f"params       {spec.params / 1e6:,.2f} M ({spec.layers} layers, hidden {spec.hidden_size}, "
        f"{spec.heads} heads / {spec.kv_heads} KV heads × {spec.head_size}, vocabulary {spec.vocab_size})",
        f"context      {spec.context_length} tokens; reference workload ISL {spec.reference_isl} / "
        f"OSL {spec.reference_osl}",
        f"FLOPs        {spec.flops_per_token(spec.prefill_context) / 1e6:,.2f} MFLOP per prefill token, "
        f"{spec.flops_per_token(spec.decode_context) / 1e6:,.2f} MFLOP per decode token",
        f"weights      {weight_bytes / 1e6:,.1f} MB at {precision} (read once per decode step)",
        f"KV cache     {kv:,} B per token ({kv_dtype(precision)}); "
        f"{kv * spec.context_length / 2**20:,.1f} MiB per sequence at full context",
    ]
