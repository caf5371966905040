"""Repeated runs in the report: documents that are repeats of one sweep combine into one row whose capacity
interval includes the between-run variance; other sweeps and single runs are left as they were.

The repeats are the recorded MiniLM INT8 document (tests/data/reports/cpu-local-measured) copied with the
throughput of every step scaled, as a slower or faster repeat on a shared host would record it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.documents import load_result
from accelbench.hardware.catalog import load_catalog
from accelbench.loadtests.statistics import combine_runs
from accelbench.reports.build import ReportOptions, build_report
from accelbench.reports.report import render_report

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests/data/reports/cpu-local-measured/minilm-l6__cpu-local__int8__closed-http-b1.json"
OPTIONS = ReportOptions()  # p99 within 100 ms: only the concurrency-1 step passes in the recorded run


def repeat_of(repeat: int, scale: float, profile_change: dict | None = None):
    """The recorded document as repeat ``repeat`` with every throughput figure ×``scale``."""
    data = json.loads(RECORDED.read_text())
    if repeat > 1:
        data["run_id"] += f"__r{repeat}"
        data["load_profile"]["repeat"] = repeat
    data["load_profile"].update(profile_change or {})
    for step in data["steps"]:
        step["throughput_rps"] = round(step["throughput_rps"] * scale, 3)
        step["throughput_ips"] = round(step["throughput_ips"] * scale, 3)
        thr = step["statistics"]["throughput_rps"]
        for key in ("value", "low", "high", "se"):
            thr[key] = round(thr[key] * scale, 4)
    return load_result(data, f"repeat {repeat}")


def row_of(docs):
    rows = [r for r in build_report(docs, load_catalog(), OPTIONS).rows if r.status == "measured"]
    assert len(rows) == 1
    return rows[0]


def test_three_repeats_are_one_row_with_the_between_run_interval():
    docs = [repeat_of(1, 1.0), repeat_of(2, 1.25), repeat_of(3, 0.8)]
    singles = [row_of([d]) for d in docs]
    row = row_of(docs)
    assert row.runs == 3
    means = [s.capacity_rps for s in singles]
    mean, se, df = combine_runs(means, [s.capacity_se for s in singles], [9, 9, 9])
    assert df == 2  # the runs differ far more than each run's own batch means: between-run variance
    assert row.capacity_rps == pytest.approx(mean)
    assert row.capacity_se == pytest.approx(se)
    width = row.capacity_high - row.capacity_low
    assert all(width > s.capacity_high - s.capacity_low for s in singles)
    assert row.capacity_low < mean < row.capacity_high
    assert row.cost_low < row.cost_per_million_usd < row.cost_high
    assert "mean of 3 runs, between-run variance" in row.runs_note
    assert "fewer than 3" not in row.runs_note
    assert row.chosen_run_id == docs[0].run_id  # the run closest to the mean is the step shown


@pytest.mark.slow
def test_two_repeats_say_they_are_too_few():
    row = row_of([repeat_of(1, 1.0), repeat_of(2, 1.1)])
    assert row.runs == 2
    assert "fewer than 3 runs" in row.runs_note
    md = render_report([repeat_of(1, 1.0), repeat_of(2, 1.1)], load_catalog(), OPTIONS).outputs["report.md"]
    assert "mean of 2 runs, between-run variance; fewer than 3 runs" in md.decode()
    assert "Repeated runs" in md.decode()


def test_a_different_profile_is_not_a_repeat():
    # the same variant swept with another seed is another sweep: no combining, the steps pooled as before
    docs = [repeat_of(1, 1.0), repeat_of(2, 1.25, {"seed": 7})]
    row = row_of(docs)
    assert row.runs is None
    assert row.capacity_rps == pytest.approx(max(row_of([d]).capacity_rps for d in docs))


def test_a_single_run_is_reported_as_before():
    row = row_of([repeat_of(1, 1.0)])
    assert row.runs is None and row.runs_note is None
