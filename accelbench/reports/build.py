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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.documents import Accuracy, ResultDocument, Step, to_dict
from accelbench.errors import BadInputError
from accelbench.reports import efficiency as ef
from accelbench.reports import projection as proj
from accelbench.reports import validation as val
from accelbench.reports.capacity import (
    DEFAULT_MAX_ERROR_RATE,
    capacity_at_slo,
    percentile_key,
    step_qualifies,
)
from accelbench.reports.cost import (
    DEFAULT_USD_PER_KWH,
    cost_per_million_usd,
    energy_per_request_j,
    quote_price,
)


@dataclass(frozen=True)
class ReportOptions:
    slo_ms: float = 100.0
    percentile: str = "p99"
    baseline: str | None = None
    price_basis: str = "on-demand"
    price_overrides: Mapping[str, float] = field(default_factory=dict)
    target_qps: float | None = None
    headroom: float = 0.3
    project: tuple[str, ...] = ()
    include_failed: bool = False
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    amortization_years: float | None = None  # None: the catalog's figure, else DEFAULT_AMORTIZATION_YEARS
    usd_per_kwh: float = DEFAULT_USD_PER_KWH
    # generative results (reports/llm_report.py): objectives (None: the workload's, else MLPerf Llama3.1-8B's),
    # the interactivity asked for, a capacity plan in output tokens/s, and model cards for the memory-fit table
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    min_tokens_per_user: float | None = None
    target_tokens_per_s: float | None = None
    fit_models: tuple[str, ...] = ()
    fit_context: int | None = None

    @property
    def slo_us(self) -> float:
        return self.slo_ms * 1000.0


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
        return [(label, s) for r in self.results for label in (self.label(r),) for s in r.doc.steps]

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
    rows: list[dict[str, Any]]
    groups: dict[tuple[str, str, str], Group]
    targets: dict[str, Any]
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
    if not hasattr(catalog, "published_for"):  # a catalog without published results
        return {}
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
    documents: Iterable[ResultDocument], catalog: Any, options: ReportOptions, roofline: Any = None
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
    rows: list[dict[str, Any]] = []
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
    for row in rows:
        _price_row(row, targets[row["target"]], options)
    _baseline_ratios(rows, baseline_id)
    _rank(rows, options)
    rows.sort(
        key=lambda r: (r["model"], r["rank"] if r["rank"] is not None else 10**9, r["target"], r["precision"])
    )
    generative = (
        build_generative(generative_groups, catalog, targets, options, baseline_id)
        if generative_groups
        else None
    )
    return ReportData(
        options, baseline_id, rows, groups, targets, calibrations, graph_costs, models, left_out, generative
    )


def _blank_row(model: str, precision: str, target: Any, status: str) -> dict[str, Any]:
    return {
        "model": model, "precision": precision, "target": target.id, "target_name": target.name,
        "toolchain": target.toolchain, "status": status, "variant": f"{model}__{target.id}__{precision}",
        "origin": None, "meets_slo": False, "capacity_rps": None, "capacity_ips": None, "latency_us": None,
        "chosen_run_id": None, "chosen_step": None, "offered": None, "batch_size": None,
        "energy_per_request_j": None, "accuracy_metric": None, "accuracy_value": None,
        "accuracy_verdict": None, "accuracy_of": None, "efficiency": None, "efficiency_source": None,
        "efficiency_kind": None, "efficiency_low": None, "efficiency_high": None, "calibration": None,
        "projected_capacity_rps_low": None, "projected_capacity_rps_high": None,
        "projected_batch": None, "served_batch": None, "latency_resolution_us": None, "roofline_bound": None,
        "precision_used": None,
        "host": None, "measured_at": None, "versions": None, "sources": None, "reason": "",
        "capacity_low": None, "capacity_high": None, "capacity_se": None, "capacity_df": None,
        "latency_low_us": None, "latency_high_us": None, "cost_low": None, "cost_high": None,
        "slo_verdict": None, "step_verdict": None, "step_reasons": None, "comparison": None,
    }  # fmt: skip


def _accuracy(row: dict[str, Any], acc: Accuracy | None, of: str) -> None:
    if acc:
        row.update(
            accuracy_metric=acc.metric, accuracy_value=acc.value, accuracy_verdict=acc.verdict, accuracy_of=of,
        )  # fmt: skip


