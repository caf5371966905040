"""The report for generative results: cost per million tokens, capacity at TTFT/TPOT, the frontier answer,
projections, the memory fit and the token plan (issue 22), from committed llama-tiny cpu-local documents."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from accelbench.cli import main
from accelbench.documents import load_result
from accelbench.reports.cost import PriceQuote
from accelbench.reports.headline import _gen_pick, cost_text
from accelbench.reports.llm_report import (
    GenPoint,
    GenRow,
    answer_rows,
    pareto,
    range_at,
    throughput_at,
    token_row,
    usd_per_million_tokens,
)

DATA = Path(__file__).parent / "data" / "llm" / "hand"
PROJECT = "l4,a100-sxm4-80gb,h100-sxm,inf2-xlarge,jetson-agx-orin-64gb"
CPU_LOCAL_USD_PER_HOUR = 0.08925  # catalog: cpu-local priced as c7i.large on-demand


def _report(tmp_path, *extra: str) -> tuple[str, dict[str, dict], str]:
    out = tmp_path / "rep"
    res = CliRunner().invoke(main, ["report", str(DATA), "--out", str(out), *extra])
    assert res.exit_code == 0, res.output
    rows = {r["target"]: r for r in csv.DictReader(io.StringIO((out / "generative.csv").read_text()))}
    return (out / "report.md").read_text(), rows, (out / "report.html").read_text()


def _measured_capacity() -> tuple[float, float, float, float]:
    """The fastest committed step meeting TTFT p99 ≤ 2000 and TPOT p99 ≤ 100 ms (all four do): c = 8."""
    best = max((load_result(p) for p in DATA.glob("*.json")),
               key=lambda d: d.steps[0].generative.output_tokens_per_s.value)  # fmt: skip
    g = best.steps[0].generative
    return (
        g.output_tokens_per_s.value,
        g.output_tokens_per_s.low,
        g.output_tokens_per_s.high,
        g.input_tokens_per_s,
    )


def test_cost_per_million_output_tokens_is_the_formula_on_the_measured_figures(tmp_path):
    md, rows, html = _report(tmp_path, "--project", PROJECT, "--min-tokens-per-user", "10")
    tps, low, high, in_tps = _measured_capacity()
    cost = CPU_LOCAL_USD_PER_HOUR / (tps * 3600) * 1e6  # $/accelerator-hour ÷ (tokens/s × 3600) × 10⁶
    row = rows["cpu-local"]
    assert row["status"] == "measured" and float(row["capacity_output_tokens_per_s"]) == tps
    assert round(float(row["usd_per_million_output_tokens"]), 2) == round(cost, 2)  # to the cent
    assert float(row["usd_per_million_output_tokens"]) == pytest.approx(cost, rel=1e-12)
    # the interval: the output-rate interval inverted
    assert float(row["usd_per_million_output_tokens_low"]) == pytest.approx(
        CPU_LOCAL_USD_PER_HOUR / (high * 3600) * 1e6
    )
    assert float(row["usd_per_million_output_tokens_high"]) == pytest.approx(
        CPU_LOCAL_USD_PER_HOUR / (low * 3600) * 1e6
    )
    assert float(row["usd_per_million_input_tokens"]) == pytest.approx(
        CPU_LOCAL_USD_PER_HOUR / (in_tps * 3600) * 1e6
    )
    assert float(row["usd_per_million_blended_tokens"]) == pytest.approx(
        CPU_LOCAL_USD_PER_HOUR / ((in_tps + tps) * 3600) * 1e6
    )
    assert f"${cost:.4g} [${CPU_LOCAL_USD_PER_HOUR / (high * 3600) * 1e6:.4g}, " in md
    # the frontier plot, inline in HTML and as a file beside the Markdown
    assert "plots/frontier.svg" in md and html.count("<svg") == 1 and 'id="plot-frontier"' in html
    # the cheapest target at 10 tokens/s per user
    assert "At **10 tokens/s per user** (and the TTFT objective), the cheapest is **" in md
    at_user = md.split("At **10 tokens/s per user**")[1].split(". ")[0]  # projected there: its range said too
    assert "projected): **$" in at_user and "per million output tokens** (range $" in at_user, at_user
    # projected rows for L4, A100, H100, inf2 and Jetson AGX Orin, labelled with their efficiency's source
    for tid in PROJECT.split(","):
        assert rows[tid]["status"] == "projected"
        assert rows[tid]["efficiency_source"], tid
        assert f"| {tid} | fp32 | projected |" in md
    assert "fitted on its chip's (tensorrt 8.9)" in rows["l4"]["efficiency_source"]  # the L40S's points
    assert "published: fitted on h100-sxm's 10 point(s)" in rows["h100-sxm"]["efficiency_source"]
    # one Inferentia2 chip: optimum-neuron's points on inf2.48xlarge (the neuron toolchain), never the GPUs'
    assert "fitted on the neuron toolchain's" in rows["inf2-xlarge"]["efficiency_source"]
    assert "inf2-48xlarge" in rows["inf2-xlarge"]["efficiency_source"]
    # notes said once (issue 52): a projected row's note names its fit by number, the fit's text and what every
    # projected row shares (the TP rule, the roofline) stand once in the legend under the table
    table = md.split("### llama-tiny: cost per million tokens")[1].split("\n### ")[0]
    for tid in PROJECT.split(","):
        assert table.count(rows[tid]["efficiency_source"]) == 1, tid
        note = next(line for line in table.splitlines() if line.startswith(f"| {tid} |")).split(" | ")[-1]
        assert note.startswith("fit [") and "roofline" not in note and "published" not in note, note
    assert table.count("all-reduces over the instance's links included") == 1


@pytest.mark.slow
def test_capacity_is_the_highest_load_meeting_both_objectives(tmp_path):
    # TPOT p99 at c = 4 is 14.2 ms [13.5, 14.9], at c = 8 25.5 ms: a 20 ms bound leaves c = 4 as the capacity
    _, rows, _ = _report(tmp_path, "--slo-tpot-p99-ms", "20")
    assert float(rows["cpu-local"]["capacity_concurrency"]) == 4
    # 14.5 ms straddles c = 4's interval: INCONCLUSIVE, so c = 2 sets it and the reason says why
    _, rows, _ = _report(tmp_path, "--slo-tpot-p99-ms", "14.5")
    assert float(rows["cpu-local"]["capacity_concurrency"]) == 2
    assert "INCONCLUSIVE" in rows["cpu-local"]["reason"]
    # TTFT p99 of c = 1 is 21 ms: nothing meets 10 ms
    _, rows, _ = _report(tmp_path, "--slo-ttft-p99-ms", "10")
    assert rows["cpu-local"]["meets_objective"] == "False"
    assert rows["cpu-local"]["reason"] == "does not meet the TTFT/TPOT objective"


@pytest.mark.slow
def test_the_answer_interpolates_between_measured_points_and_never_extrapolates(tmp_path):
    # measured interactivity: 160, 125, 80, 47.6 tok/s per user (1000 / TPOT p50); 100 lies between 80 and 125
    _, rows, _ = _report(tmp_path, "--min-tokens-per-user", "100")
    row = rows["cpu-local"]
    assert 236.0 < float(row["answer_output_tokens_per_s"]) < 301.0
    assert "interpolated (PCHIP)" in row["answer_how"]
    assert float(row["answer_usd_per_million_output_tokens"]) == pytest.approx(
        usd_per_million_tokens(CPU_LOCAL_USD_PER_HOUR, float(row["answer_output_tokens_per_s"]))
    )
    _, rows, _ = _report(tmp_path, "--min-tokens-per-user", "500")
    assert (
        rows["cpu-local"]["answer_output_tokens_per_s"] == ""
        and "not reached" in rows["cpu-local"]["answer_how"]
    )


def test_pareto_and_pchip_are_monotone():
    pts = [
        (160.0, 152.0),
        (125.0, 236.0),
        (80.0, 301.0),
        (47.6, 352.0),
        (100.0, 200.0),
    ]  # (100, 200) dominated
    assert pareto(pts) == [(47.6, 352.0), (80.0, 301.0), (125.0, 236.0), (160.0, 152.0)]
    values = [throughput_at(pts, x)[0] for x in (50, 70, 90, 110, 130, 150)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))
    assert throughput_at(pts, 40)[0] == 352.0
    assert throughput_at(pts, 161)[0] is None
    # past saturation a projected frontier's batches serve the same tokens/s but for the last bit of a float:
    # that is no better point, so the answer stays "at its least interactive point", not an interpolation
    flat = [(4607.0, 159191.4568521306), (2303.5, 159191.4568521306), (1.6, 159191.45685213062)]
    assert pareto(flat) == [(4607.0, 159191.4568521306)]
    assert throughput_at(flat, 4000)[1].startswith("at its least interactive point")


def _frontier_row(status: str, band: tuple[float, float]) -> GenRow:
    """A row on the frontier of test_pareto_and_pchip_are_monotone, each point's range ``band`` × its rate."""
    pts = [(160.0, 152.0), (125.0, 236.0), (80.0, 301.0), (47.6, 352.0), (100.0, 200.0)]
    points = [
        GenPoint(None, y, y * band[0], y * band[1], None, x, 1.0, 1.0, "PASS", "PASS", "PASS") for x, y in pts
    ]
    price = {"on-demand": PriceQuote(CPU_LOCAL_USD_PER_HOUR, "on-demand", "test", "2026-01", "")}
    return GenRow("m", "fp16", "t", status, 128, 128, points, points[2], "", prices=price)


