"""Memory fit and roofline of generative models, checked against hand calculations (issue 22)."""

from __future__ import annotations

import math

import pytest

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import load_catalog
from accelbench.hardware.llm_memory import (
    activation_bytes,
    fit_on,
    kv_bytes_per_token,
    load_shape,
    max_sequences,
    shape_from_mapping,
)
from accelbench.hardware.llm_roofline import LlmCost, frontier, roof, tpot_s, ttft_s

GB = 1e9


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def llama8b():
    return load_shape("llama-3.1-8b")


def test_llama_3_1_8b_card_is_the_published_config(llama8b):
    s = llama8b
    assert (s.layers, s.hidden_size, s.heads, s.kv_heads, s.head_size) == (32, 4096, 32, 8, 128)
    assert (s.intermediate_size, s.vocab_size, s.context_length, s.tie_word_embeddings) == (
        14336,
        128256,
        131072,
        False,
    )
    # by hand: per layer q,o 2·4096·4096 + k,v 2·4096·1024 + MLP 3·4096·14336 = 218,103,808; ×32 layers;
    # embedding and LM head 128256·4096 each; norms (2·32 + 1)·4096
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    assert per_layer == 218_103_808
    assert s.params == 32 * per_layer + 2 * 128256 * 4096 + 65 * 4096 == 8_030_261_248  # "8B"


def test_kv_cache_bytes_per_token_is_two_layers_heads_head_size_bytes(llama8b):
    assert kv_bytes_per_token(32, 8, 128, "fp16") == 2 * 32 * 8 * 128 * 2 == 131_072  # LLM-NOTES: 131,072 B
    assert llama8b.kv_bytes_per_token("fp8") == 65_536
    assert llama8b.kv_bytes_per_token() * 8192 == 2**30  # an 8k sequence is 1 GiB
    with pytest.raises(BadInputError, match="KV cache dtype"):
        kv_bytes_per_token(32, 8, 128, "int3")


def test_weight_bytes_by_precision_count_int4_scales(llama8b):
    linear, kept = 32 * 218_103_808, 2 * 128256 * 4096 + 65 * 4096
    assert llama8b.weight_bytes("fp16") == 2 * llama8b.params == 16_060_522_496
    assert llama8b.weight_bytes("fp8") == linear * 1 + kept * 2 == 9_081_200_640
    # INT4 AWQ: half a byte per weight plus one FP16 scale per group of 128 weights
    assert llama8b.weight_bytes("int4") == linear * (0.5 + 2 / 128) + kept * 2 == 5_700_591_616
    with pytest.raises(BadInputError, match="unknown weight precision"):
        llama8b.weight_bytes("int3")


