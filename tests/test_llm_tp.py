"""Multi-chip instances and tensor parallelism in projected generative rows (issue 48, item 4)."""

from __future__ import annotations

import math

import pytest

from accelbench.hardware.catalog import load_catalog
from accelbench.hardware.llm_memory import shape_from_mapping
from accelbench.hardware.llm_roofline import LlmCost, allreduce_s, roof
from accelbench.reports.llm_projected import TP_TIE, ProjectionRequest, project_generative
from accelbench.reports.llm_projection import LlmEfficiencies

LLAMA_70B = {
    "layers": 80,
    "hidden_size": 8192,
    "heads": 64,
    "kv_heads": 8,
    "intermediate_size": 28672,
    "vocab_size": 128256,
    "context_length": 131072,
}  # fmt: skip (Llama-3.1-70B's config.json)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def eff(catalog):
    return LlmEfficiencies(catalog)


def test_an_instance_entry_is_read_per_chip(catalog):
    whole, one = roof(catalog.get("inf2-48xlarge"), "fp16"), roof(catalog.get("inf2-xlarge"), "fp16")
    assert whole.bandwidth_bytes_per_s == pytest.approx(one.bandwidth_bytes_per_s)
    assert whole.peak_flops_per_s == pytest.approx(one.peak_flops_per_s)


def test_allreduce_is_zero_at_tp1_and_grows_with_tokens_and_degree(catalog):
    r = roof(catalog.get("h100-sxm"), "fp16")
    shape = shape_from_mapping("llama-70b", LLAMA_70B)
    cost = LlmCost.of(shape, "fp16")
    assert allreduce_s(cost, 64, 1, r) == 0
    # 2 all-reduces × 80 layers × 2 (t − 1)/t × 64 tokens × 8192 × 2 B over 450 GB/s
    assert allreduce_s(cost, 64, 4, r) == pytest.approx(2 * 80 * 1.5 * 64 * 8192 * 2 / 450e9)
    assert allreduce_s(cost, 64, 8, r) > allreduce_s(cost, 64, 4, r) > 0


def test_70b_fp16_on_a100_takes_the_cheapest_tp_per_token_and_lists_the_others(catalog, eff):
    shape = shape_from_mapping("llama-3.1-70b", LLAMA_70B)
    req = ProjectionRequest("llama-3.1-70b", "fp16", 1000, 1000, shape=shape)
    row = project_generative(req, catalog.get("a100-sxm4-80gb"), eff, 2000.0, 100.0, {})
    degrees = {o["tp"]: o["capacity_output_tokens_per_s"] for o in row.tp_options}
    assert 2 not in degrees and {4, 8} <= set(degrees)  # TP 2 holds no sequence beside weights + activations
    best = max(v for v in degrees.values() if v)
    assert row.capacity is not None and row.tp in degrees
    assert row.capacity.output_tps >= best / (1 + TP_TIE)
    smaller = [t for t, v in degrees.items() if t < row.tp and v]
    assert all(degrees[t] * (1 + TP_TIE) < row.capacity.output_tps for t in smaller)
    assert f"TP {row.tp} of" in row.reason


def test_a_pinned_degree_is_the_only_one_projected(catalog, eff):
    req = ProjectionRequest("llama-3.1-8b", "fp8", 1000, 1000, tp=1)
    row = project_generative(req, catalog.get("h100-sxm"), eff, math.inf, math.inf, {})
    assert row.tp == 1 and [o["tp"] for o in row.tp_options] == [1]
