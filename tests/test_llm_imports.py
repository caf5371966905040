"""accelbench import aiperf / guidellm / vllm-bench on files the tools wrote (tests/data/llm/imports/SOURCES.md),
and the report pricing them without edits (issue 22)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from accelbench.cli import main
from accelbench.documents import load_result

DATA = Path(__file__).parent / "data" / "llm" / "imports"
CPU_LOCAL_USD_PER_HOUR = 0.08925
FILES = {"vllm-bench": "vllm-bench-reconstructed.json", "aiperf": "aiperf/profile_export_aiperf.json",
         "guidellm": "guidellm/benchmarks.json"}  # fmt: skip


def _import(tmp_path, tool: str) -> Path:
    src = DATA / FILES[tool]
    if not src.exists():
        pytest.skip(f"{src} not recorded")
    res = CliRunner().invoke(main, ["import", tool, str(src), "--target", "cpu-local", "--model", "reference",
                                    "--precision", "fp32", "--out", str(tmp_path / "res")])  # fmt: skip
    assert res.exit_code == 0, res.output
    return Path(res.output.strip().splitlines()[-1])


def _priced(tmp_path) -> dict:
    res = CliRunner().invoke(main, ["report", str(tmp_path / "res"), "--out", str(tmp_path / "rep"),
                                    "--slo-ttft-p99-ms", "60000", "--slo-tpot-p99-ms", "1000"])  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO((tmp_path / "rep" / "generative.csv").read_text())))
    return next(r for r in rows if r["target"] == "cpu-local")


@pytest.mark.slow
def test_vllm_bench_result_imports_and_prices(tmp_path):
    doc = load_result(_import(tmp_path, "vllm-bench"))
    step = doc.steps[0]
    g = step.generative
    assert doc.origin == "vllm-bench-import" and doc.task == "text-generation"
    assert step.offered.concurrency == 32 and g.output_tokens_per_s.value == 434.40
    assert g.ttft_us.p99 == pytest.approx(10999.46e3) and g.tpot_us.p50 == pytest.approx(70.23e3)
    assert g.tokens_per_s_per_user == pytest.approx(1000 / 70.23)
    assert doc.load_profile.workload.isl == 2048 and doc.load_profile.workload.osl == 2048
    row = _priced(tmp_path)
    assert float(row["usd_per_million_output_tokens"]) == pytest.approx(
        CPU_LOCAL_USD_PER_HOUR / (434.40 * 3600) * 1e6
    )


@pytest.mark.parametrize("tool", ["aiperf", "guidellm"])
def test_real_tool_files_import_and_price(tmp_path, tool):
    doc = load_result(_import(tmp_path, tool))
    assert doc.origin == f"{tool}-import" and doc.steps
    for step in doc.steps:
        g = step.generative
        assert g.output_tokens_per_s.value > 0 and g.ttft_us.p50 > 0 and g.tpot_us.p50 > 0
    row = _priced(tmp_path)
    tps = float(row["capacity_output_tokens_per_s"])
    assert float(row["usd_per_million_output_tokens"]) == pytest.approx(
        CPU_LOCAL_USD_PER_HOUR / (tps * 3600) * 1e6
    )


def test_a_file_of_the_wrong_kind_is_one_clear_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"hello": 1}))
    for tool, what in (("vllm-bench", "not a `vllm bench serve"), ("aiperf", "not an AIPerf profile export"),
                       ("guidellm", "not a GuideLLM benchmarks file")):  # fmt: skip
        res = CliRunner().invoke(main, ["import", tool, str(bad), "--target", "cpu-local", "--model", "m",
                                        "--precision", "fp32", "--out", str(tmp_path)])  # fmt: skip
        assert res.exit_code == 2 and what in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["import", "aiperf", str(tmp_path / "missing.json"), "--target", "cpu-local",
                                    "--model", "m", "--precision", "fp32"])  # fmt: skip
    assert res.exit_code == 2 and "AIPerf file not found" in res.output
