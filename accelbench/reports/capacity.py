"""Capacity at the latency SLO: the highest throughput among usable steps whose SLO verdict is PASS. Pure.

A step is usable when VALID or LOW-PRECISION (loadtests/verdict.py). Its SLO verdict comes from the exact
95 % interval of the percentile (PASS: upper bound within the SLO; FAIL: lower bound above; else
INCONCLUSIVE). Imported steps carry no per-request samples: their point estimate decides."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from accelbench.documents import Step
from accelbench.errors import BadInputError
from accelbench.loadtests.histogram import PERCENTILES
from accelbench.loadtests.statistics import FAIL, INCONCLUSIVE, PASS, slo_verdict
from accelbench.loadtests.verdict import USABLE
from accelbench.reports.options import DEFAULT_MAX_ERROR_RATE

PERCENTILE_KEYS = tuple(key for key, _ in PERCENTILES)
# An error rate above this disqualifies a step; the same limit the load-test verdict uses (loadtests/verdict.py).


def percentile_key(percentile: float | str) -> str:
    """Normalise 99, 99.0, "99" or "p99" to the result document's key "p99" (99.9 → "p99.9")."""
    text = str(percentile).strip().lower().removeprefix("p")
    try:
        value = float(text)
    except ValueError:
        raise BadInputError(
            f"percentile {percentile!r} is not a number; use one of 50 90 95 99 99.9"
        ) from None
    key = "p" + (f"{value:g}")
    if key not in PERCENTILE_KEYS:
        raise BadInputError(f"percentile {percentile!r} is not recorded; use one of 50 90 95 99 99.9")
    return key


@dataclass(frozen=True)
class Capacity:
    """The answer for one (model, precision, target): which step set the capacity, or why none did."""

    capacity_rps: float | None  # requests/s of the best PASS step; None = does not meet the SLO
    capacity_ips: float | None  # inferences/s of the same step
    latency_us: float | None  # the chosen percentile at that step
    step_key: tuple[str, int] | None  # (run_id, step index) of the chosen step
    qualifying_steps: int
    valid_steps: int  # usable steps: VALID or LOW-PRECISION
    reason: str  # one line: why this capacity (or "does not meet the SLO: ...")
    capacity_low: float | None = None  # 95 % interval of the capacity (batch means), None when not measured
    capacity_high: float | None = None
    capacity_se: float | None = None
    capacity_df: float | None = None
    latency_low: float | None = None  # exact 95 % interval of the percentile at that step
    latency_high: float | None = None
    step_verdict: str | None = None  # VALID or LOW-PRECISION
    slo_verdict: str | None = None  # PASS, or the best verdict any usable step reached

    @property
    def meets_slo(self) -> bool:
        return self.capacity_rps is not None


def latency_at(step: Step, pct_key: str) -> float | None:
    """The step's latency in µs at a percentile key ("p99"), None when not recorded."""
    value = step.latency_us.at(pct_key) if step.latency_us else None
    return None if value is None else float(value)


def step_usable(step: Step) -> bool:
    """VALID and LOW-PRECISION steps are shown and used; INVALID ones never count."""
    return step.verdict in USABLE


def _f(value: float | None) -> float | None:
    return None if value is None else float(value)


def step_latency_interval(step: Step, pct_key: str) -> tuple[float | None, float | None, float | None]:
    """(value, low, high) of a percentile in µs: the exact 95 % interval when the step has one; an imported
    step (no per-request samples) gives its point as both bounds, so its point decides."""
    value = latency_at(step, pct_key)
    stat = ((step.statistics.latency_us or {}) if step.statistics else {}).get(pct_key)
    if stat is not None:
        return (value if stat.value is None else float(stat.value)), _f(stat.low), _f(stat.high)
    return value, value, value


def step_throughput_interval(step: Step) -> dict[str, float | None] | None:
    """The step's throughput {value, low, high, se, df} from batch means; None for imported steps."""
    thr = step.statistics.throughput_rps if step.statistics else None
    if thr is None:
        return None
    return {k: _f(getattr(thr, k)) for k in ("value", "low", "high", "se", "df")}


def step_slo(step: Step, slo_us: float, pct_key: str) -> str:
    """PASS / FAIL / INCONCLUSIVE for one step from its percentile's interval (statistics.slo_verdict)."""
    value, low, high = step_latency_interval(step, pct_key)
    if value is None:
        return INCONCLUSIVE
    return slo_verdict(low, high, slo_us)


