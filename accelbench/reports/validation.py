"""How far a projection can be trusted: the efficiency model checked on published results it was not fitted on.

Three checks over the catalog's published points (``bench/projection_check.py`` prints them, docs/projections.md
states their worst figures and a test keeps them there):

- **leave one model out**: refit each target without one of its models, project that model;
- **leave one target out**: drop every point of a target (its chip's other targets and its toolchain still
  speak for it, as they do for a target nobody published), project each of its points;
- **cross-family**: fit on one source family only (MLPerf, or the vendors' own tables), project the other's.

Each row gives ``factor`` = projected ÷ published and, where a reference target (the baseline, or a target with
the baseline's chip) published the same model, precision and batch, ``ratio_factor`` = (projected ÷ projected
reference) ÷ (published ÷ published reference): the ratio a hardware choice rests on. The report's projected
range widens to what leave-one-target-out supports for the toolchain (``validation_range``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelbench.reports import efficiency as ef

RooflineFn = Callable[..., Any]


def _reference_point(catalog: Any, p: Any, baseline_id: str) -> Any | None:
    """The point of the baseline (else of a target with its chip) for the same model, precision and batch,
    else the same scenario."""
    base = catalog.get(baseline_id)
    for tid in [baseline_id, *ef._siblings(catalog, base)]:
        pts = [q for q in catalog.published_for(tid) if (q.model, q.precision) == (p.model, p.precision)]
        same = [q for q in pts if q.batch == p.batch] or [q for q in pts if q.scenario == p.scenario]
        if len(same) == 1:
            return same[0]
    return None


def check_row(catalog: Any, p: Any, eff: Any, base_eff: Any, baseline_id: str, roofline: RooflineFn,
              reason: str = "", use: ef.Use = ef._all) -> dict[str, Any]:  # fmt: skip
    """One published point against the projection ``eff`` makes of it (and ``base_eff`` of its reference)."""
    target = catalog.get(p.target)
    fp = ef.point_roofline(p, catalog.published_costs[p.model][p.precision], target, roofline)
    row: dict[str, Any] = {
        "target": p.target, "model": p.model, "precision": p.precision, "batch": p.batch,
        "scenario": p.scenario, "family": p.family, "published_ips": p.throughput_ips, "fitted": p.fit,
        "engines": p.engines, "counted": p.engines == "gpu", "counted_factor": p.engines == "gpu" and p.fit,
        "projected_ips": None, "factor": None, "ratio_factor": None, "reference": None, "reason": reason,
    }  # fmt: skip
    if eff is None:
        row["reason"] = reason or "no published point left to fit on"
        return row
    flops = float(catalog.published_costs[p.model][p.precision]["flops_per_inference"])
    eff = ef.with_floor(eff, catalog, target, roofline, flops, use)
    row["projected_ips"] = fp.bound_ips * eff.at_point(fp.roofline, fp.weight_bytes)[0]
    row["factor"] = row["projected_ips"] / p.throughput_ips
    ref = _reference_point(catalog, p, baseline_id)
    if ref is not None and base_eff is not None and ref.target != p.target:
        rfp = ef.point_roofline(ref, catalog.published_costs[p.model][p.precision], catalog.get(ref.target),
                                roofline)  # fmt: skip
        base_eff = ef.with_floor(base_eff, catalog, catalog.get(ref.target), roofline, flops, use)
        projected_ratio = row["projected_ips"] / (
            rfp.bound_ips * base_eff.at_point(rfp.roofline, rfp.weight_bytes)[0]
        )
        row["ratio_factor"] = projected_ratio / (p.throughput_ips / ref.throughput_ips)
        row["reference"] = ref.target
    if not p.fit and p.engines != "gpu":
        row["reason"] = f"not a fitted point ({p.engines}): shown for reference"
    elif not p.fit:
        row["reason"] = (
            "not a fitted point (" + p.note.split(":")[0] + "): its ratio counts, its factor does not"
        )
    return row


def _reference_target(catalog: Any, p: Any, baseline_id: str) -> str:
    ref = _reference_point(catalog, p, baseline_id)
    return ref.target if ref is not None else baseline_id


def leave_one_model_out(catalog: Any, roofline: RooflineFn, baseline_id: str) -> list[dict[str, Any]]:
    """Every target's points of each model, projected from a refit without that model (both sides)."""
    rows = []
    for p in catalog.published:
        eff = ef.target_model(catalog, p.target, roofline, exclude_model=p.model, model=p.model)
        ref = _reference_target(catalog, p, baseline_id)
        base = ef.target_model(catalog, ref, roofline, exclude_model=p.model, model=p.model)
        reason = "" if eff else "no other published model on this target or its chip to fit on"
        rows.append(check_row(catalog, p, eff, base, baseline_id, roofline, reason,
                              use=lambda q, m=p.model: q.model != m))  # fmt: skip
    return rows


