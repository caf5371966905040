"""Capacity plan for a target request rate: replicas per target and the monthly bill; MIG slices as candidates.

A MIG slice is assumed to deliver its compute fraction of the whole GPU's capacity at the SLO (optimistic
for memory-bound models, whose bandwidth share is the slice's memory fraction) and is priced by the same
share of the GPU's hourly price (assumes the other slices do other paying work).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from accelbench.hardware.catalog import HardwareTarget, MigProfile
from accelbench.reports.cost import HOURS_PER_MONTH, replicas_needed
from accelbench.reports.rows import PlanRow, ReportRow


def _fraction(value: Any) -> float:
    return float(Fraction(str(value)))


def _smallest_per_fraction(
    profiles: Iterable[MigProfile], graph_cost: Mapping[str, Any] | None
) -> list[MigProfile]:
    """One profile per compute fraction: the one with the least memory that still holds the weights."""
    need_gb = float((graph_cost or {}).get("weight_bytes") or 0) / 1e9
    best: dict[float, MigProfile] = {}
    for prof in profiles:
        frac, mem = _fraction(prof.compute_fraction), float(prof.memory_gb or 0)
        if mem and mem < need_gb:
            continue
        if frac not in best or mem < float(best[frac].memory_gb or 0):
            best[frac] = prof
    return [best[f] for f in sorted(best)]


def plan_rows(
    rows: Iterable[ReportRow],
    targets: Mapping[str, HardwareTarget],
    target_qps: float,
    headroom: float,
    graph_costs: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
) -> list[PlanRow]:
    """One plan line per priced row that meets the SLO, plus one per MIG profile of MIG-capable targets."""
    out: list[PlanRow] = []
    for row in rows:
        cap, usd = row.capacity_rps, row.usd_per_hour
        if not row.ranked or not cap or usd is None:
            continue  # does not meet the SLO, has no price, or failed its accuracy check
        base = {"model": row.model, "precision": row.precision, "target": row.target, "status": row.status}
        n = replicas_needed(target_qps, cap, headroom)
        out.append(
            PlanRow(
                **base,
                unit="whole accelerator",
                capacity_rps=cap,
                usd_per_hour=usd,
                replicas=n,
                gpus=n,
                monthly_usd=usd * n * HOURS_PER_MONTH,
            )
        )
        gc = (graph_costs or {}).get((row.model, row.precision))
        target = targets.get(row.target)
        for prof in _smallest_per_fraction(target.mig_profiles if target is not None else (), gc):
            frac = _fraction(prof.compute_fraction)
            if frac >= 1:
                continue
            n_slices = replicas_needed(target_qps, cap * frac, headroom)
            out.append(
                PlanRow(
                    **base,
                    unit=f"MIG {prof.name}",
                    capacity_rps=cap * frac,
                    usd_per_hour=usd * frac,
                    replicas=n_slices,
                    gpus=math.ceil(n_slices / int(prof.max_count or 1)),
                    monthly_usd=usd * frac * n_slices * HOURS_PER_MONTH,
                )
            )
    out.sort(key=lambda r: (r.model, r.monthly_usd, r.target, r.precision, r.unit))
    return out
