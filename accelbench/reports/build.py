"""Assemble the report table from result documents (from any source) and the hardware catalog.

One row per model × precision × target: measured when a result exists, else projected (roofline ×
efficiency from the target's published results, calibrated by measurements of the same toolchain) for the
targets asked for and for the baseline. Measured beats projected; a projected row carries its efficiency
model's range, labelled "projected", never as a measured interval. The table depends only on the documents'
content, not on where they came from or in which order.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.documents import Accuracy, ResultDocument, to_dict
from accelbench.errors import BadInputError
from accelbench.hardware.catalog import Catalog, HardwareTarget
from accelbench.hardware.roofline import RooflinePoint
from accelbench.loadtests.statistics import cost_ratio, holm
from accelbench.reports import efficiency as ef
from accelbench.reports import projection as proj
from accelbench.reports import validation as val
from accelbench.reports.capacity import (
    capacity_at_slo,
    percentile_key,
    step_qualifies,
)
from accelbench.reports.cost import (
    cost_per_million_usd,
    energy_per_request_j,
    quote_price,
)
from accelbench.reports.groups import Group, GroupKey, group_results, priceable, unique_results
from accelbench.reports.llm_report import GenerativeReport, build_generative, is_generative
from accelbench.reports.noise import capacity_se_between

# re-exported: callers outside reports/ (the service, the pipeline) import ReportOptions from here
from accelbench.reports.options import ReportOptions as ReportOptions
from accelbench.reports.repeats import combine_repeats
from accelbench.reports.rows import ReportRow


@dataclass
class ReportData:
    options: ReportOptions
    baseline_id: str
    rows: list[ReportRow]
    groups: dict[GroupKey, Group]
    targets: dict[str, HardwareTarget]
    calibrations: dict[str, proj.Calibration]
    graph_costs: dict[tuple[str, str], dict[str, Any]]
    efficiency_models: dict[GroupKey, ef.EfficiencyModel | None] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)  # results without a target or precision, one line each
    generative: GenerativeReport | None = None  # when some results are generative


@dataclass(frozen=True)
class Sample:
    """A measured step within the SLO, as the projections calibrate on it."""

    target_id: str
    efficiency: float  # measured ÷ roofline bound at the batch the server ran
    point: RooflinePoint  # that roofline point
    weight_bytes: float
    model: str
    precision: str
    throughput_ips: float


def _measured_samples(
    groups: Mapping[GroupKey, Group],
    targets: Mapping[str, HardwareTarget],
    graph_costs: Mapping[tuple[str, str], Mapping[str, Any]],
    options: ReportOptions,
    roofline: ef.RooflineFn,
) -> list[Sample]:
    """Every measured step in the SLO with its efficiency (measured ÷ roofline) and roofline point."""
    samples = []
    pct = percentile_key(options.percentile)
    for (model, precision, tid), group in groups.items():
        gc = graph_costs.get((model, precision))
        if gc is None or not proj.usable_graph_cost(gc):
            continue
        run_precision = proj.precision_on(targets[tid], precision)
        for res in group.results:
            for step in res.doc.steps:
                if not step_qualifies(step, options.slo_us, pct, options.max_error_rate):
                    continue
                batch = proj.served_batch(step, int(res.doc.batch_size or 1))
                eff = proj.step_efficiency(step, batch, gc, targets[tid], precision, roofline)
                if eff and run_precision:
                    point = proj.roofline_at(roofline, gc, batch, targets[tid], run_precision)
                    samples.append(
                        Sample(
                            tid,
                            eff,
                            point,
                            float(gc["weight_bytes"]),
                            model,
                            precision,
                            float(step.throughput_ips or 0),
                        )
                    )
    return samples


def _calibrate(
    samples: Sequence[Sample], targets: Mapping[str, HardwareTarget]
) -> dict[str, proj.Calibration]:
    by_toolchain: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for s in samples:
        by_toolchain[targets[s.target_id].toolchain].append((s.target_id, s.efficiency))
    return proj.calibrate(by_toolchain)


# What a measured result's origin means for calibrating a vendor stack's published efficiency.
_ORIGIN_NOTES = {"device-check": "bench/device_check.py: a torch interpreter with CUDA graphs, not TensorRT"}


def _published_models(
    catalog: Catalog,
    targets: Mapping[str, HardwareTarget],
    groups: Mapping[GroupKey, Group],
    roofline: ef.RooflineFn,
    pairs: Sequence[tuple[str, str]],
    graph_costs: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
) -> dict[GroupKey, ef.EfficiencyModel | None]:
    """(model, precision, target id) → the target's published efficiency model for the model's kind, with its
    latency floor and its validation range; not yet calibrated. A model never published takes the fixed term of
    its graph's depth (none in a manifest older than the count: the median graph's). ``graph_costs``: the
    models' costs where no group carries them (``project_classic``)."""
    graph_costs = graph_costs or {}
    out: dict[GroupKey, ef.EfficiencyModel | None] = {}
    for model, precision in pairs:
        gc = graph_costs.get((model, precision)) or _graph_cost_for(groups, model, precision)
        flops = float(gc["flops_per_inference"]) if gc else None
        depth = float(gc["depth"]) if gc and gc.get("depth") is not None else None
        for tid, t in targets.items():
            eff = ef.model_for(catalog, t, roofline, model=model, depth=depth)
            if eff is not None:
                eff = ef.with_floor(eff, catalog, t, roofline, flops)
                rng = val.validation_range(catalog, roofline, t.toolchain)
                if rng is not None:
                    eff = replace(eff, validation=rng[0], validation_source=rng[1])
            out[(model, precision, tid)] = eff
    return out