def test_the_answer_of_a_projected_row_carries_its_range_through_the_interpolation():
    (proj,) = answer_rows([_frontier_row("projected", (0.5, 1.25))], 100.0)
    value = throughput_at([(p.tokens_per_user or 0.0, p.output_tps) for p in proj.points], 100.0)[0]
    assert value is not None and proj.answer_tps == value and 236.0 < value < 301.0
    # one pair of band factors for the frontier: PCHIP scales with its data, so the range is value × factors
    assert proj.answer_tps_low == pytest.approx(value * 0.5) and proj.answer_tps_high == pytest.approx(
        value * 1.25
    )
    low, high = proj.answer_cost_interval("on-demand")
    cost = usd_per_million_tokens(CPU_LOCAL_USD_PER_HOUR, value)
    assert low == pytest.approx(cost / 1.25) and high == pytest.approx(cost / 0.5)
    t = token_row(proj, "on-demand", 100.0)
    assert (t.answer_usd_per_million_output_tokens_low, t.answer_usd_per_million_output_tokens_high) == (
        low,
        high,
    )
    pick = _gen_pick(proj, "on-demand", None, proj.answer_tps)
    assert pick is not None and "no range" not in cost_text(pick) and (pick.low, pick.high) == (low, high)
    # below the least interactive point: that point's own range; not reached: none
    (at_edge,) = answer_rows([proj], 40.0)
    assert (at_edge.answer_tps_low, at_edge.answer_tps_high) == pytest.approx((352.0 * 0.5, 352.0 * 1.25))
    assert range_at([(160.0, 152.0, 76.0, 190.0)], 161.0) == (None, None)
    # a measured row's answer claims no interval (its points' 95 % intervals are not one between them)
    (measured,) = answer_rows([_frontier_row("measured", (0.9, 1.1))], 100.0)
    assert measured.answer_tps == value and measured.answer_cost_interval("on-demand") == (None, None)


