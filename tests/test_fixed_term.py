"""The fixed term t0 = τ(chip) × d(graph) of a graph never published: placed by its depth (issue 36)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from accelbench.hardware.catalog import load_catalog
from accelbench.hardware.roofline import roofline_point
from accelbench.reports import efficiency as ef
from accelbench.reports import validation
from accelbench.reports.build import ReportOptions, build_report
from accelbench.reports.fixed_term import FixedTerms, leave_one_graph_out
from accelbench.reports.inputs import load_documents

H200_RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "h200" / "2026-11-30" / "results"

# two graphs of one kind (d 2 and 8 at depths 100 and 200) and one of another (d 0.5 at depth 50)
TERMS = FixedTerms(
    chip={"chip": math.log(1e-3)},
    graph={"a": math.log(2.0), "b": math.log(8.0), "r": math.log(0.5)},
    n_series=3,
    depth={"a": 100, "b": 200, "r": 50},
)


def test_a_graph_of_known_depth_takes_its_kinds_fixed_term_per_op():
    log_d, how, placed_by = TERMS.placed([], ["a", "b"], 150)
    assert (how, placed_by) == ("depth", ["a", "b"])
    # c = mean of log(d ÷ depth) over the kind: the geometric mean of 2/100 and 8/200
    assert math.exp(log_d) == pytest.approx(150 * math.sqrt(0.02 * 0.04))
    # a kind none of whose graphs has a depth: every graph with one
    only_r = replace(TERMS, depth={"r": 50})
    log_d, how, placed_by = only_r.placed([], ["a", "b"], 100)
    assert (math.exp(log_d), how, placed_by) == (pytest.approx(1.0), "depth", ["r"])
    assert TERMS.at("chip", [], ["a", "b"], 300) == pytest.approx(2 * TERMS.at("chip", [], ["a", "b"], 150))


def test_a_published_graph_keeps_its_own_and_an_unknown_depth_takes_the_median():
    assert TERMS.placed(["b"], ["a"], 999)[:2] == (math.log(8.0), "published")
    assert TERMS.placed([], ["a", "b", "r"]) == (math.log(2.0), "median", ["a", "b", "r"])
    assert FixedTerms({}, {}, 0).at("chip", [], [], 100) is None  # no series: no fixed term


def test_leave_one_graph_out_places_each_graph_from_the_others():
    terms = FixedTerms({"chip": 0.0}, {g: math.log(d) for g, d in (("a", 1), ("b", 2), ("c", 4))}, 3)
    rows = leave_one_graph_out(terms, {"a": 10, "b": 20, "c": 40}, dict.fromkeys("abc", "t"))
    assert [r.graph for r in rows] == ["a", "b", "c"]
    assert [r.by_size for r in rows] == pytest.approx([1.0, 1.0, 1.0])  # d ∝ depth: exact from any two
    # the median of the other two d's (geometric: their logs' mean) over the graph's own d
    assert [r.by_median for r in rows] == pytest.approx([math.sqrt(8), 1.0, math.sqrt(2) / 4])


def test_a_graph_twice_as_deep_gets_twice_the_t0_on_the_same_chip():
    catalog = load_catalog()
    for target in ("l4", "a10g"):  # a fit of its own chip's points; its toolchain's (no points of the chip)
        t = catalog.get(target)
        shallow = ef.model_for(catalog, t, roofline_point, model="minilm-user", depth=150)
        deep = ef.model_for(catalog, t, roofline_point, model="minilm-user", depth=300)
        assert deep.t0_s == pytest.approx(2 * shallow.t0_s)
        assert "scaled by its depth of 150 ops" in shallow.label
        median = ef.model_for(catalog, t, roofline_point, model="minilm-user")
        assert "the median transformer graph's fixed term" in median.label
    # a published graph keeps the fixed term fitted on its own series, whatever depth is passed
    l4 = catalog.get("l4")
    own = ef.model_for(catalog, l4, roofline_point, model="resnet50")
    assert ef.model_for(catalog, l4, roofline_point, model="resnet50", depth=999).t0_s == own.t0_s


def test_the_report_passes_the_graphs_depth_and_an_old_manifest_takes_the_median():
    doc = next(d for d in load_documents([str(H200_RESULTS)]) if d.model == "bert-base")
    assert doc.graph_cost.depth is None  # written before the count: an old manifest

    def l4_row(**counted):
        user = doc.model_copy(
            update={
                "model": "minilm-user",
                "target": "cpu-local",
                "run_id": "minilm-user__cpu-local__test",
                "graph_cost": doc.graph_cost.model_copy(update=counted),
            }
        )
        data = build_report([user], load_catalog(), ReportOptions(project=("l4",)))
        return next(r for r in data.rows if r.target == "l4")

    old, counted = l4_row(), l4_row(ops=372, depth=296)
    assert "the median transformer graph's fixed term" in old.efficiency_source
    assert "scaled by its depth of 296 ops" in counted.efficiency_source
    assert old.capacity_ips and counted.capacity_ips  # both project


def test_depth_places_the_published_graphs_better_than_the_median_graph():
    # the figures docs/projections.md records (bench/projection_check.py prints the table)
    rows = validation.fixed_term_by_size(load_catalog(), roofline_point)
    assert {r.toolchain for r in rows} == {"neuron", "tensorrt"} and len(rows) == 11

    def worst(key: str) -> float:
        return max(max(getattr(r, key), 1 / getattr(r, key)) for r in rows)

    assert worst("by_depth") < 2.3 < 3.1 < worst("by_median")
    assert sum(max(r.by_depth, 1 / r.by_depth) <= 2 for r in rows) == 10