def _efficiency_models(
    catalog: Catalog,
    targets: Mapping[str, HardwareTarget],
    samples: Sequence[Sample],
    groups: Mapping[GroupKey, Group],
    roofline: ef.RooflineFn,
    pairs: Sequence[tuple[str, str]],
) -> dict[GroupKey, ef.EfficiencyModel | None]:
    """(model, precision, target id) → that target's published efficiency model for the model's kind, with its
    latency floor, its validation range and the calibration by measured targets of its toolchain.

    Calibration composes: the factor is measured ÷ the *same* model's projection of the measured target (its
    own fit or its chip's, with its floor) at the batch of the step that sets its capacity, and it scales every
    target of the toolchain alike, so the measured target's projection reproduces its measurement and the
    ratios between projected targets stay the published ones. Per model where that model was measured on the
    toolchain; otherwise the median of the models' factors, and the row says which.
    """
    out = _published_models(catalog, targets, groups, roofline, pairs)
    factors: dict[tuple[str, str, str], tuple[float, str]] = {}  # (toolchain, model, precision) → factor
    best: dict[GroupKey, Sample] = {}
    for sample in samples:  # the step that sets each measured target's capacity (the highest throughput)
        key = (sample.model, sample.precision, sample.target_id)
        if key not in best or sample.throughput_ips > best[key].throughput_ips:
            best[key] = sample
    for (model, precision, tid), s in sorted(best.items()):
        ref = out.get((model, precision, tid))
        if ref is not None:
            toolchain = targets[tid].toolchain
            factors[(toolchain, model, precision)] = (
                s.efficiency / ref.at_point(s.point, s.weight_bytes)[0],
                f"{tid} at batch {s.point.batch}",
            )
    origins: defaultdict[str, set[str]] = defaultdict(set)
    for (_, _, tid), g in groups.items():
        origins[targets[tid].toolchain] |= {r.doc.origin or "" for r in g.results}
    for (model, precision, tid), eff in list(out.items()):
        toolchain = targets[tid].toolchain
        own = factors.get((toolchain, model, precision))
        same_tc = sorted(v for (tc, _m, _p), v in factors.items() if tc == toolchain)
        if eff is None or not (own or same_tc):
            continue
        notes = sorted(_ORIGIN_NOTES.get(o, o) for o in origins[toolchain] if o)
        how = f" (measured with {'; '.join(notes)})" if notes else ""
        if own:
            factor, where = own
            text = (
                f"×{factor:.3g} = {model} measured on {where} ÷ its own projection there "
                f"(scales every {toolchain} target){how}"
            )
        else:
            factor = statistics.median(f for f, _ in same_tc)
            text = (
                f"×{factor:.3g} = median over {len(same_tc)} other model(s) measured on "
                f"{', '.join(sorted({w for _, w in same_tc}))} ÷ their projections ({model} was not "
                f"measured on {toolchain}){how}"
            )
        out[(model, precision, tid)] = eff.scaled(factor, text)
    return out


def _graph_cost_for(groups: Mapping[GroupKey, Group], model: str, precision: str) -> dict[str, Any] | None:
    return next((g.graph_cost() for (m, p, _), g in groups.items() if (m, p) == (model, precision)), None)


