"""Assemble the report table from result documents (from any source) and the hardware catalog.

One row per model × precision × target: measured when a result exists, else projected (roofline ×
efficiency from the target's published results, calibrated by measurements of the same toolchain) for the
targets asked for and for the baseline. Measured beats projected; a projected row carries its efficiency
model's range, labelled "projected", never as a measured interval. The table depends only on the documents'
content, not on where they came from or in which order.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.documents import Accuracy, ResultDocument, Step, to_dict
from accelbench.errors import BadInputError
from accelbench.hardware.catalog import Catalog, HardwareTarget
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
from accelbench.reports.options import ReportOptions
from accelbench.reports.rows import ReportRow


@dataclass(frozen=True)
class Result:
    """A result document and the hash of its content (tells apart two hosts' runs with the same run id)."""

    doc: ResultDocument
    sha256: str


def unique_results(documents: Iterable[ResultDocument]) -> list[Result]:
    """Each document once (by content), in a fixed order, whatever order the source gave them in."""
    by_hash: dict[str, ResultDocument] = {}
    for doc in documents:
        by_hash.setdefault(doc.content_hash(), doc)
    found = [Result(doc, sha) for sha, doc in by_hash.items()]
    return sorted(found, key=lambda r: (r.doc.model, r.doc.target or "", r.doc.run_id, r.sha256))


@dataclass
class Group:
    """All result documents for one (model, precision, target)."""

    model: str
    precision: str
    target_id: str
    results: list[Result]

    def label(self, result: Result) -> str:
        """The run id, made unique with the document's hash when two hosts wrote the same run id."""
        same = sum(1 for r in self.results if r.doc.run_id == result.doc.run_id)
        return result.doc.run_id if same == 1 else f"{result.doc.run_id}@{result.sha256[:12]}"

    def steps(self) -> list[tuple[str, Step]]:
        return [(self.label(r), s) for r in self.results for s in r.doc.steps]

    def steps_only(self) -> list[Step]:
        return [s for r in self.results for s in r.doc.steps]

    def accuracy(self) -> Accuracy | None:
        return next(
            (r.doc.accuracy for r in self.results if r.doc.accuracy and to_dict(r.doc.accuracy)), None
        )

    def graph_cost(self) -> dict[str, Any] | None:
        return next((to_dict(r.doc.graph_cost) for r in self.results if r.doc.graph_cost), None)

    def variant(self) -> str | None:
        return next((r.doc.variant for r in self.results if r.doc.variant), None)

    def batch_size(self) -> int | None:
        return next((r.doc.batch_size for r in self.results if r.doc.batch_size), None)


@dataclass
class ReportData:
    options: ReportOptions
    baseline_id: str
    rows: list[ReportRow]
    groups: dict[tuple[str, str, str], Group]
    targets: dict[str, HardwareTarget]
    calibrations: dict[str, proj.Calibration]
    graph_costs: dict[tuple[str, str], dict[str, Any]]
    efficiency_models: dict[tuple, ef.EfficiencyModel | None] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)  # results without a target or precision, one line each
    generative: Any = None  # reports/llm_report.GenerativeReport when some results are generative


def priceable(results: list[Result]) -> tuple[list[Result], list[str]]:
    """The results that name their target and precision (a cost needs both), and a line per one that does
    not: a load test of a model accelbench did not build records neither unless it is told."""
    kept, left_out = [], []
    for r in results:
        missing = [name for name in ("target", "precision") if not getattr(r.doc, name)]
        if missing:
            left_out.append(
                f"{r.doc.run_id}@{r.sha256[:12]} (model {r.doc.model}): no {' or '.join(missing)}"
            )
        else:
            kept.append(r)
    return kept, left_out


def group_results(results: list[Result]) -> dict[tuple[str, str, str], Group]:
    groups: dict[tuple[str, str, str], Group] = {}
    for r in results:
        key = (r.doc.model, r.doc.precision, r.doc.target)
        groups.setdefault(key, Group(*key, results=[])).results.append(r)
    return dict(sorted(groups.items()))


def _measured_samples(groups, targets, graph_costs, options, roofline) -> list[tuple]:
    """(target id, measured ÷ roofline efficiency, roofline point, weight bytes, model, precision, throughput)
    for every step in the SLO."""
    samples = []
    pct = percentile_key(options.percentile)
    for (model, precision, tid), group in groups.items():
        gc = graph_costs.get((model, precision))
        if not proj.usable_graph_cost(gc):
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
                    samples.append((tid, eff, point, float(gc["weight_bytes"]), model, precision,
                                    float(step.throughput_ips or 0)))  # fmt: skip
    return samples


