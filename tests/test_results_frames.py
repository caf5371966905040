"""accelbench.results: the committed results as pandas DataFrames (steps, the report's rows, generative points),
typed, with the unit in each column's name, and the report's own results.parquet / results.csv read back into
the same rows frame."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")  # the accelbench[pandas] extra; `make` installs it
pytestmark = pytest.mark.slow  # builds three reports (a second or more each on the shared machine)

from accelbench.documents import load_result  # noqa: E402
from accelbench.hardware.catalog import load_catalog  # noqa: E402
from accelbench.reports.inputs import load_documents  # noqa: E402
from accelbench.reports.options import ReportOptions  # noqa: E402
from accelbench.reports.report import render_report  # noqa: E402
from accelbench.results import POINT_COLUMNS, STEP_COLUMNS, frames, read_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "bench" / "results" / "h200" / "2026-11-30" / "results"
DATA = ROOT / "tests" / "data"
GOLDEN = DATA / "reports" / "golden"
# the options of the goldens' "h200" and "generative-mixed" cases (tests/test_reports_golden.py)
H200_OPTIONS = ReportOptions(project=("l4", "h100-sxm", "a100-sxm4-80gb"), price_basis="reserved")
MIXED = [DATA / "llm" / "hand", DATA / "reports" / "cpu-local"]
MIXED_OPTIONS = ReportOptions(min_tokens_per_user=100, slo_tpot_p99_ms=20, project=("l4",), slo_ms=100)


@pytest.fixture(scope="module")
def h200():
    return frames([H200], H200_OPTIONS)


def test_rows_are_the_reports_parquet_and_csv_read_as_they_are(h200, tmp_path):
    rendered = render_report(
        load_documents([str(H200)]), load_catalog(), H200_OPTIONS, formats=("csv", "parquet")
    )
    for name in ("results.parquet", "results.csv"):
        (tmp_path / name).write_bytes(rendered.outputs[name])
        pd.testing.assert_frame_equal(read_rows(tmp_path / name), h200.rows)
    golden = json.loads((GOLDEN / "h200" / "results.parquet.json").read_text())["rows"]
    assert len(h200.rows) == len(golden) and set(h200.rows["status"]) == {"measured", "projected"}
    cheapest = h200.rows.sort_values("cost_per_million_usd").iloc[0]
    assert cheapest["rank"] == 1 and cheapest["cost_per_million_usd"] == pytest.approx(
        min(r["cost_per_million_usd"] for r in golden if r["cost_per_million_usd"] is not None)
    )


def test_steps_are_every_documents_steps_typed_with_units_in_names(h200):
    docs = [load_result(json.loads(p.read_text()), str(p)) for p in sorted(H200.glob("*.json"))]
    assert len(h200.steps) == sum(len(d.steps) for d in docs) > 0
    assert list(h200.steps.columns) == [name for name, _ in STEP_COLUMNS]
    assert str(h200.steps["throughput_rps"].dtype) == "Float64" and str(h200.steps["step"].dtype) == "Int64"
    assert (
        str(h200.rows["capacity_rps"].dtype) == "Float64" and str(h200.rows["meets_slo"].dtype) == "boolean"
    )
    first = docs[0].steps[0]
    got = h200.steps[(h200.steps["run_id"] == docs[0].run_id) & (h200.steps["step"] == first.index)].iloc[0]
    assert got["throughput_rps"] == pytest.approx(first.throughput_rps)
    assert got["latency_p99_us"] == pytest.approx(first.latency_us.p99)
    low, high = got["throughput_rps_low"], got["throughput_rps_high"]
    assert pd.isna(low) or low <= got["throughput_rps"] <= high
    assert h200.generative.empty and list(h200.generative.columns) == [name for name, _ in POINT_COLUMNS]


def test_generative_points_are_the_reports_frontier():
    f = frames(MIXED, MIXED_OPTIONS)
    golden = json.loads((GOLDEN / "generative-mixed" / "generative.json").read_text())["rows"]
    assert len(f.generative) == sum(len(r["points"]) for r in golden) > 0
    for row in golden:
        mine = f.generative[
            (f.generative["target"] == row["target"]) & (f.generative["model"] == row["model"])
        ]
        assert sorted(mine["output_tokens_per_s"]) == pytest.approx(
            sorted(p["output_tps"] for p in row["points"])
        )
        capacity = mine[mine["is_capacity"]]
        if (
            row["capacity_output_tokens_per_s"] is not None
        ):  # exactly the capacity point, priced as the report
            assert capacity["output_tokens_per_s"].tolist() == pytest.approx(
                [row["capacity_output_tokens_per_s"]]
            )
            assert capacity["usd_per_million_output_tokens"].tolist() == pytest.approx(
                [row["usd_per_million_output_tokens"]]
            )
    assert {"measured", "projected"} <= set(f.generative["status"])
    measured = f.steps.dropna(subset=["ttft_p99_us"])  # the generative steps carry their token figures
    assert len(measured) and (measured["output_tokens_per_s"] > 0).all()
    assert set(f.rows["model"]) == {"minilm-l6", "resnet50"}  # the classic results beside them


def test_a_path_with_no_results_is_one_clear_error(tmp_path):
    from accelbench.errors import BadInputError

    with pytest.raises(BadInputError, match="no accelbench.result/1 documents"):
        frames(tmp_path)
