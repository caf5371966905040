"""Compare two sets of results: per model × precision × target, what changed, and is it a regression?

A change is judged against the between-run variance (reports/noise.py: repeats, else the history of the same
configuration, else the noise floor measured on this kind of host), never at a fixed percentage and never
against one run's own interval alone (docs/statistics.md):

- capacity: the 95 % interval of new ÷ old capacity (log scale; SE = the between-run SD × √(1/n_old + 1/n_new),
  or the runs' own Welch SE where that is larger) lies entirely below 1;
- latency at capacity: the same interval for new ÷ old latency lies entirely above 1;
- the SLO: it was PASS and is now FAIL (INCONCLUSIVE is not evidence of a regression), with a basis as above.

Two single runs with no basis are "inconclusive: single runs"; with only the noise floor, a change within it
is "inconclusive: single runs (within the noise floor)". A side without intervals (an imported or older
result) is compared but "not judged". ``judge_change`` is the rule on two rows, for any caller (the
service's history uses it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from scipy import stats

from accelbench.loadtests.statistics import FAIL, PASS, Ratio, cost_ratio
from accelbench.reports.capacity import percentile_key
from accelbench.reports.groups import GroupKey
from accelbench.reports.noise import Spread, floor_for, history_spread
from accelbench.reports.rows import ReportRow
from accelbench.reports.sections import fmt

if TYPE_CHECKING:
    from accelbench.reports.build import ReportData

CONFIDENCE = 0.95
SINGLE = "inconclusive: single runs"
RULE = (
    "regression = capacity down with the 95 % interval of new/old capacity entirely below 1, or the latency at "
    "capacity up with the 95 % interval of new/old latency entirely above 1, or an SLO verdict gone from PASS to "
    "FAIL; the intervals use the between-run variance (repeats on both sides, else the history of the same "
    "configuration, else the noise floor measured on this kind of host, docs/statistics.md); two single runs "
    f"with none of these are '{SINGLE}'; rows without intervals are not judged"
)


def _change(old: float | None, new: float | None) -> float | None:
    return None if old is None or new is None or old == 0 else (new - old) / old


def _capacity(row: ReportRow) -> tuple[float, float, float] | None:
    """(capacity, its SE, df) of a row whose capacity has an SE, else None."""
    if row.capacity_se is None or not row.capacity_rps:
        return None
    return row.capacity_rps, row.capacity_se, row.capacity_df or 1


def capacity_ratio(old: ReportRow, new: ReportRow, confidence: float = CONFIDENCE) -> Ratio | None:
    """new ÷ old capacity with its Welch interval (statistics.Ratio), or None when either lacks an SE."""
    o, n = _capacity(old), _capacity(new)
    if o is None or n is None:
        return None
    # cost_ratio(price 1, T_old; price 1, T_new) = T_new / T_old
    return cost_ratio(1.0, *o, 1.0, *n, confidence)


def _runs(row: ReportRow) -> int:
    return int(row.runs or 1)


def between_interval(
    old_value: float,
    new_value: float,
    sd_log: float,
    df: float,
    n_old: int,
    n_new: int,
    within_se: float = 0.0,
    within_df: float = math.inf,
    confidence: float = CONFIDENCE,
) -> tuple[float, float, float]:
    """new ÷ old with the interval from the between-run SD of the log (or the within-run SE where larger)."""
    se = sd_log * math.sqrt(1.0 / n_old + 1.0 / n_new)
    if within_se > se:
        se, df = within_se, within_df
    d = math.log(new_value / old_value)
    half = float(stats.t.ppf(0.5 + confidence / 2.0, df)) * se if df > 0 else math.inf
    return math.exp(d), math.exp(d - half), math.exp(d + half)


def _basis(old: ReportRow, new: ReportRow, spread: Spread | None) -> Spread | None:
    """The between-run spread to judge with: the caller's (history), else the host kind's noise floor."""
    if spread is not None:
        return spread
    same = old.target == new.target
    return floor_for(new.target) if same and new.target else None


@dataclass(frozen=True)
class Judgement:
    """What ``judge_change`` says of two rows: the object compare.json's rows and the service's history carry."""

    regression: bool = False
    judged: bool = False  # False: no intervals, or single runs with no between-run basis
    flags: tuple[str, ...] = ()  # each reason it is a regression
    capacity_ratio: float | None = None  # new ÷ old capacity
    capacity_ratio_low: float | None = None  # its 95 % interval, with the between-run variance
    capacity_ratio_high: float | None = None
    basis: str | None = None  # "repeats", "history: …", "noise floor: …"
    verdict: str = "not judged (no intervals)"


def judge_change(
    old: ReportRow | None, new: ReportRow | None, key: str = "p99", spread: Spread | None = None
) -> Judgement:
    """Is ``new`` a regression against ``old`` (two measured report rows: their capacity_rps/_se/_df,
    latency_us, latency_low_us, latency_high_us, slo_verdict, runs and target are read)? ``spread``: the
    between-run variance from the history of this configuration, if known."""
    if not old or not new:
        return Judgement()
    within = capacity_ratio(old, new)
    has_latency = old.latency_high_us is not None and new.latency_low_us is not None
    if within is None and not has_latency:
        return Judgement()
    repeated = _runs(old) >= 2 and _runs(new) >= 2
    basis = _basis(old, new, spread)
    if not repeated and basis is None:
        return Judgement(capacity_ratio=within.ratio if within is not None else None, verdict=SINGLE)
    flags, (ratio, low, high) = _flags(old, new, key, within, repeated, basis)
    if flags:
        verdict = "REGRESSION: " + "; ".join(flags)
    elif not repeated and basis is not None and basis.basis == "noise floor":
        verdict = f"{SINGLE} (within the noise floor)"
    else:
        verdict = "ok"
    return Judgement(
        regression=bool(flags),
        judged=True,
        flags=tuple(flags),
        capacity_ratio=ratio,
        capacity_ratio_low=low,
        capacity_ratio_high=high,
        verdict=verdict,
        basis="repeats" if repeated or basis is None else f"{basis.basis}: {basis.source}",
    )


Interval3 = tuple[float | None, float | None, float | None]  # (ratio, low, high), Nones when not judged


def _flags(
    old: ReportRow, new: ReportRow, key: str, within: Ratio | None, repeated: bool, basis: Spread | None
) -> tuple[list[str], Interval3]:
    """(the regression's reasons, (capacity ratio, low, high) or Nones)."""
    flags: list[str] = []
    interval: Interval3 = (None, None, None)
    if old.slo_verdict == PASS and new.slo_verdict == FAIL:
        flags.append("SLO verdict PASS → FAIL")
    n_old, n_new = _runs(old), _runs(new)
    o, n = _capacity(old), _capacity(new)  # both known whenever ``within`` is
    if within is not None and o is not None and n is not None:
        found: tuple[float, float, float] | None = None
        if repeated:  # the rows' own SEs are the between-run ones (reports/repeats.py)
            found = (within.ratio, within.low, within.high)
        elif basis is not None and basis.sd_log_capacity is not None:
            within_se = math.hypot(o[1] / o[0], n[1] / n[0])
            found = between_interval(
                o[0], n[0], basis.sd_log_capacity, basis.df, n_old, n_new, within_se, within.df
            )
        if found is not None:
            interval = found
            _, low, high = found
            if high < 1.0:
                flags.append(f"capacity down {1 - high:.1%}–{1 - low:.1%} (95 %)")
    if basis is not None and basis.sd_log_latency is not None and old.latency_us and new.latency_us:
        _, low, high = between_interval(
            old.latency_us, new.latency_us, basis.sd_log_latency, basis.df, n_old, n_new
        )
        if low > 1.0:
            flags.append(f"{key} up {low - 1:.1%}–{high - 1:.1%} (95 %)")
    return flags, interval


@dataclass(frozen=True)
class CompareRow:
    """One model × precision × target of compare.md / compare.json: both sides and the judgement."""

    model: str
    precision: str
    target: str
    old_status: str | None  # None: absent on that side
    new_status: str | None
    old_capacity_rps: float | None  # requests/s
    new_capacity_rps: float | None
    capacity_change: float | None  # (new − old) ÷ old
    old_latency_us: float | None  # the percentile at capacity, µs
    new_latency_us: float | None
    latency_change: float | None
    cost_change: float | None
    judgement: Judgement

    def as_json(self) -> dict[str, Any]:
        """The row as compare.json has it: its fields with the judgement's beside them."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "judgement"}
        return {**own, **asdict(self.judgement)}


def compare_rows(
    old: ReportData, new: ReportData, history: Mapping[GroupKey, list[ReportRow]] | None = None
) -> list[CompareRow]:
    """Join two ReportData on (model, precision, target) and judge each measured change; ``history``: earlier
    single-run rows per (model, precision, target), whose spread is the between-run variance."""
    key = percentile_key(new.options.percentile)
    history = history or {}
    old_rows = {(r.model, r.precision, r.target): r for r in old.rows}
    new_rows = {(r.model, r.precision, r.target): r for r in new.rows}
    out = []
    for k in sorted(set(old_rows) | set(new_rows)):
        o, n = old_rows.get(k), new_rows.get(k)
        measured = bool(o and n and o.status == n.status == "measured")
        earlier = history.get(k, [])
        spread = history_spread([h.capacity_rps for h in earlier], [h.latency_us for h in earlier])
        out.append(
            CompareRow(
                model=k[0],
                precision=k[1],
                target=k[2],
                old_status=o.status if o else None,
                new_status=n.status if n else None,
                old_capacity_rps=o.capacity_rps if o else None,
                new_capacity_rps=n.capacity_rps if n else None,
                capacity_change=_change(o.capacity_rps if o else None, n.capacity_rps if n else None),
                old_latency_us=o.latency_us if o else None,
                new_latency_us=n.latency_us if n else None,
                latency_change=_change(o.latency_us if o else None, n.latency_us if n else None),
                cost_change=_change(
                    o.cost_per_million_usd if o else None, n.cost_per_million_usd if n else None
                ),
                judgement=judge_change(o, n, key, spread) if measured else judge_change(None, None, key),
            )
        )
    return out


def compare_markdown(rows: list[CompareRow], key: str) -> str:
    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v:+.1%}"

    def num(v: float | None, scale: float = 1.0) -> str:
        return fmt(None if v is None else v / scale)

    lines = [
        "# accelbench comparison",
        "",
        f"Rule: {RULE}.",
        "",
        f"| model | precision | target | capacity old → new (req/s) | change [95 %] | {key} old → new (ms) | "
        "change | cost change | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        j = r.judgement
        proj = " (proj)" if "projected" in (r.old_status, r.new_status) else ""
        verdict = j.verdict + (f" [{j.basis.split(':')[0]}]" if j.basis else "")
        change = pct(r.capacity_change)
        if j.capacity_ratio_low is not None and j.capacity_ratio_high is not None:
            change += f" [{j.capacity_ratio_low - 1:+.1%}, {j.capacity_ratio_high - 1:+.1%}]"
        lines.append(
            f"| {r.model} | {r.precision} | {r.target}{proj} | {num(r.old_capacity_rps)} → "
            f"{num(r.new_capacity_rps)} | {change} | {num(r.old_latency_us, 1000)} → "
            f"{num(r.new_latency_us, 1000)} | {pct(r.latency_change)} | {pct(r.cost_change)} | {verdict} |"
        )
    return "\n".join(lines) + "\n"