# Hand calculation at 8k context, FP16 KV cache (1 GiB = 1,073,741,824 B per sequence), usable memory 90 % of
# the catalog's GB (the 10 % activation reserve):
#   L4 24 GB:         21.6e9 − 16.0605e9 = 5.5395e9 → 5.159 → 5;   FP8 12.5188e9 → 11.66 → 11;  INT4 15.8994e9 → 14.81 → 14
#   A100 80 GB:       72e9 − 16.0605e9 → 52.10 → 52;  FP8: no FP8 on Ampere;                    INT4 66.2994e9 → 61.75 → 61
#   H100 SXM 80 GB:   FP16 52;                        FP8 62.9188e9 → 58.60 → 58;               INT4 61
#   L40S 48 GB:       43.2e9 − 16.0605e9 → 25.28 → 25; FP8 34.1188e9 → 31.78 → 31;              INT4 37.4994e9 → 34.92 → 34
#   inf2.xlarge 32 GB: 28.8e9 − 16.0605e9 → 11.86 → 11; FP8 19.7188e9 → 18.36 → 18;            INT4 23.0994e9 → 21.51 → 21
#   T4 16 GB:         FP16 16.06e9 > 14.4e9: does not fit (one GPU per g4dn.xlarge); FP8: no FP8; INT4 8.6994e9 → 8.10 → 8
#   Orin Nano 8 GB:   FP16 does not fit; FP8: no FP8;                                           INT4 1.4994e9 → 1.40 → 1
#   minus, from each, the activations of a forward pass of 8192 tokens (llm_memory.activation_bytes, ACT below:
#   8192 × (4 × 4096 + 2 × 64 × 128 + 3 × 14336) × 2 B + 256 × 128256 × 4 B logits = 1.3057e9 B), so one fewer
#   sequence or two than the figures above.
GIB = 2**30
ACT = 8192 * (4 * 4096 + 2 * (32 + 2 * 8) * 128 + 3 * 14336) * 2 + 256 * 128256 * 4
HAND = {
    "l4": {"fp16": (24 * 0.9 * GB - 16_060_522_496 - ACT) / GIB, "fp8": (24 * 0.9 * GB - 9_081_200_640 - ACT) / GIB,
           "int4": (24 * 0.9 * GB - 5_700_591_616 - ACT) / GIB},
    "a100-sxm4-80gb": {"fp16": (72 * GB - 16_060_522_496 - ACT) / GIB, "fp8": None, "int4": (72 * GB - 5_700_591_616 - ACT) / GIB},
    "h100-sxm": {"fp16": (72 * GB - 16_060_522_496 - ACT) / GIB, "fp8": (72 * GB - 9_081_200_640 - ACT) / GIB,
                 "int4": (72 * GB - 5_700_591_616 - ACT) / GIB},
    "l40s": {"fp16": (43.2 * GB - 16_060_522_496 - ACT) / GIB, "fp8": (43.2 * GB - 9_081_200_640 - ACT) / GIB,
             "int4": (43.2 * GB - 5_700_591_616 - ACT) / GIB},
    "inf2-xlarge": {"fp16": (28.8 * GB - 16_060_522_496 - ACT) / GIB, "fp8": (28.8 * GB - 9_081_200_640 - ACT) / GIB,
                    "int4": (28.8 * GB - 5_700_591_616 - ACT) / GIB},
    "t4": {"fp16": (14.4 * GB - 16_060_522_496 - ACT) / GIB, "fp8": None, "int4": (14.4 * GB - 5_700_591_616 - ACT) / GIB},
    "jetson-orin-nano-8gb": {"fp16": (7.2 * GB - 16_060_522_496 - ACT) / GIB, "fp8": None,
                             "int4": (7.2 * GB - 5_700_591_616 - ACT) / GIB},
}  # fmt: skip
EXPECTED = {"l4": (3, 10, 13), "a100-sxm4-80gb": (50, None, 60), "h100-sxm": (50, 57, 60), "l40s": (24, 30, 33),
            "inf2-xlarge": (10, 17, 20), "t4": (0, None, 6), "jetson-orin-nano-8gb": (0, None, 0)}  # fmt: skip


@pytest.mark.parametrize("target_id", sorted(HAND))
def test_llama_3_1_8b_fits_at_8k_as_calculated_by_hand(catalog, llama8b, target_id):
    for precision, expected in zip(("fp16", "fp8", "int4"), EXPECTED[target_id], strict=True):
        fit = fit_on(llama8b, catalog.get(target_id), precision, 8192)
        hand = HAND[target_id][precision]
        if hand is None:  # the target has no FP8
            assert expected is None and not fit.fits and "does not run fp8" in fit.reason
            continue
        assert max(0, math.floor(hand)) == expected
        assert fit.sequences == expected, (target_id, precision, fit.reason)
        assert fit.fits == (expected >= 1)
        assert fit.tp == (1 if expected else None)
        assert ("does not fit" in fit.reason) == (expected == 0)


def test_tensor_parallel_is_the_smallest_degree_that_fits(catalog):
    # a 70B-class shape does not fit one H100 at FP16 but does over the p5's 8 GPUs
    big = shape_from_mapping("llama-70b-like", {"layers": 80, "hidden_size": 8192, "heads": 64, "kv_heads": 8,
                             "intermediate_size": 28672, "vocab_size": 128256, "context_length": 131072})  # fmt: skip
    fit = fit_on(big, catalog.get("h100-sxm"), "fp16", 8192)
    weights = big.weight_bytes("fp16")
    act = activation_bytes(big)
    assert weights > 72 * GB and weights / 2 < 72 * GB
    # TP 2 holds the weights and activations but not one 8k sequence beside them (0.67 GB per GPU left)
    assert max_sequences(72 * GB, (weights + act) / 2, 2 * 80 * 8 * 128 * 2 * 8192 / 2) == 0
    assert fit.tp == 4 and "TP 4" in fit.reason and "NVLink" in fit.reason
    # per GPU: a quarter of the weights and activations, a quarter of the KV heads
    assert fit.sequences == max_sequences(72 * GB, (weights + act) / 4, 2 * 80 * 8 * 128 * 2 * 8192 / 4)
    assert fit_on(big, catalog.get("h100-sxm"), "fp16", 8192, tp=2).reason.startswith("does not fit")
    # L4 is one GPU per g6.xlarge: no TP to fall back on
    assert not fit_on(big, catalog.get("l4"), "fp16", 8192).fits