def test_llama_3_1_8b_fit_table_in_the_report(tmp_path):
    md, _, _ = _report(tmp_path, "--fit-model", "llama-3.1-8b", "--context", "8192")
    assert "### Memory fit: llama-3.1-8b at 8,192 tokens of context" in md
    line = next(x for x in md.splitlines() if x.startswith("| l4 | 24 |"))
    # tests/test_llm_memory.py's hand figures (3, 10, 13 with an FP16 cache), FP8 weights with their FP8 cache
    assert "3 seq | 20 seq | 13 seq" in line
    t4 = next(x for x in md.splitlines() if x.startswith("| t4 |"))
    assert "does not fit" in t4 and "not supported: no FP8" in t4 and "6 seq" in t4


def test_token_capacity_plan_and_json(tmp_path):
    _report(tmp_path, "--target-tokens-per-s", "1000")
    doc = json.loads((tmp_path / "rep" / "generative.json").read_text())
    plan = {p["target"]: p for p in doc["plan"]}
    # ⌈1000 ÷ (352 × 0.7)⌉ = 5 replicas of cpu-local
    assert plan["cpu-local"]["replicas"] == 5
    assert len(doc["rows"][0]["points"]) == 4 and doc["objectives"]["ttft_p99_ms"] == 2000


def test_bad_fit_model_is_one_clear_line(tmp_path):
    res = CliRunner().invoke(main, ["report", str(DATA), "--out", str(tmp_path), "--fit-model", "nope"])
    assert res.exit_code != 0 and "model card not found: nope" in res.output and "Traceback" not in res.output


