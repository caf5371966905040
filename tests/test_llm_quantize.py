"""Weight-only INT4 / INT8 variants of builtin:llama-tiny through ONNX Runtime, gated on the shipped text, and
served by the same Triton model as the FP32 one."""

from __future__ import annotations

import json
import threading

import pytest

from accelbench.documents import to_dict
from tests.llm_helpers import PROMPTS, greedy_reference

pytestmark = [pytest.mark.hf, pytest.mark.slow]  # each test quantizes a checkpoint


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    pytest.importorskip("optimum")
    from accelbench.models.quantize import QuantizeRequest, quantize

    out = tmp_path_factory.mktemp("variants")
    manifests = {}
    for precision in ("int4", "int8"):
        for m in quantize(
            QuantizeRequest(model="builtin:llama-tiny", target="cpu-local", precision=precision, out_dir=out)
        ):
            manifests[m.precision] = m
    return out, manifests


def test_int4_variant_is_weight_only_matmulnbits(made):
    out, manifests = made
    m = manifests["int4"]
    assert m.recipe == "ort-int4-weight-only-b32"
    assert m.calibration.bits == 4 and m.calibration.block_size == 32
    assert to_dict(m.attempts[-1]) == {
        "recipe": "ort-int4-weight-only-b32",
        "outcome": "ok",
        "reason": "the graph passes the ONNX checker and runs",
    }
    import onnx

    ops = {n.op_type for n in onnx.load(str(out / m.name / "model.onnx")).graph.node}
    assert "MatMulNBits" in ops
    # 4-bit weights plus one float32 scale per 32: about 4.5 bits where FP32 has 32
    ratio = manifests["fp32"].graph_cost.weight_bytes / m.graph_cost.weight_bytes
    assert 5.0 < ratio < 7.5
    assert {"tokenizer/tokenizer.json", "hf/config.json"} <= set(m.files)


def test_int8_variant_and_its_gate(made):
    _, manifests = made
    m = manifests["int8"]
    assert m.recipe == "ort-int8-weight-only-b32" and m.calibration.bits == 8
    ratio = manifests["fp32"].graph_cost.weight_bytes / m.graph_cost.weight_bytes
    assert 3.0 < ratio < 4.0
    for precision in ("int8", "int4"):
        gate = to_dict(manifests[precision].accuracy)
        assert gate["metric"] == "next_token_agreement" and gate["samples"] > 400
        assert 0 < gate["kl_divergence"] < 1 and 0 < gate["value"] < 1
        assert gate["perplexity"] is None and "random weights" in gate["reason"]
        # the verdict follows the card's thresholds
        ok = gate["value"] >= gate["tolerance"] and gate["kl_divergence"] <= gate["kl_tolerance"]
        assert gate["verdict"] == ("PASS" if ok else "FAIL")
    # fewer bits, further from FP32
    assert manifests["int8"].accuracy.kl_divergence < manifests["int4"].accuracy.kl_divergence


def test_a_recipe_that_fails_is_recorded_and_the_next_tried(made, tmp_path, monkeypatch):
    from accelbench.models import quantize_llm
    from accelbench.models.quantize import QuantizeRequest, quantize

    real = quantize_llm._quantize

    def broken_b32(src, dst, recipe):
        if recipe.endswith("-b32"):
            raise RuntimeError("simulated quantizer failure")
        return real(src, dst, recipe)

    monkeypatch.setattr(quantize_llm, "_quantize", broken_b32)
    manifests = quantize(
        QuantizeRequest(model="builtin:llama-tiny", target="cpu-local", precision="int4", out_dir=tmp_path)
    )
    attempts = manifests[-1].attempts
    assert [a.outcome for a in attempts] == ["failed", "ok"]
    assert "simulated quantizer failure" in attempts[0].reason
    assert manifests[-1].recipe == "ort-int4-weight-only-b128" and manifests[-1].calibration.block_size == 128


def test_int4_served_by_the_same_triton_model(made, tmp_path):
    import httpx

    from accelbench.serving.repository import write_repository
    from accelbench.serving.server import LocalTriton

    out, manifests = made
    variant = out / manifests["int4"].name
    (model,) = write_repository([variant], tmp_path, "local", {"intra_op_threads": 2, "max_context": 64})
    got: dict[int, list[int]] = {}

    def one(url: str, i: int) -> None:
        with httpx.stream(
            "POST", url, json={"input_ids": PROMPTS[i], "max_tokens": 8, "ignore_eos": True}, timeout=120
        ) as r:
            lines = [json.loads(x[5:]) for x in r.iter_lines() if x.startswith("data:")]
        got[i] = [e["output_ids"] for e in lines]

    with LocalTriton(tmp_path) as triton:
        url = f"{triton.http_url}/v2/models/{model.name}/generate_stream"
        threads = [threading.Thread(target=one, args=(url, i)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
    for i in range(3):
        assert got[i] == greedy_reference(variant / "model.onnx", PROMPTS[i], 8)


def test_hf_dir_checkpoint_end_to_end(tmp_path):
    """A Qwen2 layout saved here from a config (no download): exported with its KV cache, quantized to INT8, gated
    with perplexity (a user checkpoint counts as trained), its own tokenizer copied without the weights."""
    pytest.importorskip("optimum")
    import torch
    import transformers

    from accelbench.models.builtin.llama import copy_tokenizer
    from accelbench.models.quantize import QuantizeRequest, quantize

    config = transformers.Qwen2Config(
        vocab_size=30522,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        eos_token_id=102,
    )
    config.architectures = ["Qwen2ForCausalLM"]
    torch.manual_seed(0)
    checkpoint = tmp_path / "qwen2-mini"
    transformers.Qwen2ForCausalLM(config).save_pretrained(checkpoint)
    copy_tokenizer(checkpoint)
    manifests = quantize(
        QuantizeRequest(
            model=f"hf:{checkpoint}", target="cpu-local", precision="int8", out_dir=tmp_path / "v"
        )
    )
    fp32, int8 = manifests
    assert fp32.card["generative"]["kv_heads"] == 2 and fp32.card["generative"]["context_length"] == 512
    assert fp32.graph_cost.kv_cache_bytes_per_token == 2 * 2 * 2 * 16 * 4
    gate = to_dict(int8.accuracy)
    assert gate["perplexity"] > 0 and gate["perplexity_reference"] > 0 and "perplexity" in gate["reason"]
    assert gate["samples"] == 442  # the text fits the 512-token context: all of it
    tokenizer_files = {f for f in int8.files if f.startswith("tokenizer/")}
    assert "tokenizer/tokenizer.json" in tokenizer_files and not any(
        f.endswith(".safetensors") for f in tokenizer_files
    )