def test_mig_slices_where_they_fit(catalog, llama8b):
    fit = fit_on(llama8b, catalog.get("a100-sxm4-80gb"), "int4", 8192)
    slices = {m.profile: m.sequences for m in fit.mig}
    assert "7g.80gb" not in slices  # the whole GPU is the TP-1 row itself
    assert slices["3g.40gb"] == math.floor((36 * GB - 5_700_591_616 - ACT) / GIB)  # 28
    assert slices["1g.10gb"] == math.floor((9 * GB - 5_700_591_616 - ACT) / GIB)  # 3
    assert "1g.10gb" not in {
        m.profile for m in fit_on(llama8b, catalog.get("a100-sxm4-80gb"), "fp16", 8192).mig
    }


def test_context_beyond_the_model_and_bad_cards_are_one_clear_error(catalog, llama8b, tmp_path):
    with pytest.raises(BadInputError, match="exceeds llama-3.1-8b's context length 131072"):
        fit_on(llama8b, catalog.get("l4"), "fp16", 200_000)
    with pytest.raises(BadInputError, match="model card not found"):
        load_shape("no-such-model")
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[generative]\nlayers = 0\n')
    with pytest.raises(BadInputError, match="bad.toml: missing field 'generative.hidden_size'"):
        load_shape(str(bad))
    # the reader and the checks of a card's [generative] table (models.generative.spec_from_table's too)
    table = {"layers": 2, "hidden_size": 64, "heads": 4, "kv_heads": 2, "intermediate_size": 128}
    table |= {"vocab_size": 1000, "context_length": 512}
    for key, value, message in (
        ("layers", "0", "field 'generative.layers': expected a positive integer, got 0"),
        ("heads", '"4"', "field 'generative.heads': expected int, got '4'"),
        ("kv_heads", "3", "field 'generative.kv_heads': 3 does not divide heads=4"),
    ):
        body = "".join(f"{k} = {v}\n" for k, v in {**table, key: value}.items())
        bad.write_text(f'name = "x"\n[generative]\n{body}')
        with pytest.raises(BadInputError, match=f"^model card .*bad.toml: {message}$"):
            load_shape(str(bad))
    good = tmp_path / "good.toml"
    good.write_text("[generative]\n" + "".join(f"{k} = {v}\n" for k, v in table.items()))
    assert load_shape(str(good)).head_size == 16  # hidden size ÷ heads where the card leaves it out


def test_decode_roofline_is_weights_plus_kv_over_bandwidth(catalog, llama8b):
    h100 = catalog.get("h100-sxm")
    cost = LlmCost.of(llama8b, "fp8", "fp8")
    r = roof(h100, "fp8")
    # batch 1 at context 1000: bytes = weights read (all but the embedding table) + 1000 × 65,536
    read = 9_081_200_640 - 2 * 128256 * 4096
    assert cost.weight_bytes == read
    assert tpot_s(cost, r, 1, 1000) == pytest.approx((read + 1000 * 65_536) / 3350e9)
    # prefill of 2048 tokens is compute-bound at the FP8 peak: 2·matmul params·ISL + 2·L·heads·head·ISL·(ISL + 1)
    # (token i attends to i positions: (ISL + 1) / 2 on average, prefill_context)
    flops = 2 * (32 * 218_103_808 + 128256 * 4096) * 2048 + 2 * 32 * 32 * 128 * 2048 * 2049
    assert ttft_s(cost, r, 2048) == pytest.approx(flops / 1978.9e12)
    pts = frontier(cost, r, 1000, 1000, 64)
    assert [p.batch for p in pts] == [1, 2, 4, 8, 16, 32, 64]
    # more batch: more tokens/s per accelerator, fewer per user (the frontier's shape)
    assert all(a.output_tokens_per_s < b.output_tokens_per_s for a, b in zip(pts, pts[1:], strict=False))
    assert all(a.tokens_per_s_per_user > b.tokens_per_s_per_user for a, b in zip(pts, pts[1:], strict=False))
    with pytest.raises(BadInputError, match="does not run fp8"):
        roof(catalog.get("a100-sxm4-80gb"), "fp8")