def test_a_measured_document_from_the_load_generator_is_priced_by_the_formula(tmp_path):
    src = Path(__file__).parent / "data" / "llm" / "reference"
    out = tmp_path / "rep"
    res = CliRunner().invoke(
        main, ["report", str(src), "--out", str(out), "--slo-ttft-p99-ms", "1000", "--slo-tpot-p99-ms", "50"]
    )
    assert res.exit_code == 0, res.output
    doc = load_result(next(src.glob("*.json")))
    valid = [s for s in doc.steps if s.verdict == "VALID"]
    best = max(valid, key=lambda s: s.generative.output_tokens_per_s.value)
    row = next(csv.DictReader(io.StringIO((out / "generative.csv").read_text())))
    assert row["target"] == "cpu-local" and float(row["capacity_concurrency"]) == best.offered.concurrency
    expected = CPU_LOCAL_USD_PER_HOUR / (best.generative.output_tokens_per_s.value * 3600) * 1e6
    assert round(float(row["usd_per_million_output_tokens"]), 2) == round(expected, 2)
    assert float(row["usd_per_million_output_tokens"]) == pytest.approx(expected, rel=1e-12)


def test_real_llama_tiny_cpu_local_documents_are_priced_by_the_formula(tmp_path):
    """llama-tiny measured on cpu-local through the real Triton model (tests/data/llm/tiny/SOURCES.md)."""
    src = Path(__file__).parent / "data" / "llm" / "tiny"
    if not any(src.glob("*.json")):
        pytest.skip("no llama-tiny documents recorded")
    out = tmp_path / "rep"
    res = CliRunner().invoke(main, ["report", str(src), "--out", str(out), "--min-tokens-per-user", "10",
                                    "--project", PROJECT])  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = {r["target"]: r for r in csv.DictReader(io.StringIO((out / "generative.csv").read_text()))}
    steps = [
        s for p in src.glob("*.json") for s in load_result(p).steps if s.verdict in ("VALID", "LOW-PRECISION")
    ]

    def passes(s) -> bool:
        ivl = s.generative.intervals or {}
        highs = [(ivl.get(m) or {}).get("p99") for m in ("ttft_us", "tpot_us")]
        return (
            all(h is not None and h.high is not None for h in highs)
            and highs[0].high <= 2000e3
            and highs[1].high <= 100e3
        )

    ok = [s for s in steps if passes(s)]
    row = rows["cpu-local"]
    if not ok:
        assert row["meets_objective"] == "False"
        return
    best = max(ok, key=lambda s: s.generative.output_tokens_per_s.value)
    expected = CPU_LOCAL_USD_PER_HOUR / (best.generative.output_tokens_per_s.value * 3600) * 1e6
    assert round(float(row["usd_per_million_output_tokens"]), 2) == round(expected, 2)
    assert float(row["usd_per_million_output_tokens"]) == pytest.approx(expected, rel=1e-12)
    for tid in PROJECT.split(","):
        assert rows[tid]["status"] == "projected" and rows[tid]["efficiency_source"]
