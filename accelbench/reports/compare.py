"""Compare two sets of results: per model × precision × target, what changed, and is it a regression?

A change is a regression only when the intervals say so, never at a fixed percentage (docs/statistics.md):

- capacity: the 95 % Welch interval of new ÷ old capacity (log scale, from each step's batch-means standard
  error) lies entirely below 1;
- latency at capacity: the new percentile's exact 95 % interval lies entirely above the old one's;
- the SLO: it was PASS and is now FAIL (INCONCLUSIVE is not evidence of a regression).

A side without intervals (an imported or older result) is compared but never called a regression: "not
judged". ``judge_change`` is the rule on two rows, for any caller (the service's history uses it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelbench.loadtests.statistics import FAIL, PASS, cost_ratio
from accelbench.reports.capacity import percentile_key
from accelbench.reports.sections import fmt

CONFIDENCE = 0.95
RULE = (
    "regression = capacity down with the 95 % interval of new/old capacity entirely below 1 (Welch, batch means), "
    "or the latency at capacity up with non-overlapping exact 95 % intervals, or an SLO verdict gone from PASS "
    "to FAIL; rows without intervals are not judged"
)


def _change(old: float | None, new: float | None) -> float | None:
    return None if old is None or new is None or old == 0 else (new - old) / old


def capacity_ratio(old: Mapping[str, Any], new: Mapping[str, Any], confidence: float = CONFIDENCE):
    """new ÷ old capacity with its Welch interval (statistics.Ratio), or None when either lacks an SE."""
    if not (old.get("capacity_se") is not None and new.get("capacity_se") is not None
            and old.get("capacity_rps") and new.get("capacity_rps")):  # fmt: skip
        return None
    # cost_ratio(price 1, T_old; price 1, T_new) = T_new / T_old
    return cost_ratio(1.0, old["capacity_rps"], old["capacity_se"], old.get("capacity_df") or 1,
                      1.0, new["capacity_rps"], new["capacity_se"], new.get("capacity_df") or 1, confidence)  # fmt: skip


def judge_change(
    old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, key: str = "p99"
) -> dict[str, Any]:
    """Is ``new`` a regression against ``old``? Rows carry capacity_rps/_se/_df, latency_us, latency_low_us,
    latency_high_us and slo_verdict (report rows do). Returns regression, judged, flags and the capacity
    ratio's interval."""
    out: dict[str, Any] = {"regression": False, "judged": False, "flags": [], "capacity_ratio": None,
                           "capacity_ratio_low": None, "capacity_ratio_high": None}  # fmt: skip
    if not old or not new:
        return out
    flags: list[str] = []
    if old.get("slo_verdict") == PASS and new.get("slo_verdict") == FAIL:
        flags.append("SLO verdict PASS → FAIL")
    ratio = capacity_ratio(old, new)
    if ratio is not None:
        out.update(
            judged=True,
            capacity_ratio=ratio.ratio,
            capacity_ratio_low=ratio.low,
            capacity_ratio_high=ratio.high,
        )
        if ratio.high < 1.0:
            flags.append(f"capacity down {1 - ratio.high:.1%}–{1 - ratio.low:.1%} (95 %)")
    old_high, new_low = old.get("latency_high_us"), new.get("latency_low_us")
    if old_high is not None and new_low is not None:
        out["judged"] = True
        if new_low > old_high:
            flags.append(
                f"{key} up: new interval from {new_low / 1000:.3g} ms above old up to {old_high / 1000:.3g} ms"
            )
    out["flags"] = flags
    out["regression"] = bool(flags)
    return out


def compare_rows(old: Any, new: Any) -> list[dict[str, Any]]:
    """Join two ReportData on (model, precision, target) and judge each measured change."""
    key = percentile_key(new.options.percentile)
    old_rows = {(r["model"], r["precision"], r["target"]): r for r in old.rows}
    new_rows = {(r["model"], r["precision"], r["target"]): r for r in new.rows}
    out = []
    for k in sorted(set(old_rows) | set(new_rows)):
        o, n = old_rows.get(k), new_rows.get(k)
        measured = bool(o and n and o["status"] == n["status"] == "measured")
        verdict = judge_change(o, n, key) if measured else judge_change(None, None, key)
        out.append({
            "model": k[0], "precision": k[1], "target": k[2],
            "old_status": o and o["status"], "new_status": n and n["status"],
            "old_capacity_rps": o and o["capacity_rps"], "new_capacity_rps": n and n["capacity_rps"],
            "capacity_change": _change(o and o["capacity_rps"], n and n["capacity_rps"]),
            "old_latency_us": o and o["latency_us"], "new_latency_us": n and n["latency_us"],
            "latency_change": _change(o and o["latency_us"], n and n["latency_us"]),
            "cost_change": _change(o and o["cost_per_million_usd"], n and n["cost_per_million_usd"]),
            **verdict,
        })  # fmt: skip
    return out


def compare_markdown(rows: list[dict[str, Any]], key: str) -> str:
    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v:+.1%}"

    def num(v: float | None, scale: float = 1.0) -> str:
        return fmt(None if v is None else v / scale)

    lines = ["# accelbench comparison", "", f"Rule: {RULE}.", "",
             f"| model | precision | target | capacity old → new (req/s) | change [95 %] | {key} old → new (ms) | "
             "change | cost change | verdict |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        proj = " (proj)" if "projected" in (r["old_status"], r["new_status"]) else ""
        if r["regression"]:
            verdict = "REGRESSION: " + "; ".join(r["flags"])
        else:
            verdict = "ok" if r["judged"] else "not judged (no intervals)"
        change = pct(r["capacity_change"])
        if r["capacity_ratio_low"] is not None:
            change += f" [{r['capacity_ratio_low'] - 1:+.1%}, {r['capacity_ratio_high'] - 1:+.1%}]"
        lines.append(
            f"| {r['model']} | {r['precision']} | {r['target']}{proj} | {num(r['old_capacity_rps'])} → "
            f"{num(r['new_capacity_rps'])} | {change} | {num(r['old_latency_us'], 1000)} → "
            f"{num(r['new_latency_us'], 1000)} | {pct(r['latency_change'])} | {pct(r['cost_change'])} | {verdict} |"
        )
    return "\n".join(lines) + "\n"
