"""Compare two sets of results: per model × precision × target, what changed, and is it a regression?

Rule (stated in the output): the run-to-run spread of a target is the largest relative range
((max − min) ÷ max) of throughput, and of the chosen percentile, among VALID steps repeated at the same
offered load within either run, and among the stability windows inside a step (``windows``, written by
the load-test stage); with neither the spread is unknown and a floor of
``DEFAULT_SPREAD`` is used. A change is flagged as a regression when capacity falls, or the latency at
capacity rises, by more than that spread.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from accelbench.documents import Step, to_dict
from accelbench.reports.capacity import latency_at, percentile_key
from accelbench.reports.sections import fmt

# No repeated steps → no measured spread; 10 % is the load-test stage's stability tolerance
# (loadtests/verdict.py Limits.stability_tolerance), i.e. what a single step is trusted to.
DEFAULT_SPREAD = 0.10
RULE = (
    "regression = capacity down, or latency at capacity up, by more than the run-to-run spread: the largest "
    "relative range ((max − min) ÷ max) of throughput or latency among VALID steps repeated at the same offered "
    "load, or among the stability windows inside a step, in either run; "
    f"{DEFAULT_SPREAD:.0%} (the load tests' stability tolerance) when neither exists"
)


def relative_range(values: list[float]) -> float:
    top = max(values)
    return 0.0 if top <= 0 else (top - min(values)) / top


def step_spread(steps: Iterable[Step], percentile: str = "p99") -> float | None:
    """Largest relative range of throughput or latency among steps at the same offered load; None if no repeats."""
    key = percentile_key(percentile)
    by_load: dict[str, list[Step]] = defaultdict(list)
    for s in steps:
        if s.verdict == "VALID":
            by_load[repr(sorted(to_dict(s.offered).items()))].append(s)
    spreads = []
    for s in (s for group in by_load.values() for s in group):
        windows = s.windows or []  # the load test's stability windows within one step
        for values in ([w.throughput_rps for w in windows], [w.p99_us for w in windows]):
            values = [float(v) for v in values if v is not None]
            if len(values) >= 2:
                spreads.append(relative_range(values))
    for group in by_load.values():
        if len(group) < 2:
            continue
        thr = [float(s.throughput_rps) for s in group if s.throughput_rps is not None]
        lat = [v for v in (latency_at(s, key) for s in group) if v is not None]
        spreads += [relative_range(v) for v in (thr, lat) if len(v) >= 2]
    return max(spreads) if spreads else None


def _change(old: float | None, new: float | None) -> float | None:
    return None if old is None or new is None or old == 0 else (new - old) / old


def compare_rows(old: Any, new: Any) -> list[dict[str, Any]]:
    """Join two ReportData on (model, precision, target); measured rows only on either side count as data."""
    key = percentile_key(new.options.percentile)
    old_rows = {(r["model"], r["precision"], r["target"]): r for r in old.rows}
    new_rows = {(r["model"], r["precision"], r["target"]): r for r in new.rows}
    out = []
    for k in sorted(set(old_rows) | set(new_rows)):
        o, n = old_rows.get(k), new_rows.get(k)
        spreads = [step_spread(d.groups[k].steps_only(), key) for d in (old, new) if k in d.groups]
        known = [s for s in spreads if s is not None]
        spread = max(known) if known else DEFAULT_SPREAD
        cap_change = _change(o and o["capacity_rps"], n and n["capacity_rps"])
        lat_change = _change(o and o["latency_us"], n and n["latency_us"])
        cost_change = _change(o and o["cost_per_million_usd"], n and n["cost_per_million_usd"])
        flags = []
        # A projection that could not be made (no graph_cost on that side) is missing data, not a regression.
        unprojected = n and str(n.get("reason") or "").startswith("not projected")
        if o and n and o["meets_slo"] and not n["meets_slo"] and not unprojected:
            flags.append("no longer meets the SLO")
        if cap_change is not None and cap_change < -spread:
            flags.append(f"capacity down {-cap_change:.1%} > spread {spread:.1%}")
        if lat_change is not None and lat_change > spread:
            flags.append(f"{key} up {lat_change:.1%} > spread {spread:.1%}")
        out.append({
            "model": k[0], "precision": k[1], "target": k[2],
            "old_status": o and o["status"], "new_status": n and n["status"],
            "old_capacity_rps": o and o["capacity_rps"], "new_capacity_rps": n and n["capacity_rps"],
            "capacity_change": cap_change, "old_latency_us": o and o["latency_us"],
            "new_latency_us": n and n["latency_us"], "latency_change": lat_change, "cost_change": cost_change,
            "spread": spread, "spread_measured": bool(known), "regression": bool(flags), "flags": flags,
        })  # fmt: skip
    return out


def compare_markdown(rows: list[dict[str, Any]], key: str) -> str:
    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v:+.1%}"

    def num(v: float | None, scale: float = 1.0) -> str:
        return fmt(None if v is None else v / scale)

    lines = ["# accelbench comparison", "", f"Rule: {RULE}.", "",
             f"| model | precision | target | capacity old → new (req/s) | change | {key} old → new (ms) | change | "
             "cost change | spread | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        proj = " (proj)" if "projected" in (r["old_status"], r["new_status"]) else ""
        spread = f"{r['spread']:.1%}" + ("" if r["spread_measured"] else " (default)")
        verdict = "REGRESSION: " + "; ".join(r["flags"]) if r["regression"] else "ok"
        lines.append(
            f"| {r['model']} | {r['precision']} | {r['target']}{proj} | {num(r['old_capacity_rps'])} → "
            f"{num(r['new_capacity_rps'])} | {pct(r['capacity_change'])} | {num(r['old_latency_us'], 1000)} → "
            f"{num(r['new_latency_us'], 1000)} | {pct(r['latency_change'])} | {pct(r['cost_change'])} | {spread} | "
            f"{verdict} |"
        )
    return "\n".join(lines) + "\n"