def build_report(
    documents: Iterable[ResultDocument],
    catalog: Catalog,
    options: ReportOptions,
    roofline: ef.RooflineFn | None = None,
    leave_out_unknown_targets: bool = False,
) -> ReportData:
    """The table every output is rendered from. Unknown target ids raise BadInputError (catalog.get), or,
    with ``leave_out_unknown_targets`` (the results service: a stored result of a typo or of a newer catalog
    must not take the report down), a document's unknown target leaves that result out, listed."""
    percentile_key(options.percentile)  # validate early: one clear line
    results = unique_results(documents)
    if not results:
        raise BadInputError("no result documents to report on")
    results, left_out = priceable(results, catalog.targets if leave_out_unknown_targets else None)
    if not results:
        raise BadInputError(
            f"no result document names the target and precision it ran at ({len(left_out)} without: "
            f"{left_out[0]}); `accelbench loadtest --url` without a manifest records them only with "
            "--target ID --precision P"
        )
    groups = group_results(results)
    generative_groups = {k: g for k, g in groups.items() if is_generative(g)}
    groups = {k: g for k, g in groups.items() if k not in generative_groups}
    baseline_id = options.baseline or catalog.baseline_id
    wanted = sorted(
        {g.target_id for g in (*groups.values(), *generative_groups.values())}
        | set(options.project)
        | {baseline_id}
    )
    targets = {tid: catalog.get(tid) for tid in wanted}
    for tid in options.price_overrides:  # a misspelt --price id would otherwise be silently ignored
        catalog.get(tid)
    graph_costs: dict[tuple[str, str], dict[str, Any]] = {}
    for (model, precision, _), g in groups.items():
        gc = g.graph_cost()
        if gc is not None and proj.usable_graph_cost(gc):
            graph_costs.setdefault((model, precision), gc)
    samples: list[Sample] = []
    models: dict[GroupKey, ef.EfficiencyModel | None] = {}
    pairs = sorted({(m, p) for m, p, _ in groups})
    if graph_costs:
        roofline = roofline or proj.default_roofline()
        samples = _measured_samples(groups, targets, graph_costs, options, roofline)
        models = _efficiency_models(catalog, targets, samples, groups, roofline, pairs)
    calibrations = _calibrate(samples, targets)
    rows: list[ReportRow] = []
    for g in groups.values():
        rows.append(_measured_row(g, targets[g.target_id], options))
    for model, precision in pairs:
        measured_here = {t for m, p, t in groups if (m, p) == (model, precision)}
        to_project = sorted(({baseline_id} | set(options.project)) - measured_here)
        for tid in to_project:
            rows.append(
                _projected_row(
                    model,
                    precision,
                    targets[tid],
                    graph_costs.get((model, precision)),
                    groups,
                    options,
                    calibrations,
                    roofline,
                    models.get((model, precision, tid)),
                )
            )
    rows = [_price_row(row, targets[row.target], options) for row in rows]
    rows = _rank(_baseline_ratios(rows, baseline_id), options)
    rows.sort(key=lambda r: (r.model, r.rank if r.rank is not None else 10**9, r.target, r.precision))
    generative = (
        build_generative(generative_groups, catalog, targets, options, baseline_id)
        if generative_groups
        else None
    )
    return ReportData(
        options, baseline_id, rows, groups, targets, calibrations, graph_costs, models, left_out, generative
    )


def _blank_row(
    model: str, precision: str, target: HardwareTarget, status: str, options: ReportOptions
) -> ReportRow:
    return ReportRow(
        model=model,
        precision=precision,
        target=target.id,
        target_name=target.name,
        toolchain=target.toolchain,
        status=status,
        variant=f"{model}__{target.id}__{precision}",
        percentile=percentile_key(options.percentile),
        slo_ms=options.slo_ms,
    )


def _accuracy(acc: Accuracy | None, of: str) -> dict[str, Any]:
    """The accuracy fields of a row showing ``acc`` (the accuracy of variant ``of``)."""
    if not acc:
        return {}
    return {
        "accuracy_metric": acc.metric,
        "accuracy_value": acc.value,
        "accuracy_verdict": acc.verdict,
        "accuracy_of": of,
    }