def _calibrate(samples, targets) -> dict[str, proj.Calibration]:
    by_toolchain: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for tid, eff, *_ in samples:
        by_toolchain[targets[tid].toolchain].append((tid, eff))
    return proj.calibrate(by_toolchain)


# What a measured result's origin means for calibrating a vendor stack's published efficiency.
_ORIGIN_NOTES = {"device-check": "bench/device_check.py: a torch interpreter with CUDA graphs, not TensorRT"}


def _efficiency_models(catalog, targets, samples, groups, roofline, pairs) -> dict[tuple, Any]:
    """(model, precision, target id) → that target's published efficiency model for the model's kind, with its
    latency floor, its validation range and the calibration by measured targets of its toolchain.

    Calibration composes: the factor is measured ÷ the *same* model's projection of the measured target (its
    own fit or its chip's, with its floor) at the batch of the step that sets its capacity, and it scales every
    target of the toolchain alike, so the measured target's projection reproduces its measurement and the
    ratios between projected targets stay the published ones. Per model where that model was measured on the
    toolchain; otherwise the median of the models' factors, and the row says which.
    """
    out: dict[tuple, Any] = {}
    factors: dict[tuple[str, str, str], tuple[float, str]] = {}  # (toolchain, model, precision) → factor
    for model, precision in pairs:
        gc = _graph_cost_for(groups, model, precision)
        for tid, t in targets.items():
            eff = ef.model_for(catalog, t, roofline, model=model)
            eff = ef.with_floor(eff, catalog, t, roofline, float(gc["flops_per_inference"]) if gc else None)
            rng = val.validation_range(catalog, roofline, t.toolchain) if eff is not None else None
            if rng is not None:
                eff = replace(eff, validation=rng[0], validation_source=rng[1])
            out[(model, precision, tid)] = eff
    best: dict[tuple[str, str, str], tuple] = {}
    for sample in samples:  # the step that sets each measured target's capacity (the highest throughput)
        tid, _eff, _point, _wb, model, precision, ips = sample
        key = (model, precision, tid)
        if key not in best or ips > best[key][6]:
            best[key] = sample
    for (model, precision, tid), (_, eff, point, weight_bytes, *_rest) in sorted(best.items()):
        ref = out.get((model, precision, tid))
        if ref is not None:
            toolchain = targets[tid].toolchain
            factors[(toolchain, model, precision)] = (
                eff / ref.at_point(point, weight_bytes)[0],
                f"{tid} at batch {point.batch}",
            )
    origins = defaultdict(set)
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
            text = (f"×{factor:.3g} = {model} measured on {where} ÷ its own projection there "
                    f"(scales every {toolchain} target){how}")  # fmt: skip
        else:
            factor = statistics.median(f for f, _ in same_tc)
            text = (f"×{factor:.3g} = median over {len(same_tc)} other model(s) measured on "
                    f"{', '.join(sorted({w for _, w in same_tc}))} ÷ their projections ({model} was not "
                    f"measured on {toolchain}){how}")  # fmt: skip
        out[(model, precision, tid)] = eff.scaled(factor, text)
    return out


def _graph_cost_for(groups, model: str, precision: str) -> dict[str, Any] | None:
    return next((g.graph_cost() for (m, p, _), g in groups.items() if (m, p) == (model, precision)), None)


def build_report(
    documents: Iterable[ResultDocument], catalog: Catalog, options: ReportOptions, roofline: Any = None
) -> ReportData:
    """The table every output is rendered from. Unknown target ids raise BadInputError (catalog.get)."""
    percentile_key(options.percentile)  # validate early: one clear line
    results = unique_results(documents)
    if not results:
        raise BadInputError("no result documents to report on")
    results, left_out = priceable(results)
    if not results:
        raise BadInputError(
            f"no result document names the target and precision it ran at ({len(left_out)} without: "
            f"{left_out[0]}); `accelbench loadtest --url` without a manifest records them only with "
            "--target ID --precision P"
        )
    from accelbench.reports.llm_report import build_generative, is_generative

    groups = group_results(results)
    generative_groups = {k: g for k, g in groups.items() if is_generative(g)}
    groups = {k: g for k, g in groups.items() if k not in generative_groups}
    baseline_id = options.baseline or catalog.baseline_id
    wanted = sorted({g.target_id for g in (*groups.values(), *generative_groups.values())} | set(options.project)
                    | {baseline_id})  # fmt: skip
    targets = {tid: catalog.get(tid) for tid in wanted}
    for tid in options.price_overrides:  # a misspelt --price id would otherwise be silently ignored
        catalog.get(tid)
    graph_costs: dict[tuple[str, str], dict[str, Any]] = {}
    for (model, precision, _), g in groups.items():
        gc = g.graph_cost()
        if proj.usable_graph_cost(gc):
            graph_costs.setdefault((model, precision), gc)
    if roofline is None and graph_costs:
        roofline = proj.default_roofline()
    samples = _measured_samples(groups, targets, graph_costs, options, roofline) if graph_costs else []
    calibrations = _calibrate(samples, targets)
    pairs = sorted({(m, p) for m, p, _ in groups})
    models = _efficiency_models(catalog, targets, samples, groups, roofline, pairs) if graph_costs else {}
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
        model=model, precision=precision, target=target.id, target_name=target.name, toolchain=target.toolchain,
        status=status, variant=f"{model}__{target.id}__{precision}", percentile=percentile_key(options.percentile),
        slo_ms=options.slo_ms,
    )  # fmt: skip