def step_qualifies(
    step: Step, slo_us: float, pct_key: str, max_error_rate: float = DEFAULT_MAX_ERROR_RATE
) -> bool:
    """A step counts when it is usable, its error rate is within the limit and its SLO verdict is PASS."""
    if not step_usable(step) or step.throughput_rps is None:
        return False
    if float(step.error_rate or 0.0) > max_error_rate:
        return False
    return step_slo(step, slo_us, pct_key) == PASS


def capacity_at_slo(
    steps: Iterable[tuple[str, Step]],
    slo_us: float,
    percentile: float | str = 99,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
) -> Capacity:
    """Highest throughput among PASS steps, ``(run_id, step)`` pairs pooled from every run of one target.

    Ties on throughput go to the lower latency, then to the earlier (run_id, index), so the answer is
    independent of the order the files were read in.
    """
    key = percentile_key(percentile)
    pairs: Sequence[tuple[str, Step]] = list(steps)
    usable = [(rid, s) for rid, s in pairs if step_usable(s)]
    # (run id, step, requests/s): a qualifying step always has a throughput
    good = [
        (rid, s, float(s.throughput_rps))
        for rid, s in usable
        if s.throughput_rps is not None and step_qualifies(s, slo_us, key, max_error_rate)
    ]
    if not good:
        return Capacity(
            None,
            None,
            None,
            None,
            0,
            len(usable),
            _why_not(usable, slo_us, key),
            slo_verdict=_best_verdict(usable, slo_us, key),
        )
    run_id, best, rps = min(good, key=lambda p: (-p[2], latency_at(p[1], key), p[0], p[1].index))
    ips = best.throughput_ips
    thr = step_throughput_interval(best) or {}
    _, lat_low, lat_high = step_latency_interval(best, key)
    inconclusive = sum(
        1
        for _, s in usable
        if step_slo(s, slo_us, key) == INCONCLUSIVE and float(s.throughput_rps or 0) > rps
    )
    reason = f"highest of {len(good)} PASS step(s) of {len(usable)} usable"
    if inconclusive:
        reason += f"; {inconclusive} faster step(s) INCONCLUSIVE (interval straddles the SLO)"
    return Capacity(
        capacity_rps=rps,
        capacity_ips=float(ips) if ips is not None else None,
        latency_us=latency_at(best, key),
        step_key=(run_id, best.index),
        qualifying_steps=len(good),
        valid_steps=len(usable),
        reason=reason,
        capacity_low=thr.get("low"),
        capacity_high=thr.get("high"),
        capacity_se=thr.get("se"),
        capacity_df=thr.get("df"),
        latency_low=lat_low if thr else None,
        latency_high=lat_high if thr else None,
        step_verdict=best.verdict,
        slo_verdict=PASS,
    )


def _best_verdict(usable: Sequence[tuple[str, Step]], slo_us: float, key: str) -> str | None:
    verdicts = {step_slo(s, slo_us, key) for _, s in usable}
    return next((v for v in (PASS, INCONCLUSIVE, FAIL) if v in verdicts), None)


def _why_not(usable: Sequence[tuple[str, Step]], slo_us: float, key: str) -> str:
    if not usable:
        return "does not meet the SLO: no VALID or LOW-PRECISION step"
    intervals = [step_latency_interval(s, key) for _, s in usable]
    recorded = [(value, low, high) for value, low, high in intervals if value is not None]
    if not recorded:
        return f"does not meet the SLO: no {key} recorded"
    value, low, high = min(recorded, key=lambda v: v[0])
    shown = f"{value / 1000:.3g} ms" + (
        f" [{_ms(low)}, {_ms(high)}]" if (low, high) != (value, value) else ""
    )
    if _best_verdict(usable, slo_us, key) == INCONCLUSIVE:
        return (
            f"SLO not shown (INCONCLUSIVE): best {key} {shown} straddles {slo_us / 1000:g} ms "
            "(too few requests to bound it; run longer steps)"
        )
    return f"does not meet the SLO: best {key} {shown} > {slo_us / 1000:g} ms (or error rate over limit)"


def _ms(value: float | None) -> str:
    return "open" if value is None else f"{value / 1000:.3g}"