def _measured_row(g: Group, target: HardwareTarget, options: ReportOptions) -> ReportRow:
    row = _blank_row(g.model, g.precision, target, "measured", options)
    combined = combine_repeats(g, options.slo_us, options.percentile, options.max_error_rate)
    repeats: dict[str, Any] = {}
    if combined is not None:  # repeated runs: one capacity with the between-run variance (reports/repeats.py)
        cap = combined.capacity
        repeats = {"runs": combined.runs, "runs_note": combined.note}
    else:
        cap = capacity_at_slo(g.steps(), options.slo_us, options.percentile, options.max_error_rate)
    docs = [r.doc for r in g.results]
    variant = docs[0].variant or row.variant
    row = replace(
        row,
        **repeats,
        variant=variant,
        origin=",".join(sorted({d.origin or "" for d in docs})),
        meets_slo=cap.meets_slo,
        capacity_rps=cap.capacity_rps,
        capacity_ips=cap.capacity_ips,
        latency_us=cap.latency_us,
        reason=cap.reason,
        capacity_low=cap.capacity_low,
        capacity_high=cap.capacity_high,
        capacity_se=cap.capacity_se,
        capacity_df=cap.capacity_df,
        latency_low_us=cap.latency_low,
        latency_high_us=cap.latency_high,
        slo_verdict=cap.slo_verdict,
        step_verdict=cap.step_verdict,
        # named by content, not by file: the same documents from a folder or a database give the same report
        sources=g.sources(),
        **_accuracy(g.accuracy(), variant),
        **_provenance(docs),
        batching_note=unbatched_note(docs[0].provenance.repository_config),
    )
    if cap.step_key:
        run_id, index = cap.step_key
        doc = next(r.doc for r in g.results if g.label(r) == run_id)
        step = next(s for s in doc.steps if s.index == index)
        power = step.metrics.gpu_power_w if step.metrics else None
        row = replace(
            row,
            chosen_run_id=run_id,
            chosen_step=index,
            batch_size=doc.batch_size,
            served_batch=proj.served_batch(step, int(doc.batch_size or 1)),
            latency_resolution_us=step.latency_resolution_us,
            step_reasons="; ".join(step.reasons or []) or None,
            offered=",".join(f"{k}={v}" for k, v in sorted(to_dict(step.offered).items())),
            energy_per_request_j=step.energy_per_request_j or energy_per_request_j(power, cap.capacity_rps),
        )
    return row


def unbatched_note(repository_config: str | None) -> str | None:
    """The note for a model served with ``max_batch_size: 0`` (it cannot batch: Triton's text format leaves
    a zero out), None when the config batches or is unknown (a remote server's)."""
    if not repository_config or not repository_config.strip():
        return None
    if re.search(r"^max_batch_size: [1-9]", repository_config, re.M):
        return None
    return "max_batch_size 0: the model does not batch, the sweep varied concurrency only"


def _provenance(docs: list[ResultDocument]) -> dict[str, Any]:
    """The host, measured_at and versions fields of a row measured by ``docs``."""
    hosts, dates, versions = set(), set(), set()
    for d in docs:
        prov = d.provenance
        host = prov.host  # free-form: the load generator's host probe, or the device check's hardware probe
        cpu = host.get("cpu")
        cpu = cpu.get("model") if isinstance(cpu, dict) else cpu  # the hardware probe's cpu is a block
        hosts.add(str(host.get("hostname") or host.get("name") or cpu or "unknown host"))
        if prov.created_at:
            dates.add(str(prov.created_at))
        for name, ver in sorted(prov.packages.items()):
            versions.add(f"{name} {ver}")
        if prov.server and prov.server.version:
            versions.add(f"tritonserver {prov.server.version}")
    return {
        "host": ", ".join(sorted(hosts)),
        "measured_at": " – ".join(sorted({min(dates), max(dates)})) if dates else None,
        "versions": ", ".join(sorted(versions)) or None,
    }


def _efficiency_choice(
    target: HardwareTarget, calibrations: Mapping[str, proj.Calibration], published: ef.EfficiencyModel | None
) -> tuple[float | ef.EfficiencyModel, str, str, str]:
    """(efficiency or model, kind, source text, calibration text) for a projected row."""
    if published is not None:
        notes = [n for n in (published.floor_source, published.validation_source) if n]
        label = "; ".join([published.label, *notes])
        return published, published.kind, label, published.calibration
    cal = proj.calibration_for(target.toolchain, calibrations)
    kind = "measured" if cal.samples else "assumed"
    return cal.efficiency, kind, cal.source, "none" if kind == "assumed" else cal.source