def _measured_row(g: Group, target: Any, options: ReportOptions) -> dict[str, Any]:
    from accelbench.reports.repeats import combine_repeats

    row = _blank_row(g.model, g.precision, target, "measured")
    combined = combine_repeats(g, options.slo_us, options.percentile, options.max_error_rate)
    if combined is not None:  # repeated runs: one capacity with the between-run variance (reports/repeats.py)
        cap = combined.capacity
        row.update(runs=combined.runs, runs_note=combined.note)
    else:
        cap = capacity_at_slo(g.steps(), options.slo_us, options.percentile, options.max_error_rate)
    docs = [r.doc for r in g.results]
    row.update(
        variant=docs[0].variant or row["variant"],
        origin=",".join(sorted({d.origin or "" for d in docs})),
        meets_slo=cap.meets_slo, capacity_rps=cap.capacity_rps, capacity_ips=cap.capacity_ips,
        latency_us=cap.latency_us, reason=cap.reason, capacity_low=cap.capacity_low,
        capacity_high=cap.capacity_high, capacity_se=cap.capacity_se, capacity_df=cap.capacity_df,
        latency_low_us=cap.latency_low, latency_high_us=cap.latency_high, slo_verdict=cap.slo_verdict,
        step_verdict=cap.step_verdict,
        # named by content, not by file: the same documents from a folder or a database give the same report
        sources=";".join(f"{r.doc.run_id}@{r.sha256[:12]}" for r in g.results),
    )  # fmt: skip
    _accuracy(row, g.accuracy(), row["variant"])
    _provenance(row, docs)
    row["batching_note"] = unbatched_note(docs[0].provenance.repository_config)
    if cap.step_key:
        run_id, index = cap.step_key
        doc = next(r.doc for r in g.results if g.label(r) == run_id)
        step = next(s for s in doc.steps if s.index == index)
        row.update(chosen_run_id=run_id, chosen_step=index, batch_size=doc.batch_size,
                   served_batch=proj.served_batch(step, int(doc.batch_size or 1)))  # fmt: skip
        row["latency_resolution_us"] = step.latency_resolution_us
        row["step_reasons"] = "; ".join(step.reasons or []) or None
        row["offered"] = ",".join(f"{k}={v}" for k, v in sorted(to_dict(step.offered).items()))
        power = step.metrics.gpu_power_w if step.metrics else None
        row["energy_per_request_j"] = step.energy_per_request_j or energy_per_request_j(
            power, cap.capacity_rps
        )
    return row


def unbatched_note(repository_config: str | None) -> str | None:
    """The note for a model served with ``max_batch_size: 0`` (it cannot batch: Triton's text format leaves
    a zero out), None when the config batches or is unknown (a remote server's)."""
    import re

    if not (repository_config or "").strip() or re.search(r"^max_batch_size: [1-9]", repository_config, re.M):
        return None
    return "max_batch_size 0: the model does not batch, the sweep varied concurrency only"


def _provenance(row: dict[str, Any], docs: list[ResultDocument]) -> None:
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
    row["host"] = ", ".join(sorted(hosts))
    row["measured_at"] = " – ".join(sorted({min(dates), max(dates)})) if dates else None
    row["versions"] = ", ".join(sorted(versions)) or None


def _efficiency_choice(target, calibrations, published) -> tuple[Any, str, str, str]:
    """(efficiency or model, kind, source text, calibration text) for a projected row."""
    if published is not None:
        notes = [n for n in (published.floor_source, published.validation_source) if n]
        label = "; ".join([published.label, *notes])
        return published, published.kind, label, published.calibration
    cal = proj.calibration_for(target.toolchain, calibrations)
    kind = "measured" if cal.samples else "assumed"
    return cal.efficiency, kind, cal.source, "none" if kind == "assumed" else cal.source


