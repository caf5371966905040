"""Projections from published results: the efficiency model, the published catalog entries, leave-one-out, labels."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import pytest

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import load_catalog
from accelbench.hardware.published import load_published
from accelbench.hardware.roofline import roofline_point
from accelbench.reports import efficiency as ef
from accelbench.reports import projection
from accelbench.reports.build import ReportOptions, build_report
from accelbench.reports.inputs import load_documents
from accelbench.reports.sections import efficiency_label

# (samples as (intensity, efficiency), query intensity, expected efficiency): the fit in log space, clamped
FIT_CASES = [
    ([(100.0, 0.5)], 10.0, 0.5),  # one point: constant everywhere
    ([(100.0, 0.2), (1000.0, 0.8)], 100.0, 0.2),  # through both points
    ([(100.0, 0.2), (1000.0, 0.8)], 1000.0, 0.8),
    ([(100.0, 0.2), (1000.0, 0.8)], math.sqrt(100.0 * 1000.0), 0.4),  # log-log midpoint = geometric mean
    ([(100.0, 0.2), (1000.0, 0.8)], 1.0, 0.2),  # intensity clamped to the fitted range: no extrapolation
    ([(100.0, 0.2), (1000.0, 0.8)], 1e6, 0.8),
    ([(100.0, 0.3), (100.0, 0.5)], 500.0, math.sqrt(0.3 * 0.5)),  # one intensity: geometric mean, slope 0
]


@pytest.mark.parametrize(("samples", "intensity", "expected"), FIT_CASES)
def test_fit_in_log_space_is_clamped(samples, intensity, expected):
    e, lo, hi = ef.fit(samples, "published", "test").at(intensity)
    assert e == pytest.approx(expected, rel=1e-9)
    assert lo <= e <= hi


def test_fit_range_is_the_spread_of_the_points_around_it():
    model = ef.fit([(100.0, 0.3), (100.0, 0.5)], "published", "test")
    e, lo, hi = model.at(100.0)
    assert (lo, hi) == (pytest.approx(0.3), pytest.approx(0.5))
    assert ef.fit([(100.0, 0.4)], "published", "test").at(100.0) == (0.4, 0.4, 0.4)  # one point: no spread


def test_efficiency_at_a_point_is_the_fraction_of_peak_capped_by_streaming_the_weights():
    class Point:  # a RooflinePoint's fields that at_point reads
        batch, flops_per_batch, peak_flops_per_s = 4, 4 * 1e9, 100e12
        bandwidth_bytes_per_s, throughput_upper_bound_ips = 1e12, 50_000.0

    model = ef.constant(0.5, "published", "test")
    # compute side: 0.5 × 100e12 / 1e9 = 50,000 inf/s; the weights (1 MB) cap it at 4 × 1e12 / 1e6 = 4e6
    assert model.at_point(Point, 1e6)[0] == pytest.approx(50_000 / 50_000)
    # 100 MB of weights per batch of 4: at most 4 × 1e12 / 1e8 = 40,000 inf/s
    assert model.at_point(Point, 1e8)[0] == pytest.approx(40_000 / 50_000)
    scaled = model.scaled(0.5, "×0.5 by h200")
    assert scaled.at_point(Point, 1e6)[0] == pytest.approx(0.5) and scaled.calibration == "×0.5 by h200"
    assert scaled.at(4) == model.at(4)  # the fitted curve itself is unscaled


def test_fit_without_usable_samples_is_an_error():
    with pytest.raises(ValueError):
        ef.fit([(0.0, 0.5), (100.0, 0.0)], "published", "test")


def test_every_published_point_has_a_source_url_a_date_and_a_known_target():
    catalog = load_catalog()
    assert len(catalog.published) >= 20
    for p in catalog.published:
        assert "://" in p.source and len(p.date) >= 7 and p.software, p
        catalog.get(p.target)
        cost = catalog.published_costs[p.model][p.precision]
        assert cost["flops_per_inference"] > 0 and cost["weight_bytes"] > 0, p.model
    # the builtins' graph costs match what the report computes for them
    resnet = catalog.published_costs["resnet50"]["int8"]
    assert resnet["flops_per_inference"] == pytest.approx(8.2065e9, rel=1e-3)


PACKAGED = resources.files("accelbench.hardware").joinpath("published_results.toml").read_text("utf-8")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('source = "https://github.com/mlcommons', 'source = "mlcommons'), "must be the URL"),
        (('date = "2023-09-11"', 'date = "Sept 2023"'), "YYYY-MM"),
        (('target = "l4"', 'target = "l5"'), "unknown target 'l5'"),
        (("throughput_ips = 12881.7", "throughput_ips = -1"), "must be positive"),
        (('model = "resnet101"', 'model = "resnet999"'), "graph cost"),
    ],
)
def test_a_bad_published_entry_names_its_key(edit, message):
    text = PACKAGED.replace(*edit, 1)
    assert text != PACKAGED
    with pytest.raises(BadInputError, match=message):
        load_published(frozenset(load_catalog().targets), text=text, label="pub.toml")


def test_a_missing_source_is_rejected():
    text = PACKAGED.replace('source = "https://developer.nvidia.com/embedded/jetson-benchmarks"\n', "", 1)
    with pytest.raises(BadInputError, match=r"points\[\d+\]\.source: required key missing"):
        load_published(frozenset(load_catalog().targets), text=text, label="pub.toml")


def test_efficiency_of_a_published_point_is_throughput_over_its_roofline():
    catalog = load_catalog()
    l4 = catalog.get("l4")
    p = next(q for q in catalog.published_for("l4") if q.model == "resnet50" and q.batch == 32)
    fp = ef.point_roofline(p, catalog.published_costs["resnet50"]["int8"], l4, roofline_point)
    cost = catalog.published_costs["resnet50"]["int8"]
    bound = roofline_point(cost["flops_per_inference"], cost["activation_bytes_per_inference"], 32, l4, "int8",
                           weight_bytes=cost["weight_bytes"]).throughput_upper_bound_ips  # fmt: skip
    assert fp.efficiency == pytest.approx(12881.7 / bound)


def test_targets_without_published_results_fall_back_to_their_toolchain_median():
    catalog = load_catalog()
    assert ef.target_model(catalog, "l40s", roofline_point) is None
    model = ef.model_for(catalog, catalog.get("l40s"), roofline_point)
    assert model.kind == "toolchain-median" and "no published results for this target" in model.label
    fractions = [
        p.peak_fraction
        for tid in ("l4", "a100-sxm4-80gb")
        for p in ef.fitted_points(catalog, tid, roofline_point)
    ]
    lo, hi = model.at(8)[1:]
    assert lo <= min(fractions) and hi >= max(fractions)
    assert ef.model_for(catalog, catalog.get("cpu-local"), roofline_point) is None  # no onnxruntime points


def test_leave_one_model_out_never_uses_the_left_out_model():
    catalog = load_catalog()
    rows = ef.leave_one_model_out(catalog, roofline_point, "a100-sxm4-80gb")
    inf2 = catalog.published_for("inf2-xlarge")
    without = ef.target_model(catalog, "inf2-xlarge", roofline_point, exclude_model="resnet50")
    assert without.n_points == len(inf2) - sum(1 for p in inf2 if p.model == "resnet50")
    assert "resnet50;" not in without.label and "resnet50," not in without.label
    for row in (r for r in rows if (r["target"], r["model"]) == ("inf2-xlarge", "resnet50")):
        p = next(q for q in inf2 if q.model == "resnet50" and q.batch == row["batch"])
        fp = ef.point_roofline(
            p, catalog.published_costs["resnet50"]["bf16"], catalog.get("inf2-xlarge"), roofline_point
        )
        assert row["projected_ips"] == pytest.approx(
            fp.bound_ips * without.at_point(fp.roofline, fp.weight_bytes)[0]
        )
        assert row["factor"] == pytest.approx(row["projected_ips"] / p.throughput_ips)
    # MLPerf BERT is not fitted (variable-length sequences) but is projected from the target's ResNet-50 fit
    l4_bert = [r for r in rows if (r["target"], r["model"]) == ("l4", "bert-large-384")]
    assert l4_bert and all(
        r["projected_ips"] and "projected from the other models" in r["reason"] for r in l4_bert
    )
    assert all(r["ratio_factor"] is not None for r in l4_bert)  # the A100 has the same scenarios
    single = [r for r in rows if r["target"] == "jetson-orin-nx-16gb"]
    assert single and all(r["factor"] is None and "no other published model" in r["reason"] for r in single)


def test_projection_with_a_model_carries_its_range():
    catalog = load_catalog()
    cost = {"flops_per_inference": 8.2e9, "weight_bytes": 25.5e6, "activation_bytes_per_inference": 21.8e6}
    model = ef.model_for(catalog, catalog.get("l4"), roofline_point)
    p = projection.project_capacity(cost, catalog.get("l4"), "int8", 0.1, model, roofline_point)
    assert p.capacity_low_ips <= p.capacity_ips <= p.capacity_high_ips
    point = roofline_point(8.2e9, 21.8e6, p.batch, catalog.get("l4"), "int8", weight_bytes=25.5e6)
    assert p.efficiency == pytest.approx(model.at_point(point, 25.5e6)[0])


H200_RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "h200" / "2026-11-30" / "results"


def _doc(target="cpu-local", origin="accelbench"):
    """The committed H200 bert-base result, re-labelled as measured on ``target`` with ``origin``."""
    doc = next(d for d in load_documents([str(H200_RESULTS)]) if d.model == "bert-base")
    return [
        doc.model_copy(update={"target": target, "origin": origin, "run_id": f"bert-base__{target}__test"})
    ]


def test_projected_rows_name_their_efficiency_source_and_range_not_an_assumed_default():
    results = _doc()
    data = build_report(results, load_catalog(), ReportOptions(project=("l4", "l40s", "inf2-xlarge")))
    projected = {r["target"]: r for r in data.rows if r["status"] == "projected"}
    assert projected["l4"]["efficiency_kind"] == "published"
    assert projected["l40s"]["efficiency_kind"] == "toolchain-median"
    assert projected["inf2-xlarge"]["efficiency_kind"] == "published"
    for row in projected.values():
        label = efficiency_label(row)
        assert "assumed" not in label and row["efficiency"] != projection.DEFAULT_EFFICIENCY
        assert "calibration none" in label  # nothing of these toolchains was measured here
        if row["capacity_rps"]:
            assert "projected range" in label and "not a measurement" in label


def test_a_measured_target_of_the_toolchain_calibrates_the_published_efficiency():
    results = _doc(target="h200-sxm", origin="device-check")
    data = build_report(results, load_catalog(), ReportOptions(project=("l4",)))
    row = next(r for r in data.rows if r["target"] == "l4")
    assert row["calibration"].startswith("×") and "h200-sxm" in row["calibration"]
    assert "torch interpreter" in row["calibration"] and "not TensorRT" in row["calibration"]
    plain = build_report(_doc(), load_catalog(), ReportOptions(project=("l4",)))
    uncalibrated = next(r for r in plain.rows if r["target"] == "l4")
    factor = float(row["calibration"].split()[0].lstrip("×"))
    if row["projected_batch"] == uncalibrated["projected_batch"]:
        assert row["efficiency"] == pytest.approx(uncalibrated["efficiency"] * factor, rel=5e-3)
    assert factor < 1  # an unfused interpreter reaches less than TensorRT's published efficiency


def test_batch_slope_comes_from_one_model_at_several_batches_not_from_comparing_models():
    from types import SimpleNamespace as NS

    def fp(model, batch, fraction):  # a FittedPoint stand-in: within_model_slope reads these three
        return NS(point=NS(model=model, batch=batch), peak_fraction=fraction)

    # model a doubles from batch 1 to 4 (slope 0.5); model b sits at one batch, far higher: no batch effect
    sxy, sxx, batches = ef.within_model_slope([fp("a", 1, 0.1), fp("a", 4, 0.2), fp("b", 64, 0.9)])
    assert sxy / sxx == pytest.approx(0.5) and batches == (1, 4)
    assert ef.within_model_slope([fp("a", 8, 0.3), fp("b", 16, 0.9)])[1] == 0  # no model at two batches
    catalog = load_catalog()
    h100 = ef.target_model(catalog, "h100-sxm", roofline_point)  # two models, one batch each
    assert h100.slope > 0 and "tensorrt toolchain's models" in h100.label


def test_targets_show_lists_the_published_results_with_their_sources():
    from click.testing import CliRunner

    from accelbench.cli import main

    shown = CliRunner().invoke(main, ["targets", "show", "l4"])
    assert shown.exit_code == 0, shown.output
    assert "published results: 4" in shown.output and "mlcommons/inference_results_v3.1" in shown.output
    none = CliRunner().invoke(main, ["targets", "show", "l40s"])
    assert "published results: none (projections use the toolchain median)" in none.output


def test_projection_check_prints_the_table_and_rejects_an_unknown_baseline():
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    script = str(root / "bench" / "projection_check.py")
    ok = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0 and "worst ratio to a100-sxm4-80gb" in ok.stdout, ok.stderr
    bad = subprocess.run(
        [sys.executable, script, "--baseline", "nope"], capture_output=True, text=True, env=env
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown target 'nope'" in bad.stderr
    assert "Traceback" not in bad.stderr