def _projected_row(
    model: str,
    precision: str,
    target: HardwareTarget,
    gc: Mapping[str, Any] | None,
    groups: Mapping[GroupKey, Group],
    options: ReportOptions,
    calibrations: Mapping[str, proj.Calibration],
    roofline: ef.RooflineFn | None,
    published: ef.EfficiencyModel | None = None,
) -> ReportRow:
    row = _blank_row(model, precision, target, "projected", options)
    donors = [g for (m, p, _), g in groups.items() if (m, p) == (model, precision)]
    accuracy = _accuracy(donors[0].accuracy(), donors[0].variant() or "") if donors else {}
    row = replace(row, origin="roofline-projection", **accuracy)
    if gc is None or not proj.usable_graph_cost(gc):
        return replace(
            row, reason="not projected: the results carry no graph_cost (FLOPs/bytes) for this model"
        )
    efficiency, kind, source, calibration = _efficiency_choice(target, calibrations, published)
    p = proj.project_capacity(gc, target, precision, options.slo_us / 1e6, efficiency, roofline)
    batch_size = int(donors[0].batch_size() or 1) if donors else 1

    def per_request(ips: float | None) -> float | None:
        return ips / batch_size if ips else None

    # no batch fits: the row still shows the calibrated efficiency (a number), never a published model
    fallback = None if isinstance(efficiency, ef.EfficiencyModel) else efficiency
    return replace(
        row,
        efficiency=p.efficiency if p.efficiency is not None else fallback,
        efficiency_source=source,
        efficiency_kind=kind,
        calibration=calibration,
        efficiency_low=p.efficiency_low,
        efficiency_high=p.efficiency_high,
        projected_batch=p.batch,
        roofline_bound=p.bound,
        precision_used=p.precision_used,
        batch_size=batch_size,
        meets_slo=p.capacity_ips is not None,
        capacity_ips=p.capacity_ips,
        # clients send batch_size inferences per request; the server batches requests together
        capacity_rps=per_request(p.capacity_ips),
        projected_capacity_rps_low=per_request(p.capacity_low_ips),
        projected_capacity_rps_high=per_request(p.capacity_high_ips),
        latency_us=p.latency_s * 1e6 if p.latency_s is not None else None,
        reason=f"projected: {p.reason}"
        if p.capacity_ips
        else f"does not meet the SLO (projected): {p.reason}",
    )


def _price_row(row: ReportRow, target: HardwareTarget, options: ReportOptions) -> ReportRow:
    q = quote_price(
        target, options.price_basis, options.price_overrides, options.amortization_years, options.usd_per_kwh
    )
    row = replace(
        row,
        usd_per_hour=q.usd_per_hour if q else None,
        price_basis=q.basis if q else None,
        price_note=q.note if q else "no price in the catalog; pass --price ID=USD_PER_HOUR",
        price_source=q.source if q else None,
        price_as_of=q.as_of if q else None,
    )
    if q is None or not row.capacity_rps:
        return row
    row = replace(row, cost_per_million_usd=cost_per_million_usd(q.usd_per_hour, row.capacity_rps))
    if row.capacity_low and row.capacity_high and row.capacity_low > 0:
        # cost falls as capacity rises: the capacity's interval, inverted, is the cost's
        row = replace(
            row,
            cost_low=cost_per_million_usd(q.usd_per_hour, row.capacity_high),
            cost_high=cost_per_million_usd(q.usd_per_hour, row.capacity_low),
        )
    return row


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _baseline_ratios(rows: list[ReportRow], baseline_id: str) -> list[ReportRow]:
    base = {(r.model, r.precision): r for r in rows if r.target == baseline_id}
    out = []
    for row in rows:
        b = base.get((row.model, row.precision))
        out.append(
            replace(
                row,
                baseline_target=baseline_id,
                baseline_status=b.status if b else None,
                capacity_vs_baseline=_ratio(row.capacity_rps, b.capacity_rps if b else None),
                latency_vs_baseline=_ratio(row.latency_us, b.latency_us if b else None),
                cost_vs_baseline=_ratio(row.cost_per_million_usd, b.cost_per_million_usd if b else None),
            )
        )
    return out