def _accuracy(acc: Accuracy | None, of: str) -> dict[str, Any]:
    """The accuracy fields of a row showing ``acc`` (the accuracy of variant ``of``)."""
    if not acc:
        return {}
    return {"accuracy_metric": acc.metric, "accuracy_value": acc.value, "accuracy_verdict": acc.verdict,
            "accuracy_of": of}  # fmt: skip


def _measured_row(g: Group, target: HardwareTarget, options: ReportOptions) -> ReportRow:
    from accelbench.reports.repeats import combine_repeats

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
        row, **repeats, variant=variant,
        origin=",".join(sorted({d.origin or "" for d in docs})),
        meets_slo=cap.meets_slo, capacity_rps=cap.capacity_rps, capacity_ips=cap.capacity_ips,
        latency_us=cap.latency_us, reason=cap.reason, capacity_low=cap.capacity_low,
        capacity_high=cap.capacity_high, capacity_se=cap.capacity_se, capacity_df=cap.capacity_df,
        latency_low_us=cap.latency_low, latency_high_us=cap.latency_high, slo_verdict=cap.slo_verdict,
        step_verdict=cap.step_verdict,
        # named by content, not by file: the same documents from a folder or a database give the same report
        sources=";".join(f"{r.doc.run_id}@{r.sha256[:12]}" for r in g.results),
        **_accuracy(g.accuracy(), variant), **_provenance(docs),
        batching_note=unbatched_note(docs[0].provenance.repository_config),
    )  # fmt: skip
    if cap.step_key:
        run_id, index = cap.step_key
        doc = next(r.doc for r in g.results if g.label(r) == run_id)
        step = next(s for s in doc.steps if s.index == index)
        power = step.metrics.gpu_power_w if step.metrics else None
        row = replace(
            row, chosen_run_id=run_id, chosen_step=index, batch_size=doc.batch_size,
            served_batch=proj.served_batch(step, int(doc.batch_size or 1)),
            latency_resolution_us=step.latency_resolution_us, step_reasons="; ".join(step.reasons or []) or None,
            offered=",".join(f"{k}={v}" for k, v in sorted(to_dict(step.offered).items())),
            energy_per_request_j=step.energy_per_request_j or energy_per_request_j(power, cap.capacity_rps),
        )  # fmt: skip
    return row


def unbatched_note(repository_config: str | None) -> str | None:
    """The note for a model served with ``max_batch_size: 0`` (it cannot batch: Triton's text format leaves
    a zero out), None when the config batches or is unknown (a remote server's)."""
    import re

    if not (repository_config or "").strip() or re.search(r"^max_batch_size: [1-9]", repository_config, re.M):
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


def _efficiency_choice(target, calibrations, published) -> tuple[Any, str, str, str]:
    """(efficiency or model, kind, source text, calibration text) for a projected row."""
    if published is not None:
        notes = [n for n in (published.floor_source, published.validation_source) if n]
        label = "; ".join([published.label, *notes])
        return published, published.kind, label, published.calibration
    cal = proj.calibration_for(target.toolchain, calibrations)
    kind = "measured" if cal.samples else "assumed"
    return cal.efficiency, kind, cal.source, "none" if kind == "assumed" else cal.source