def leave_one_target_out(catalog: Any, roofline: RooflineFn, baseline_id: str) -> list[dict[str, Any]]:
    """Every point projected with all of its own target's points left out: from its chip, else its toolchain."""
    rows = []
    for p in catalog.published:

        def use(q, tid=p.target):
            return q.target != tid

        eff = ef.model_for(catalog, catalog.get(p.target), roofline, model=p.model, use=use)
        ref = _reference_target(catalog, p, baseline_id)
        base = ef.model_for(catalog, catalog.get(ref), roofline, model=p.model, use=use)
        rows.append(check_row(catalog, p, eff, base, baseline_id, roofline, use=use))
    return rows


def cross_family(
    catalog: Any, roofline: RooflineFn, baseline_id: str, fit_family: str
) -> list[dict[str, Any]]:
    """The points of every other family, projected from fits on ``fit_family``'s points alone."""
    rows = []

    def use(q):
        return q.family == fit_family

    for p in (q for q in catalog.published if q.family != fit_family):
        eff = ef.model_for(catalog, catalog.get(p.target), roofline, model=p.model, use=use)
        ref = _reference_target(catalog, p, baseline_id)
        base = ef.model_for(catalog, catalog.get(ref), roofline, model=p.model, use=use)
        reason = "" if eff else f"no {fit_family} point of this toolchain to fit on"
        rows.append(check_row(catalog, p, eff, base, baseline_id, roofline, reason, use=use))
    return rows


def worst(rows: list[dict[str, Any]], key: str) -> tuple[float | None, dict[str, Any] | None]:
    """The factor farthest from 1 (f and 1/f alike) among counted rows, and its row."""
    counted = "counted_factor" if key == "factor" else "counted"
    best: tuple[float | None, dict[str, Any] | None] = (None, None)
    for row in rows:
        value = row[key]
        if value is None or not row[counted]:
            continue
        spread = max(value, 1 / value)
        if best[0] is None or spread > best[0]:
            best = (spread, row)
    return best


_RANGES: dict[tuple[int, str], tuple[tuple[float, float], str] | None] = {}


def _catalog_key(catalog: Any) -> int:
    """What the check depends on: the published points and the targets' peaks, bandwidth and chip."""
    targets = tuple(
        (tid, t.toolchain, getattr(t, "compute_capability", None), t.memory_bw_gbs,
         tuple(sorted((t.peak_tflops or {}).items())))
        for tid, t in sorted(catalog.targets.items())
    )  # fmt: skip
    return hash((catalog.published, targets))


def validation_range(
    catalog: Any, roofline: RooflineFn, toolchain: str
) -> tuple[tuple[float, float], str] | None:
    """(lowest, highest) projected ÷ published of the toolchain's fitted points with their target left out,
    and its description; None when the check has no such point. Cached per catalog (it refits every target)."""
    key = (_catalog_key(catalog), toolchain)
    if key not in _RANGES:
        rows = [
            r for r in leave_one_target_out(catalog, roofline, catalog.baseline_id)
            if r["counted_factor"] and r["factor"] and catalog.get(r["target"]).toolchain == toolchain
        ]  # fmt: skip
        factors = [r["factor"] for r in rows]
        _RANGES[key] = (
            ((min(factors), max(factors)), (
                f"widened to the leave-one-target-out check of {len(rows)} {toolchain} point(s): "
                f"projected ÷ published {min(factors):.2g}–{max(factors):.2g}"
            ))
            if factors else None
        )  # fmt: skip
    return _RANGES[key]