def _rank(rows: list[ReportRow], options: ReportOptions) -> list[ReportRow]:
    """Rank per model by cost per million; FAIL-accuracy variants only with --include-failed."""
    out: list[ReportRow] = []
    for row in rows:
        failed = row.accuracy_verdict == "FAIL"
        ranked = bool(row.cost_per_million_usd is not None and (options.include_failed or not failed))
        reason = row.reason
        if failed and not options.include_failed:
            reason = (reason + "; " if reason else "") + "not ranked: accuracy FAIL"
        out.append(replace(row, rank=None, ranked=ranked, reason=reason))
    by_model: dict[str, list[int]] = defaultdict(list)  # model → indexes of its ranked rows
    for i, row in enumerate(out):
        if row.ranked:
            by_model[row.model].append(i)
    for indexes in by_model.values():
        indexes.sort(key=lambda i: (out[i].cost_per_million_usd, out[i].status != "measured", out[i].target))
        ranked_rows = compare_to_cheapest([replace(out[i], rank=n) for n, i in enumerate(indexes, 1)])
        for i, row in zip(indexes, ranked_rows, strict=True):
            out[i] = row
    return out


def _cost_basis(row: ReportRow) -> tuple[float, float, float, float] | None:
    """(USD/hour, capacity, its SE with the between-run variance, df) of a priced row, as ``cost_ratio`` takes
    them; None when the between-run variance is unknown."""
    se = capacity_se_between(row)
    if se is None or row.usd_per_hour is None or row.capacity_rps is None:
        return None
    return row.usd_per_hour, row.capacity_rps, se[0], se[1]


def compare_to_cheapest(ranked: list[ReportRow], confidence: float = 0.95) -> list[ReportRow]:
    """Each measured row after the cheapest measured one: is the cheapest significantly cheaper? Welch on the
    log cost ratio (statistics.cost_ratio) with each capacity's SE including the between-run variance
    (repeats, else the host kind's noise floor; reports/noise.py), Holm-corrected across the ranking; a single
    run with neither is "inconclusive: single runs". Returns the rows, in order, with ``comparison`` set."""
    measured = [r for r in ranked if r.status == "measured" and r.capacity_se is not None]
    if len(measured) < 2:
        return list(ranked)
    best, rest = measured[0], measured[1:]
    name = f"{best.target} {best.precision}"
    best_basis = _cost_basis(best)
    comparisons: dict[int, str] = {}  # id of the row → its comparison
    others, ratios = [], []
    for r in rest:
        basis = _cost_basis(r)
        if best_basis is None or basis is None:  # the between-run variance is unknown: no claim either way
            single = ", ".join(x.target for x, v in ((best, best_basis), (r, basis)) if v is None)
            comparisons[id(r)] = (
                f"against {name}: inconclusive: single runs (no between-run variance for "
                f"{single}; measure with --repeats 3)"
            )
            continue
        others.append(r)
        ratios.append(cost_ratio(*best_basis, *basis, confidence))
    adjusted = holm([x.p for x in ratios])
    for row, ratio, p in zip(others, ratios, adjusted, strict=True):
        if p < 1 - confidence and ratio.high < 1:
            comparisons[id(row)] = (
                f"{name} is {1 - ratio.high:.1%}–{1 - ratio.low:.1%} cheaper ({confidence:.0%}, Holm p = {p:.2g})"
            )
        else:
            comparisons[id(row)] = (
                f"no significant difference from {name} ({confidence:.0%}, Holm p = {p:.2g})"
            )
    return [replace(r, comparison=comparisons[id(r)]) if id(r) in comparisons else r for r in ranked]


def project_classic(
    model: str,
    precisions: Sequence[str],
    graph_costs: Mapping[str, Mapping[str, Any]],
    targets: Mapping[str, HardwareTarget],
    catalog: Catalog,
    options: ReportOptions,
) -> ReportData:
    """Projected classic rows with no measurement (``accelbench project``): ``model`` at each precision
    (``graph_costs``: precision → its graph cost) on each target, through the same projected row, published
    efficiency models, prices, baseline ratios and ranking as ``build_report``'s."""
    roofline = proj.default_roofline()
    pairs = [(model, p) for p in precisions]
    costs = {(model, p): dict(graph_costs[p]) for p in precisions}
    models = _published_models(catalog, targets, {}, roofline, pairs, costs)
    baseline_id = options.baseline or catalog.baseline_id
    rows = [
        _projected_row(model, p, t, costs[(model, p)], {}, options, {}, roofline, models.get((model, p, tid)))
        for p in precisions
        for tid, t in sorted(targets.items())
    ]
    rows = [_price_row(row, targets[row.target], options) for row in rows]
    rows = _rank(_baseline_ratios(rows, baseline_id), options)
    rows.sort(key=lambda r: (r.model, r.rank if r.rank is not None else 10**9, r.target, r.precision))
    return ReportData(options, baseline_id, rows, {}, dict(targets), {}, costs, models)