def _projected_row(model, precision, target, gc, groups, options, calibrations, roofline, published=None
                   ) -> ReportRow:  # fmt: skip
    row = _blank_row(model, precision, target, "projected", options)
    donors = [g for (m, p, _), g in groups.items() if (m, p) == (model, precision)]
    accuracy = _accuracy(donors[0].accuracy(), donors[0].variant() or "") if donors else {}
    row = replace(row, origin="roofline-projection", **accuracy)
    if not proj.usable_graph_cost(gc):
        return replace(
            row, reason="not projected: the results carry no graph_cost (FLOPs/bytes) for this model"
        )
    efficiency, kind, source, calibration = _efficiency_choice(target, calibrations, published)
    p = proj.project_capacity(gc, target, precision, options.slo_us / 1e6, efficiency, roofline)
    batch_size = int(donors[0].batch_size() or 1) if donors else 1

    def per_request(ips: float | None) -> float | None:
        return ips / batch_size if ips else None

    return replace(
        row,
        efficiency=p.efficiency if p.efficiency is not None else (None if kind == "published" else efficiency),
        efficiency_source=source, efficiency_kind=kind, calibration=calibration,
        efficiency_low=p.efficiency_low, efficiency_high=p.efficiency_high, projected_batch=p.batch,
        roofline_bound=p.bound, precision_used=p.precision_used, batch_size=batch_size,
        meets_slo=p.capacity_ips is not None, capacity_ips=p.capacity_ips,
        # clients send batch_size inferences per request; the server batches requests together
        capacity_rps=per_request(p.capacity_ips),
        projected_capacity_rps_low=per_request(p.capacity_low_ips),
        projected_capacity_rps_high=per_request(p.capacity_high_ips),
        latency_us=p.latency_s * 1e6 if p.latency_s is not None else None,
        reason=f"projected: {p.reason}" if p.capacity_ips else f"does not meet the SLO (projected): {p.reason}",
    )  # fmt: skip


def _price_row(row: ReportRow, target: HardwareTarget, options: ReportOptions) -> ReportRow:
    q = quote_price(target, options.price_basis, options.price_overrides, options.amortization_years,
                    options.usd_per_kwh)  # fmt: skip
    row = replace(
        row, usd_per_hour=q.usd_per_hour if q else None, price_basis=q.basis if q else None,
        price_note=q.note if q else "no price in the catalog; pass --price ID=USD_PER_HOUR",
        price_source=q.source if q else None, price_as_of=q.as_of if q else None,
    )  # fmt: skip
    if q is None or not row.capacity_rps:
        return row
    row = replace(row, cost_per_million_usd=cost_per_million_usd(q.usd_per_hour, row.capacity_rps))
    if row.capacity_low and row.capacity_high and row.capacity_low > 0:
        # cost falls as capacity rises: the capacity's interval, inverted, is the cost's
        row = replace(row, cost_low=cost_per_million_usd(q.usd_per_hour, row.capacity_high),
                      cost_high=cost_per_million_usd(q.usd_per_hour, row.capacity_low))  # fmt: skip
    return row


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _baseline_ratios(rows: list[ReportRow], baseline_id: str) -> list[ReportRow]:
    base = {(r.model, r.precision): r for r in rows if r.target == baseline_id}
    out = []
    for row in rows:
        b = base.get((row.model, row.precision))
        out.append(replace(
            row, baseline_target=baseline_id, baseline_status=b.status if b else None,
            capacity_vs_baseline=_ratio(row.capacity_rps, b and b.capacity_rps),
            latency_vs_baseline=_ratio(row.latency_us, b and b.latency_us),
            cost_vs_baseline=_ratio(row.cost_per_million_usd, b and b.cost_per_million_usd),
        ))  # fmt: skip
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


def compare_to_cheapest(ranked: list[ReportRow], confidence: float = 0.95) -> list[ReportRow]:
    """Each measured row after the cheapest measured one: is the cheapest significantly cheaper? Welch on the
    log cost ratio (statistics.cost_ratio) with each capacity's SE including the between-run variance
    (repeats, else the host kind's noise floor; reports/noise.py), Holm-corrected across the ranking; a single
    run with neither is "inconclusive: single runs". Returns the rows, in order, with ``comparison`` set."""
    from accelbench.loadtests.statistics import cost_ratio, holm
    from accelbench.reports.noise import capacity_se_between

    measured = [r for r in ranked if r.status == "measured" and r.capacity_se is not None]
    if len(measured) < 2:
        return list(ranked)
    best, rest = measured[0], measured[1:]
    name = f"{best.target} {best.precision}"
    best_se = capacity_se_between(best)
    comparisons: dict[int, str] = {}  # id of the row → its comparison
    others, ratios = [], []
    for r in rest:
        se = capacity_se_between(r)
        if best_se is None or se is None:  # the between-run variance is unknown: no claim either way
            single = ", ".join(x.target for x, v in ((best, best_se), (r, se)) if v is None)
            comparisons[id(r)] = (f"against {name}: inconclusive: single runs (no between-run variance for "
                                  f"{single}; measure with --repeats 3)")  # fmt: skip
            continue
        others.append(r)
        ratios.append(cost_ratio(best.usd_per_hour, best.capacity_rps, *best_se,
                                 r.usd_per_hour, r.capacity_rps, *se, confidence))  # fmt: skip
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