def _projected_row(model, precision, target, gc, groups, options, calibrations, roofline, published=None):
    row = _blank_row(model, precision, target, "projected")
    donors = [g for (m, p, _), g in groups.items() if (m, p) == (model, precision)]
    if donors:
        _accuracy(row, donors[0].accuracy(), donors[0].variant() or "")
    row["origin"] = "roofline-projection"
    if not proj.usable_graph_cost(gc):
        row["reason"] = "not projected: the results carry no graph_cost (FLOPs/bytes) for this model"
        return row
    efficiency, kind, source, calibration = _efficiency_choice(target, calibrations, published)
    p = proj.project_capacity(gc, target, precision, options.slo_us / 1e6, efficiency, roofline)
    batch_size = int(donors[0].batch_size() or 1) if donors else 1

    def per_request(ips: float | None) -> float | None:
        return ips / batch_size if ips else None

    row.update(
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
    return row


def _price_row(row: dict[str, Any], target: Any, options: ReportOptions) -> None:
    q = quote_price(target, options.price_basis, options.price_overrides, options.amortization_years,
                    options.usd_per_kwh)  # fmt: skip
    row.update(
        usd_per_hour=q.usd_per_hour if q else None, price_basis=q.basis if q else None,
        price_note=q.note if q else "no price in the catalog; pass --price ID=USD_PER_HOUR",
        price_source=q.source if q else None, price_as_of=q.as_of if q else None,
    )  # fmt: skip
    ok = q is not None and row["capacity_rps"]
    row["cost_per_million_usd"] = cost_per_million_usd(q.usd_per_hour, row["capacity_rps"]) if ok else None
    if ok and row["capacity_low"] and row["capacity_high"] and row["capacity_low"] > 0:
        # cost falls as capacity rises: the capacity's interval, inverted, is the cost's
        row["cost_low"] = cost_per_million_usd(q.usd_per_hour, row["capacity_high"])
        row["cost_high"] = cost_per_million_usd(q.usd_per_hour, row["capacity_low"])


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _baseline_ratios(rows: list[dict[str, Any]], baseline_id: str) -> None:
    base = {(r["model"], r["precision"]): r for r in rows if r["target"] == baseline_id}
    for row in rows:
        b = base.get((row["model"], row["precision"]))
        row["baseline_target"] = baseline_id
        row["baseline_status"] = b["status"] if b else None
        row["capacity_vs_baseline"] = _ratio(row["capacity_rps"], b and b["capacity_rps"])
        row["latency_vs_baseline"] = _ratio(row["latency_us"], b and b["latency_us"])
        row["cost_vs_baseline"] = _ratio(row["cost_per_million_usd"], b and b["cost_per_million_usd"])


def _rank(rows: list[dict[str, Any]], options: ReportOptions) -> None:
    """Rank per model by cost per million; FAIL-accuracy variants only with --include-failed."""
    by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        row["rank"] = None
        failed = row["accuracy_verdict"] == "FAIL"
        row["ranked"] = bool(
            row["cost_per_million_usd"] is not None and (options.include_failed or not failed)
        )
        if failed and not options.include_failed:
            row["reason"] = (row["reason"] + "; " if row["reason"] else "") + "not ranked: accuracy FAIL"
        if row["ranked"]:
            by_model[row["model"]].append(row)
    for model_rows in by_model.values():
        model_rows.sort(key=lambda r: (r["cost_per_million_usd"], r["status"] != "measured", r["target"]))
        for i, row in enumerate(model_rows, 1):
            row["rank"] = i
        compare_to_cheapest(model_rows)


def compare_to_cheapest(ranked: list[dict[str, Any]], confidence: float = 0.95) -> None:
    """Each measured row after the cheapest measured one: is the cheapest significantly cheaper? Welch on the
    log cost ratio (statistics.cost_ratio) with each capacity's SE including the between-run variance
    (repeats, else the host kind's noise floor; reports/noise.py), Holm-corrected across the ranking; a single
    run with neither is "inconclusive: single runs". Sets ``row["comparison"]``."""
    from accelbench.loadtests.statistics import cost_ratio, holm
    from accelbench.reports.noise import capacity_se_between

    measured = [r for r in ranked if r["status"] == "measured" and r["capacity_se"] is not None]
    if len(measured) < 2:
        return
    best, rest = measured[0], measured[1:]
    name = f"{best['target']} {best['precision']}"
    best_se = capacity_se_between(best)
    others, ratios = [], []
    for r in rest:
        se = capacity_se_between(r)
        if best_se is None or se is None:  # the between-run variance is unknown: no claim either way
            single = ", ".join(x["target"] for x, v in ((best, best_se), (r, se)) if v is None)
            r["comparison"] = (f"against {name}: inconclusive: single runs (no between-run variance for {single}; "
                               "measure with --repeats 3)")  # fmt: skip
            continue
        others.append(r)
        ratios.append(cost_ratio(best["usd_per_hour"], best["capacity_rps"], *best_se,
                                 r["usd_per_hour"], r["capacity_rps"], *se, confidence))  # fmt: skip
    adjusted = holm([x.p for x in ratios])
    for row, ratio, p in zip(others, ratios, adjusted, strict=True):
        if p < 1 - confidence and ratio.high < 1:
            row["comparison"] = (
                f"{name} is {1 - ratio.high:.1%}–{1 - ratio.low:.1%} cheaper ({confidence:.0%}, Holm p = {p:.2g})"
            )
        else:
            row["comparison"] = f"no significant difference from {name} ({confidence:.0%}, Holm p = {p:.2g})"
