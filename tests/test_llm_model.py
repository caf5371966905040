"""Generative models in the model stage: the card's [generative] table, hf:DIR checkpoints, the per-token
counts, `models inspect` / `roofline`, and the generative variant folder."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from accelbench.documents import to_dict
from accelbench.errors import BadInputError
from accelbench.models.cards import card_from_dict, load_card
from accelbench.models.generative import GenerativeSpec, kv_dtype, spec_from_hf_config
from accelbench.models.loader import generative_card, is_causal_lm_dir

TINY = dict(
    tokenizer="builtin:minilm-wordpiece",
    context_length=2048,
    layers=4,
    hidden_size=256,
    heads=4,
    kv_heads=2,
    head_size=64,
    intermediate_size=688,
    vocab_size=30522,
    tie_word_embeddings=True,
)


def test_llama_tiny_card_round_trips():
    card = load_card("builtin:llama-tiny")
    assert card.task == "text-generation" and card.generative.kv_heads == 2
    assert card.generative.gate["int4"]["agreement"] == pytest.approx(
        card.generative.gate["int4"]["agreement"]
    )
    again = card_from_dict(card.to_dict())
    assert again.generative == card.generative and again.to_dict() == card.to_dict()


def test_counts_match_transformers_parameter_count():
    # LlamaForCausalLM(hidden 256, 4 layers, 4/2 heads, 688, 30522, tied) has 10,715,904 parameters
    # (counted with torch when the card was made; FIELD-NOTES: "10.7 M")
    spec = GenerativeSpec(**TINY)
    assert spec.params == 10_715_904
    assert spec.kv_cache_bytes_per_token("float32") == 2 * 4 * 2 * 64 * 4
    assert spec.kv_cache_bytes_per_token("bfloat16") == 2048
    linear = 2 * spec.matmul_params
    assert spec.flops_per_token(0) == linear
    assert spec.flops_per_token(100) - linear == 4 * 4 * 4 * 64 * 100
    cost = spec.graph_cost("fp32")
    assert cost["weight_bytes"] == spec.params * 4 and cost["context_length"] == 2048
    assert cost["flops_per_decode_token"] > cost["flops_per_prefill_token"] > linear


def test_weight_bytes_without_a_variant_are_the_projections_count():
    """Nothing measured: the linear layers at the precision (INT4 with an FP16 scale per group of 128), the
    embedding (tied: it is the LM head), norms at 16 bits, as hardware.llm_memory counts them."""
    spec = GenerativeSpec(**TINY)
    linear = 4 * (2 * 256 * 4 * 64 + 2 * 256 * 2 * 64 + 3 * 256 * 688)
    kept = 30522 * 256 + (2 * 4 + 1) * 256
    assert linear + kept == spec.params
    assert spec.graph_cost("int8")["weight_bytes"] == int(linear * 1.0 + kept * 2.0)
    assert spec.graph_cost("int4")["weight_bytes"] == int(linear * (0.5 + 2 / 128) + kept * 2.0)
    assert spec.graph_cost("bf16")["weight_bytes"] == spec.params * 2 == spec.weight_bytes("bf16")
    assert [kv_dtype(p) for p in ("fp32", "bf16", "fp16", "fp8", "int8", "int4")] == [
        "float32",
        "bfloat16",
        "float16",
        "fp8",
        "float32",
        "float32",
    ]


def test_llama_3_8b_kv_bytes_as_published():
    # LLM-NOTES: Llama-3.1-8B, 32 layers, 8 KV heads, head size 128, FP16: 131,072 B per token
    spec = GenerativeSpec(
        tokenizer="x",
        context_length=131072,
        layers=32,
        hidden_size=4096,
        heads=32,
        kv_heads=8,
        head_size=128,
        intermediate_size=14336,
        vocab_size=128256,
    )
    assert spec.kv_cache_bytes_per_token("float16") == 131_072
    assert 8.0e9 < spec.params < 8.1e9  # published: 8.03 B


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("kv_heads", 3, "card.toml: field 'generative.kv_heads': 3 does not divide heads=4"),
        ("layers", 0, "card.toml: field 'generative.layers': expected a positive integer, got 0"),
        ("layers", "4", "card.toml: field 'generative.layers': expected int, got '4'"),
        ("vocab_size", -1, "card.toml: field 'generative.vocab_size': expected a positive integer, got -1"),
        ("colour", 1, "unknown field"),
        ("gate", {"int4": {"agreement": "high"}}, "generative.gate"),
    ],
)
def test_bad_generative_tables_name_the_field(field, value, message):
    data = load_card("builtin:llama-tiny").to_dict()
    data["generative"][field] = value
    with pytest.raises(BadInputError, match=message):
        card_from_dict(data, origin="card.toml")


def test_a_missing_count_is_named_and_a_missing_head_size_derived():
    data = load_card("builtin:llama-tiny").to_dict()
    del data["generative"]["layers"]
    with pytest.raises(BadInputError, match="^card.toml: missing field 'generative.layers'$"):
        card_from_dict(data, origin="card.toml")
    data = load_card("builtin:llama-tiny").to_dict()
    del data["generative"]["head_size"]  # hidden size ÷ heads, as hardware.llm_memory.load_shape reads it
    assert card_from_dict(data).generative == load_card("builtin:llama-tiny").generative


def test_a_text_generation_card_needs_the_table():
    data = load_card("builtin:llama-tiny").to_dict()
    del data["generative"]
    with pytest.raises(BadInputError, match="generative"):
        card_from_dict(data)


def _config(kind: str):
    transformers = pytest.importorskip("transformers")
    small = dict(
        vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4
    )
    small["max_position_embeddings"] = 512
    if kind == "llama":
        return transformers.LlamaConfig(num_key_value_heads=2, **small), "LlamaForCausalLM"
    if kind == "qwen2":
        return transformers.Qwen2Config(num_key_value_heads=2, **small), "Qwen2ForCausalLM"
    if kind == "mistral":
        return transformers.MistralConfig(num_key_value_heads=1, **small), "MistralForCausalLM"
    if kind == "phi3":
        return transformers.Phi3Config(num_key_value_heads=4, **small), "Phi3ForCausalLM"
    return transformers.GemmaConfig(num_key_value_heads=1, head_dim=32, **small), "GemmaForCausalLM"


@pytest.mark.hf
@pytest.mark.parametrize("kind", ["llama", "qwen2", "mistral", "phi3", "gemma"])
@pytest.mark.slow
def test_hf_checkpoint_layouts_read_from_config_json(kind, tmp_path):
    config, architecture = _config(kind)
    config.architectures = [architecture]
    config.save_pretrained(tmp_path)
    assert is_causal_lm_dir(str(tmp_path))
    card = generative_card(f"hf:{tmp_path}")
    spec = card.generative
    assert (spec.layers, spec.hidden_size, spec.heads, spec.vocab_size) == (2, 64, 4, 1000)
    assert spec.kv_heads == config.num_key_value_heads
    assert spec.head_size == (32 if kind == "gemma" else 16)
    assert spec.context_length == 512 and card.task == "text-generation"
    assert spec.hf_dir == str(tmp_path.resolve())


def test_unknown_architecture_is_one_line(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "bert", "architectures": ["BertForCausalLM"]})
    )
    with pytest.raises(BadInputError, match="model_type 'bert' is not a supported causal LM"):
        spec_from_hf_config(tmp_path / "config.json")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "accelbench.cli", *args], capture_output=True, text=True, check=False
    )


def test_the_roofline_command_projects_with_the_reports_llm_roofline():
    """`roofline` on a generative card draws its points from hardware/llm_roofline, as the reports do: the
    prefill point's latency is ttft_s, each decode point's tpot_s (untied embedding left out of the bytes)."""
    from accelbench.hardware.catalog import load_catalog
    from accelbench.hardware.llm_memory import KV_PRECISION
    from accelbench.hardware.llm_roofline import LlmCost, roof, tpot_s, ttft_s
    from accelbench.models.llm_roofline import phase_points

    untied = GenerativeSpec(**{**TINY, "tie_word_embeddings": False})
    targets = [load_catalog().get(t) for t in ("l4", "h100-sxm")]
    for spec, precision in ((GenerativeSpec(**TINY), "fp32"), (untied, "int4"), (untied, "fp16")):
        points = phase_points(spec, targets, [1, 64], precision)
        cost = LlmCost.of(spec, precision, KV_PRECISION[kv_dtype(precision)])
        assert cost.weight_bytes < spec.weight_bytes(precision) or spec.tie_word_embeddings
        assert [(p.point.target_id, p.phase, p.tokens) for p in points] == [
            (t.id, phase, n)
            for t in targets
            for phase, n in (("prefill", 1024), ("decode", 1), ("decode", 64))
        ]
        for p in points:
            r = roof(next(t for t in targets if t.id == p.point.target_id), precision)
            bound = (
                ttft_s(cost, r, spec.reference_isl)
                if p.phase == "prefill"
                else tpot_s(cost, r, p.tokens, spec.decode_context)
            )
            assert p.point.latency_lower_bound_s == pytest.approx(bound, rel=1e-12)
            assert p.point.peak_flops_per_s == r.peak_flops_per_s  # int4 computes at the FP16 peak


@pytest.mark.slow
def test_inspect_and_roofline_print_the_generative_counts():
    inspect = _cli("models", "inspect", "builtin:llama-tiny")
    assert inspect.returncode == 0, inspect.stderr
    assert "10.72 M" in inspect.stdout and "4,096 B per token" in inspect.stdout
    assert "MFLOP per prefill token" in inspect.stdout and "per decode token" in inspect.stdout
    roof = _cli("roofline", "builtin:llama-tiny", "--target", "l4", "--json")
    assert roof.returncode == 0, roof.stderr
    doc = json.loads(roof.stdout)
    phases = {p["phase"] for p in doc["points"]}
    assert phases == {"prefill", "decode"}
    decode = [p for p in doc["points"] if p["phase"] == "decode"]
    # decode at batch 1 reads the weights for one token: memory-bound on an L4
    assert decode[0]["bound"] == "memory" and decode[0]["batch"] == 1
    # bigger batches share the weight read: tokens/s grows
    assert decode[1]["throughput_upper_bound_ips"] > decode[0]["throughput_upper_bound_ips"]
    text = _cli("roofline", "builtin:llama-tiny", "--target", "l4")
    assert "prefill" in text.stdout and "decode" in text.stdout


def test_generative_precision_choices_are_checked():
    from accelbench.models.quantize import QuantizeRequest, quantize

    with pytest.raises(BadInputError, match="choose one of fp32, int8, int4"):
        quantize(QuantizeRequest(model="builtin:llama-tiny", target="cpu-local", precision="fp16"))
    with pytest.raises(BadInputError, match="makes an int4 variant, not int8"):
        quantize(
            QuantizeRequest(
                model="builtin:llama-tiny",
                target="cpu-local",
                precision="int8",
                recipe="ort-int4-b32-int8-compute",
            )
        )
    with pytest.raises(BadInputError, match="a generative model takes one of"):
        quantize(
            QuantizeRequest(model="builtin:llama-tiny", target="cpu-local", precision="int8", recipe="fp16")
        )


@pytest.fixture(scope="module")
def fp32_variant(tmp_path_factory):
    pytest.importorskip("optimum")
    from accelbench.models.quantize import QuantizeRequest, quantize

    out = tmp_path_factory.mktemp("variants")
    (manifest,) = quantize(QuantizeRequest(model="builtin:llama-tiny", target="cpu-local", out_dir=out))
    return out / manifest.name, manifest


@pytest.mark.hf
@pytest.mark.slow
def test_generative_variant_folder(fp32_variant):
    folder, manifest = fp32_variant
    assert manifest.card["task"] == "text-generation" and manifest.precision == "fp32"
    assert {"model.onnx", "tokenizer/tokenizer.json", "hf/config.json", "hf/model.safetensors"} <= set(
        manifest.files
    )
    cost = to_dict(manifest.graph_cost)
    assert cost["kv_cache_bytes_per_token"] == 4096 and cost["kv_dtype"] == "float32"
    # the export keeps the tied embedding twice; a decode step reads the LM head, not the gathered table
    assert cost["weight_bytes"] == pytest.approx(10_715_904 * 4, rel=0.01)
    gate = to_dict(manifest.accuracy)
    assert gate["verdict"] == "PASS" and gate["value"] == 1.0 and gate["kl_divergence"] == 0
    assert gate["samples"] > 400  # the shipped text, not truncated to the tokenizer's 128
    assert manifest.attempts[0].recipe == "fp32-reference"
    import onnx

    inputs = {i.name for i in onnx.load(str(folder / "model.onnx"), load_external_data=False).graph.input}
    assert "past_key_values.0.key" in inputs and "position_ids" in inputs


@pytest.mark.hf
@pytest.mark.slow
def test_repository_plans_the_decoupled_model(fp32_variant, tmp_path):
    from accelbench.serving.llm_repository import generative_mismatch
    from accelbench.serving.repository import write_repository

    folder, _ = fp32_variant
    (model,) = write_repository([folder], tmp_path, "local", {"max_sequences": 4, "max_context": 256})
    text = model.config_pbtxt
    assert "decoupled: true" in text and "max_batch_size" not in text  # 0 is the default: not written
    for name in (
        "text_input",
        "input_ids",
        "max_tokens",
        "ignore_eos",
        "temperature",
        "text_output",
        "output_ids",
    ):
        assert f'name: "{name}"' in text
    assert set(model.files) >= {"1/model.py", "1/llm_engine.py", "1/model.onnx", "1/tokenizer/tokenizer.json"}
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    config = json_format.MessageToDict(text_format.Parse(text, model_config_pb2.ModelConfig()))
    assert config["parameters"]["max_sequences"]["stringValue"] == "4"
    served = {
        "model_transaction_policy": {"decoupled": True},
        "input": [{"name": i["name"], "data_type": i["dataType"]} for i in config["input"]],
        "output": [{"name": o["name"], "data_type": o["dataType"]} for o in config["output"]],
    }
    assert generative_mismatch(served) is None
    assert "not decoupled" in generative_mismatch({**served, "model_transaction_policy": {}})
    (torch_model,) = write_repository([folder], tmp_path / "torch", "torch-cuda")
    assert (
        "1/hf/model.safetensors" in torch_model.files
        and 'string_value: "bfloat16"' in torch_model.config_pbtxt
    )
    with pytest.raises(BadInputError, match="exceeds the model's context length 2048"):
        write_repository([folder], tmp_path / "x", "local", {"max_context": 4096})
