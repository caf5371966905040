"""``accelbench project``: the report's projected rows without a measurement (issue 48, item 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from accelbench.cli import main

ASKED = ["l4", "l40s", "a100-sxm4-80gb", "h100-sxm"]


def _run(*args: str):
    return CliRunner().invoke(main, ["project", *args])


@pytest.fixture(scope="module")
def rows():
    got = _run("llama-3.1-8b", "--isl", "1000", "--osl", "1000", "--target", ",".join(ASKED), "--json")
    assert got.exit_code == 0, got.output
    return json.loads(got.stdout)


def test_the_question_of_the_issue_is_answered_with_projected_generative_rows(rows):
    assert {r["target"] for r in rows} == set(ASKED)
    assert all(r["table"] == "generative" and r["status"] == "projected" for r in rows)
    h100_fp8 = next(r for r in rows if (r["target"], r["precision"]) == ("h100-sxm", "fp8"))
    assert h100_fp8["kv_dtype"] == "fp8" and h100_fp8["weights_dtype"] == "fp8"
    assert h100_fp8["tp"] == 1 and h100_fp8["points"]
    assert h100_fp8["usd_per_million_output_tokens"] > 0 and h100_fp8["usd_per_million_input_tokens"] > 0
    a100_fp8 = next(r for r in rows if (r["target"], r["precision"]) == ("a100-sxm4-80gb", "fp8"))
    assert a100_fp8["capacity_output_tokens_per_s"] is None and "does not run fp8" in a100_fp8["reason"]


def test_kv_dtype_overrides_the_engines_default(rows):
    got = _run(
        "llama-3.1-8b",
        "--isl",
        "1000",
        "--osl",
        "1000",
        "--target",
        "h100-sxm",
        "--precision",
        "fp8",
        "--kv-dtype",
        "fp16",
        "--json",
    )
    assert got.exit_code == 0, got.output
    (row,) = json.loads(got.stdout)
    default = next(r for r in rows if (r["target"], r["precision"]) == ("h100-sxm", "fp8"))
    assert row["kv_dtype"] == "fp16" and row["kv_dtype_source"] == "--kv-dtype"
    assert row["capacity_output_tokens_per_s"] < default["capacity_output_tokens_per_s"]


def test_markdown_html_and_json_files(tmp_path):
    got = _run("llama-3.1-8b", "--isl", "128", "--osl", "128", "--target", "l4", "--out", str(tmp_path))
    assert got.exit_code == 0, got.output
    md = (tmp_path / "report.md").read_text()
    assert "(proj)" in md and "KV fp16" in md
    assert "l4" in (tmp_path / "report.html").read_text()
    assert json.loads((tmp_path / "table.json").read_text())[0]["target"] == "l4"


@pytest.mark.slow  # the published classic efficiency models: ~4 s of CPU
def test_a_classic_model_gets_cost_per_million_requests():
    got = _run("resnet50", "--precision", "fp16", "--target", "l4,a100-sxm4-80gb", "--json")
    assert got.exit_code == 0, got.output
    rows = json.loads(got.stdout)
    assert {r["target"] for r in rows} == {"l4", "a100-sxm4-80gb"}
    assert all(r["status"] == "projected" and r["cost_per_million_usd"] > 0 for r in rows)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["no-such-model", "--isl", "1", "--osl", "1"], "unknown model"),
        (["llama-3.1-8b", "--isl", "1", "--osl", "1", "--target", "nope"], "nope"),
        (["llama-3.1-8b"], "--isl"),
        (["llama-3.1-8b", "--isl", "1", "--osl", "1", "--precision", "fp7"], "fp7"),
    ],
)
def test_bad_input_is_one_line_and_a_nonzero_exit(args, says):
    got = _run(*args)
    assert got.exit_code != 0
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], got.stderr


def test_a_malformed_card_is_one_line(tmp_path):
    card = tmp_path / "bad.toml"
    card.write_text('name = "bad"\n[generative]\nlayers = 2\n')
    got = _run(str(card), "--isl", "1", "--osl", "1")
    assert got.exit_code != 0 and len(got.stderr.strip().splitlines()) == 1, got.stderr


def _own_points() -> set[str]:
    from collections import Counter

    from accelbench.hardware.catalog import load_catalog
    from accelbench.hardware.llm_published import load_llm_points

    counts = Counter(p.target for p in load_llm_points(frozenset(load_catalog().targets)))
    return {t for t, n in counts.items() if n > 1}


OWN_POINTS = _own_points()


def test_every_projected_row_and_frontier_point_has_a_range_that_says_what_it_is(rows):
    for r in (r for r in rows if r["capacity_output_tokens_per_s"]):
        low, value, high = (r[f"capacity_output_tokens_per_s{k}"] for k in ("_low", "", "_high"))
        assert low < value < high, r["target"]
        assert r["usd_per_million_output_tokens_low"] < r["usd_per_million_output_tokens_high"]
        assert all(p["output_tps_low"] <= p["output_tps"] <= p["output_tps_high"] for p in r["points"])
        own = r["target"] in OWN_POINTS  # a target with published LLM points of its own (more than one)
        assert ("fit's spread over its" in r["efficiency_source"]) == own
        assert ("widened 1.5× either way" in r["efficiency_source"]) != own


def test_an_hf_checkpoint_folder_is_projected_from_its_config(tmp_path):
    config = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 16,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": True,
        "model_type": "llama",
    }  # fmt: skip (Llama-3.2-1B's shape)
    (tmp_path / "config.json").write_text(json.dumps(config))
    got = _run(
        f"hf:{tmp_path}", "--isl", "128", "--osl", "128", "--target", "l4", "--precision", "fp16", "--json"
    )
    assert got.exit_code == 0, got.output
    (row,) = json.loads(got.stdout)
    assert row["target"] == "l4" and row["capacity_output_tokens_per_s"] > 0 and row["kv_dtype"] == "fp16"
    bad = _run(f"hf:{tmp_path / 'missing'}", "--isl", "1", "--osl", "1")
    assert bad.exit_code != 0 and "ForCausalLM" in bad.stderr


def test_a_trace_gives_the_workload_its_mean_lengths():
    trace = str(
        Path(__file__).parent / "data/traces/mooncake_sample.jsonl"
    )  # 60 requests, 39.08 / 4.02 tokens
    got = _run("llama-3.1-8b", "--trace", trace, "--target", "h100-sxm", "--precision", "fp8", "--json")
    assert got.exit_code == 0, got.output
    (row,) = json.loads(got.stdout)
    assert (row["isl"], row["osl"]) == (39, 4) and row["capacity_output_tokens_per_s"] > 0
    both = _run("llama-3.1-8b", "--trace", trace, "--isl", "10", "--osl", "10")
    assert both.exit_code != 0 and "give the workload once" in both.stderr


def test_a_weight_only_int4_model_is_asked_by_its_weights_format():
    """int4 (AWQ W4A16, computed in FP16) is a generative weight format, not a catalog peak: `--precision int4`
    projects it where the target computes FP16 (the Jetson AGX Orin's published vLLM W4A16 point), and a classic
    model still takes only the catalog's precisions."""
    got = _run("llama-3.1-8b", "--isl", "2048", "--osl", "128", "--target", "jetson-agx-orin-64gb",
               "--precision", "int4", "--json")  # fmt: skip
    assert got.exit_code == 0, got.output
    (row,) = json.loads(got.stdout)
    assert (row["precision"], row["weights_dtype"], row["status"]) == ("int4", "int4", "projected")
    assert row["points"] and row["points"][0]["output_tps"] > 0 and row["capacity_output_tokens_per_s"] > 0
    classic = _run("resnet50", "--precision", "int4", "--json")
    assert classic.exit_code != 0 and "unknown precision 'int4'" in classic.stderr
