"""Projections from published results: the efficiency model, the published catalog entries, leave-one-out, labels."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import pytest

from accelbench.errors import BadInputError
from accelbench.hardware.catalog import load_catalog
from accelbench.hardware.catalog_schema import PUBLISHED_FAMILIES
from accelbench.hardware.published import load_published
from accelbench.hardware.roofline import roofline_point
from accelbench.reports import efficiency as ef
from accelbench.reports import projection, validation
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


def test_targets_without_published_results_fall_back_to_their_chip_then_their_toolchain():
    catalog = load_catalog()
    # the H200 has no published point of its own: it borrows the H100 SXM's (same chip, same 700 W)
    h200 = ef.model_for(catalog, catalog.get("h200-sxm"), roofline_point, model="resnet50")
    assert h200.kind == "published" and "borrowed from h100-sxm (same chip" in h200.label
    assert "h100-pcie" not in h200.label  # the 350 W part is not the H200's nearest sibling
    # the A10G's chip (8.6) has no published point: the toolchain's fit, said so
    model = ef.model_for(catalog, catalog.get("a10g"), roofline_point, model="resnet50")
    assert (
        model.kind == "toolchain-median" and "no published results for this target or its chip" in model.label
    )
    fractions = [
        p.peak_fraction
        for tid in ("l4", "a100-sxm4-80gb", "t4", "h100-sxm", "h100-pcie", "a100-pcie-80gb")
        for p in ef.fitted_points(catalog, tid, roofline_point)
        if ef.model_class(p.point.model) == "cnn"
    ]
    lo, hi = model.at(8)[1:]
    assert lo <= hi and min(fractions) <= model.at(8)[0] <= max(fractions)
    assert ef.model_for(catalog, catalog.get("cpu-local"), roofline_point) is None  # no onnxruntime points


def test_a_transformer_is_projected_from_transformer_points_of_the_same_chip():
    catalog = load_catalog()
    a100 = ef.model_for(catalog, catalog.get("a100-sxm4-80gb"), roofline_point, model="bert-base")
    assert (
        "borrowed from a100-sxm4-40gb" in a100.label and "bert-" in a100.label and "resnet" not in a100.label
    )
    cnn = ef.model_for(catalog, catalog.get("a100-sxm4-80gb"), roofline_point, model="resnet50")
    assert "a100-sxm4-80gb's" in cnn.label and "resnet50" in cnn.label
    # MLPerf's variable-length BERT enters its chip's transformer fit with the padded graph's work divided by
    # the factor the A100 measures between it and demoBERT's fixed-length bert-large-384 (SQuAD's lengths)
    k = ef.work_factor(catalog, "bert-large-384", "int8", roofline_point)
    assert k is not None and 1.5 < k < 4
    h100_bert = ef.model_for(catalog, catalog.get("h100-sxm"), roofline_point, model="bert-base")
    assert "h100-sxm's" in h100_bert.label and "bert-large-384" in h100_bert.label
    # two chips measure it (A100: MLPerf ÷ demoBERT; Ada: L4's MLPerf ÷ L40S's demoBERT), and they agree
    no_a100 = ef.work_factor(catalog, "bert-large-384", "int8", roofline_point,
                             use=lambda q: not q.target.startswith("a100"))  # fmt: skip
    assert no_a100 is not None and 0.8 < no_a100 / k < 1.25
    assert ef.work_factor(catalog, "bert-large-384", "int8", roofline_point,
                          use=lambda q: q.target not in ("l40s", "a100-sxm4-40gb")) is None  # fmt: skip
    # a chip with only CNN points shifts them by the toolchain's transformer offset, and says so

    def no_h100_bert(q):
        return not (q.target.startswith("h100") and q.model.startswith("bert"))

    h100 = ef.model_for(catalog, catalog.get("h100-sxm"), roofline_point, model="bert-base", use=no_h100_bert)
    assert "transformer offset" in h100.label
    offset = ef.class_offset(catalog, "tensorrt", "transformer", roofline_point)
    # per-sample terms compared (affine batch latency), BERT's and ResNet-50's kernels run at similar fractions
    # of peak: the ×2.5 a power law in batch found was the gap between the batches they were published at
    assert offset is not None and 0.5 < math.exp(offset) < 2


def test_every_published_point_names_its_source_family():
    catalog = load_catalog()
    assert {p.family for p in catalog.published} == {"mlperf", "vendor-table"}
    assert all(p.family == "mlperf" for p in catalog.published if "mlcommons" in p.source)
    bad = PACKAGED.replace('family = "mlperf"', 'family = "blog"', 1)
    with pytest.raises(BadInputError, match=r"points\[\d+\]\.family: must be one of mlperf, vendor-table"):
        load_published(frozenset(catalog.targets), text=bad, label="pub.toml")


def test_leave_one_model_out_never_uses_the_left_out_model():
    catalog = load_catalog()
    rows = validation.leave_one_model_out(catalog, roofline_point, "a100-sxm4-80gb")
    inf2 = catalog.published_for("inf2-xlarge")
    without = ef.target_model(
        catalog, "inf2-xlarge", roofline_point, exclude_model="resnet50", model="resnet50"
    )
    assert "resnet50;" not in without.label and "resnet50," not in without.label
    assert without.n_points == sum(1 for p in inf2 if p.model in ("resnet101", "resnet152"))  # the other CNNs
    for row in (r for r in rows if (r.target, r.model) == ("inf2-xlarge", "resnet50")):
        p = next(q for q in inf2 if q.model == "resnet50" and q.batch == row.batch)
        fp = ef.point_roofline(
            p, catalog.published_costs["resnet50"]["bf16"], catalog.get("inf2-xlarge"), roofline_point
        )
        assert row.projected_ips == pytest.approx(
            fp.bound_ips * without.at_point(fp.roofline, fp.weight_bytes)[0]
        )
        assert row.factor == pytest.approx(row.projected_ips / p.throughput_ips)
    # MLPerf BERT is not fitted (variable-length sequences): its ratio to the A100 counts, its factor does not
    l4_bert = [r for r in rows if (r.target, r.model) == ("l4", "bert-large-384")]
    assert l4_bert and all(r.projected_ips and r.counted and not r.counted_factor for r in l4_bert)
    assert all(r.ratio_factor is not None for r in l4_bert)  # the A100 has the same scenarios


def test_leave_one_target_out_never_uses_the_left_out_targets_points():
    catalog = load_catalog()
    rows = validation.leave_one_target_out(catalog, roofline_point, "a100-sxm4-80gb")
    h100 = [r for r in rows if r.target == "h100-sxm" and r.model == "resnet50"]

    def use(q):
        return q.target != "h100-sxm"

    eff = ef.model_for(catalog, catalog.get("h100-sxm"), roofline_point, model="resnet50", use=use)
    assert "h100-sxm's" not in eff.label and "borrowed from h100-pcie" in eff.label
    assert h100 and all(r.factor is not None for r in h100)


def test_cross_family_fits_see_only_their_family():
    catalog = load_catalog()
    rows = validation.cross_family(catalog, roofline_point, "a100-sxm4-80gb", "vendor-table")
    assert rows and all(r.family == "mlperf" for r in rows)
    eff = ef.model_for(catalog, catalog.get("l4"), roofline_point, model="resnet50",
                       use=lambda q: q.family == "vendor-table")  # fmt: skip
    assert "MLPerf" not in eff.label and "l40s" in eff.label  # L4 has only MLPerf points: its chip speaks


def test_the_held_out_family_is_only_ever_projected_from_the_other_familys_fits():
    catalog = load_catalog()
    assert validation.HELD_OUT_FAMILY in PUBLISHED_FAMILIES
    rows = validation.held_out(catalog, roofline_point, "a100-sxm4-80gb")
    assert rows and all(r.family == validation.HELD_OUT_FAMILY for r in rows)
    others = [f for f in PUBLISHED_FAMILIES if f != validation.HELD_OUT_FAMILY]
    fitted_on_others = [r for f in others for r in validation.cross_family(catalog, roofline_point,
                        "a100-sxm4-80gb", f) if r.family == validation.HELD_OUT_FAMILY]  # fmt: skip
    assert rows == fitted_on_others
    docs = (ROOT / "docs" / "projections.md").read_text()
    assert f"held-out family: **{validation.HELD_OUT_FAMILY}**" in docs


# The worst factors bench/projection_check.py prints on the packaged data (docs/projections.md states them):
# a change to the model or the data that makes any of them worse fails here.
WORST = {
    "leave one model out": (2.8, 2.3),
    "leave one target out": (2.1, 2.1),
    "cross-family: fitted on mlperf only": (2.3, 1.8),
    "cross-family: fitted on vendor-table only": (2.4, 2.4),
}


@pytest.mark.slow
def test_the_validation_stays_within_the_figures_docs_state():
    import importlib.util

    spec = importlib.util.spec_from_file_location("projection_check", ROOT / "bench" / "projection_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    results = check.checks(load_catalog(), "a100-sxm4-80gb")
    assert set(results) == set(WORST)
    docs = (ROOT / "docs" / "projections.md").read_text()
    for title, (factor, ratio) in WORST.items():
        w_factor, _ = validation.worst(results[title], "factor")
        w_ratio, _ = validation.worst(results[title], "ratio_factor")
        assert w_factor <= factor and w_ratio <= ratio, (title, w_factor, w_ratio)
        assert f"{factor:g}×" in docs and f"{ratio:g}×" in docs, title


def test_projection_with_a_model_carries_its_range():
    catalog = load_catalog()
    cost = {"flops_per_inference": 8.2e9, "weight_bytes": 25.5e6, "activation_bytes_per_inference": 21.8e6}
    model = ef.model_for(catalog, catalog.get("l4"), roofline_point)
    p = projection.project_capacity(cost, catalog.get("l4"), "int8", 0.1, model, roofline_point)
    assert p.capacity_low_ips <= p.capacity_ips <= p.capacity_high_ips
    point = roofline_point(8.2e9, 21.8e6, p.batch, catalog.get("l4"), "int8", weight_bytes=25.5e6)
    assert p.efficiency == pytest.approx(model.at_point(point, 25.5e6)[0])


ROOT = Path(__file__).resolve().parents[1]
H200_RESULTS = ROOT / "bench" / "results" / "h200" / "2026-11-30" / "results"


def _doc(target="cpu-local", origin="accelbench"):
    """The committed H200 bert-base result, re-labelled as measured on ``target`` with ``origin``."""
    doc = next(d for d in load_documents([str(H200_RESULTS)]) if d.model == "bert-base")
    return [
        doc.model_copy(update={"target": target, "origin": origin, "run_id": f"bert-base__{target}__test"})
    ]


@pytest.mark.slow
def test_projected_rows_name_their_efficiency_source_and_range_not_an_assumed_default():
    results = _doc()
    data = build_report(results, load_catalog(), ReportOptions(project=("l4", "l40s", "inf2-xlarge")))
    projected = {r.target: r for r in data.rows if r.status == "projected"}
    assert projected["l4"].efficiency_kind == "published"
    assert projected["l40s"].efficiency_kind == "published"  # TensorRT's demoBERT tables
    assert projected["inf2-xlarge"].efficiency_kind == "published"
    for row in projected.values():
        label = efficiency_label(row)
        assert "assumed" not in label and row.efficiency != projection.DEFAULT_EFFICIENCY
        assert "calibration none" in label  # nothing of these toolchains was measured here
        if row.capacity_rps:
            assert "projected range" in label and "not a measurement" in label


def test_a_measured_target_of_the_toolchain_calibrates_the_published_efficiency():
    results = _doc(target="h200-sxm", origin="device-check")
    data = build_report(results, load_catalog(), ReportOptions(project=("l4",)))
    row = next(r for r in data.rows if r.target == "l4")
    assert row.calibration.startswith("×") and "bert-base measured on h200-sxm at batch" in row.calibration
    assert "torch interpreter" in row.calibration and "not TensorRT" in row.calibration
    plain = build_report(_doc(), load_catalog(), ReportOptions(project=("l4",)))
    uncalibrated = next(r for r in plain.rows if r.target == "l4")
    factor = float(row.calibration.split()[0].lstrip("×"))
    if row.projected_batch == uncalibrated.projected_batch:
        assert row.efficiency == pytest.approx(uncalibrated.efficiency * factor, rel=5e-3)
    assert factor < 1  # an unfused interpreter reaches less than TensorRT's published efficiency


def _h200_report():
    docs = load_documents([str(H200_RESULTS)])
    catalog = load_catalog()
    return catalog, build_report(docs, catalog, ReportOptions(project=("a100-sxm4-80gb", "h100-sxm", "l4")))


def _projected_at(catalog, data, model, target_id, batch):
    from dataclasses import replace

    target = catalog.get(target_id)
    target = replace(target, triton=replace(target.triton, max_batch_size=max(batch, 1)))  # at this batch
    eff = data.efficiency_models[(model, "bf16", target_id)]
    gc = data.graph_costs[(model, "bf16")]
    return projection.project_capacity(gc, target, "bf16", 10.0, eff, roofline_point, batches=(batch,))


def test_the_measured_targets_own_projection_reproduces_its_measurement():
    catalog, data = _h200_report()
    for model in ("bert-base", "resnet50"):
        measured = next(r for r in data.rows if (r.model, r.target) == (model, "h200-sxm"))
        step = max(
            (s for d in load_documents([str(H200_RESULTS)]) if d.model == model for s in d.steps),
            key=lambda s: s.throughput_ips,
        )
        served = int(step.server_stats.mean_batch_size) if step.server_stats else 0
        batch = served or int(measured.batch_size or 1)
        p = _projected_at(catalog, data, model, "h200-sxm", batch)
        interval = step.statistics.throughput_rps if step.statistics else None
        if interval is not None and interval.low is not None:
            assert interval.low <= p.capacity_ips <= interval.high, model
        else:  # a device-check step carries no interval: the projection is the measurement itself
            assert p.capacity_ips == pytest.approx(step.throughput_ips, rel=1e-9), model


# Published per-accelerator ratios (MLPerf Inference Offline, INT8, NVIDIA's closed submissions in this
# catalog: A100-SXM4-80GB v3.0 ÷ H100-SXM v3.1): ResNet-50 42,379 ÷ 88,526 = 0.479, BERT-Large 3,590 ÷ 9,102
# = 0.394. The H200 has no published ResNet-50 or BERT result; it has the H100 SXM's SMs, clocks and 700 W
# (catalog: the same 989 TFLOP/s dense BF16), so for these compute-bound models its published ratio to the
# H100 is taken as 1.0.
PUBLISHED_VS_H200 = {("resnet50", "a100-sxm4-80gb"): 0.479, ("bert-base", "a100-sxm4-80gb"): 0.394,
                     ("resnet50", "h100-sxm"): 1.0, ("bert-base", "h100-sxm"): 1.0}  # fmt: skip


def test_projected_ratios_to_the_measured_h200_keep_the_published_ratios():
    catalog, data = _h200_report()
    for (model, target_id), published in PUBLISHED_VS_H200.items():
        for batch in (32, 128):  # batches the H200 served (its capacity step is at 128)
            ratio = (
                _projected_at(catalog, data, model, target_id, batch).capacity_ips
                / _projected_at(catalog, data, model, "h200-sxm", batch).capacity_ips
            )
            assert 1 / 1.5 <= ratio / published <= 1.5, (model, target_id, batch, ratio)


def test_calibration_scales_every_target_of_the_toolchain_alike():
    catalog, data = _h200_report()
    plain = build_report(_doc(), catalog, ReportOptions(project=("a100-sxm4-80gb", "h100-sxm", "l4")))
    for a, b in (("a100-sxm4-80gb", "h100-sxm"), ("l4", "a100-sxm4-80gb")):
        calibrated = [_projected_at(catalog, data, "bert-base", t, 32).capacity_ips for t in (a, b)]
        published = [_projected_at(catalog, plain, "bert-base", t, 32).capacity_ips for t in (a, b)]
        assert calibrated[0] / calibrated[1] == pytest.approx(published[0] / published[1], rel=1e-9)


def test_a_latency_floor_caps_small_batches_and_the_row_says_so():
    catalog = load_catalog()
    l4 = catalog.get("l4")
    big = catalog.published_costs["bert-large-384"]["int8"]
    eff = ef.with_floor(ef.model_for(catalog, l4, roofline_point, model="bert-large-384"), catalog, l4,
                        roofline_point, float(big["flops_per_inference"]))  # fmt: skip
    assert eff.floor_s > 0 and "latency floor" in eff.floor_source and "resnet50 on l4" in eff.floor_source
    p = projection.project_capacity(big, l4, "int8", 10.0, eff, roofline_point, batches=(1,))
    assert p.latency_s >= eff.floor_s * (1 - 1e-9)
    tiny = {"flops_per_inference": 1e6, "weight_bytes": 1e5, "activation_bytes_per_inference": 1e4}
    assert ef.latency_floor(catalog, l4, roofline_point, 1e6) is None  # nothing published is that small
    assert projection.project_capacity(tiny, l4, "int8", 10.0, ef.model_for(catalog, l4, roofline_point),
                                       roofline_point, batches=(1,)).capacity_ips  # fmt: skip


def test_fixed_term_is_the_intercept_through_each_series_smallest_batches():
    from types import SimpleNamespace as NS

    def fp(model, batch, ips):  # a FittedPoint stand-in with what fixed_term reads
        return NS(point=NS(target="t", model=model, precision="int8", batch=batch, throughput_ips=ips))

    # t(b) = 1 ms + b · 0.1 ms at batches 1 and 8; batch 128 no faster per sample than 64 (saturated, thrashing)
    a = [fp("a", 1, 1 / 1.1e-3), fp("a", 8, 8 / 1.8e-3), fp("a", 128, 128 / 40e-3)]
    assert ef.fixed_term(a) == pytest.approx(1e-3)
    assert ef.fixed_term([fp("b", 16, 1000.0)]) is None  # one batch says nothing about t0
    assert ef.fixed_term([*a, fp("b", 2, 2 / 0.6e-3), fp("b", 4, 4 / 1.0e-3)]) == pytest.approx(
        0.6e-3
    )  # median


def test_affine_batch_latency_saturates_throughput_and_is_linear_in_batch():
    catalog = load_catalog()
    cost = catalog.published_costs["resnet50"]["int8"]
    target = catalog.get("a100-sxm4-80gb")
    eff = ef.target_model(catalog, target.id, roofline_point, model="resnet50")
    assert eff.t0_s > 0 and "t0 + b·t1" in eff.label
    ips = []
    for batch in (1, 2, 4, 16, 64, 256, 1024, 4096):
        rp = roofline_point(
            float(cost["flops_per_inference"]), float(cost["activation_bytes_per_inference"]), batch, target,
            "int8", weight_bytes=float(cost["weight_bytes"]),
        )  # fmt: skip
        ips.append(float(rp.throughput_upper_bound_ips) * eff.at_point(rp, float(cost["weight_bytes"]))[0])
    assert all(b > a for a, b in zip(ips, ips[1:], strict=False))  # throughput grows with batch ...
    gains = [b / a for a, b in zip(ips, ips[1:], strict=False)]
    assert gains[-1] < 1.05 < gains[0]  # ... and saturates: the last step gains under 5 %
    batches = (1, 2, 4, 16, 64, 256, 1024, 4096)
    latency = [b / x for b, x in zip(batches, ips, strict=True)]  # t(b) = b ÷ throughput
    t1 = (latency[-1] - latency[-2]) / (batches[-1] - batches[-2])
    t0 = latency[-1] - t1 * batches[-1]
    for b, t in zip(batches, latency, strict=True):
        assert t == pytest.approx(t0 + b * t1, rel=0.05)  # affine in batch


def test_targets_show_lists_the_published_results_with_their_sources():
    from click.testing import CliRunner

    from accelbench.cli import main

    shown = CliRunner().invoke(main, ["targets", "show", "l4"])
    assert shown.exit_code == 0, shown.output
    assert "published results: 4" in shown.output and "mlcommons/inference_results_v3.1" in shown.output
    none = CliRunner().invoke(main, ["targets", "show", "a10g"])
    assert "published results: none (projections use its chip's, else its toolchain's)" in none.output


@pytest.mark.slow
def test_projection_check_prints_the_table_and_rejects_an_unknown_baseline():
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    script = str(root / "bench" / "projection_check.py")
    ok = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0 and "worst ratio to the reference" in ok.stdout, ok.stderr
    for title in ("leave one model out", "leave one target out", "cross-family: fitted on mlperf only"):
        assert f"## {title}" in ok.stdout
    assert f"held-out family: {validation.HELD_OUT_FAMILY} (excluded from tuning" in ok.stdout
    assert "fixed term by depth: worst" in ok.stdout and "fixed term the median graph: worst" in ok.stdout
    bad = subprocess.run(
        [sys.executable, script, "--baseline", "nope"], capture_output=True, text=True, env=env
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown target 'nope'" in bad.stderr
    assert "Traceback" not in bad.stderr
