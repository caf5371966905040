"""Is a load step's measurement trustworthy, and how precise is it? Pure: numbers in, verdict and reasons out.

VALID: every check passed. LOW-PRECISION: trustworthy but too few samples (below the sample floor of the
judged percentile) or a throughput interval wider than the limit at the step's maximum duration; shown and
used, with its (wide) intervals. INVALID: something makes the numbers wrong (errors, a saturated load
generator, an unachieved open-loop rate, no steady state, drift, an aborted step). The methods and their
sources are in docs/statistics.md; the arithmetic is in ``statistics.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelbench.documents import Drift, StepStatistics, ThroughputInterval, Trend, Truncated, to_dict
from accelbench.loadtests import statistics as st
from accelbench.loadtests.genstats import MERGED_BY_A_LATE_CLIENT
from accelbench.loadtests.histogram import PERCENTILES

VALID = "VALID"
LOW_PRECISION = "LOW-PRECISION"
INVALID = "INVALID"
USABLE = (VALID, LOW_PRECISION)  # verdicts whose numbers the report uses


@dataclass(frozen=True)
class Limits:
    """Thresholds a step must meet. ``max_loadgen_cpu`` is the fraction of one core per load process.

    ``judged_percentile`` sets the sample floor (MLPerf early stopping at ``floor_confidence``): a step is
    extended until it has that many requests, up to its maximum duration."""

    min_requests: int = 50
    max_error_rate: float = 0.01
    max_loadgen_cpu: float = 0.90
    min_rate_fraction: float = 0.90
    judged_percentile: float = 99.0
    floor_confidence: float = 0.99
    max_throughput_halfwidth: float = 0.10  # relative half-width of the 95 % throughput interval
    ci_batches: int = 10
    drift_batches: int = 20
    drift_p: float = st.DRIFT_P
    drift_change: float = st.DRIFT_CHANGE
    # a step judged INVALID only for drift or no steady state is measured again up to this many times
    # (spec ``[load] retries``, ``--retries``): on a shared machine such a step is often a burst of load
    # from elsewhere, not the server; errors, a saturated load generator or a cut-short step are not retried
    retries: int = 2

    @property
    def sample_floor(self) -> int:
        return st.sample_floor(self.judged_percentile, self.floor_confidence)


DEFAULT_LIMITS = Limits()


def analyse(
    completion_s: np.ndarray, latency_us: np.ndarray, duration_s: float, limits: Limits = DEFAULT_LIMITS
) -> tuple[StepStatistics, list[str], list[str]]:
    """Statistics of one step from its completion-ordered latencies (seconds since the measured window
    opened, µs). Returns the step's ``statistics``, reasons it is INVALID, and reasons it is LOW-PRECISION."""
    invalid: list[str] = []
    low: list[str] = []
    order = np.argsort(completion_s, kind="stable")
    done, lat = np.asarray(completion_s, float)[order], np.asarray(latency_us, float)[order]
    cut = st.warmup_cut(lat)
    if not cut.steady:
        invalid.append(f"no steady state: MSER-5 would cut {cut.cut} of {len(lat)} requests (more than half)")
    start = float(done[cut.cut - 1]) if cut.cut else 0.0
    end = max(float(duration_s), float(done[-1]) if len(done) else 0.0)
    done, lat = done[cut.cut :], lat[cut.cut :]
    n = len(lat)
    judged = f"p{limits.judged_percentile:g}"
    counts = StepStatistics(
        requests=int(n + cut.cut),
        truncated=Truncated(requests=cut.cut, seconds=round(start, 3)),
        n=int(n),
        sample_floor=limits.sample_floor,
        judged=judged,
    )
    if n < 2 or end <= start:
        low.append(f"only {n} requests after the warm-up cut")
        return counts, invalid, low
    rates, _ = st.time_batches(done, lat, start, end, limits.ci_batches)
    thr, se, df = st.mean_interval(rates)
    rank = st.early_stopping_rank(n, limits.judged_percentile, 0.99)
    drift_rates, drift_means = st.time_batches(done, lat, start, end, limits.drift_batches)
    drift = Drift(
        batches=limits.drift_batches,
        latency=_trend(drift_means, limits),
        throughput=_trend(drift_rates, limits),
    )
    statistics = StepStatistics(
        **counts.model_dump(exclude_none=True, exclude={"truncated"}),
        truncated=counts.truncated,
        throughput_rps=ThroughputInterval(**to_dict(thr.rounded(3)), se=round(se, 4), df=df),
        latency_us={key: st.quantile_interval(lat, q).rounded(3) for key, q in PERCENTILES},
        upper_99_us=_round(st.quantile_upper_bound(lat, limits.judged_percentile, 0.99)),
        early_stopping_us=float(np.sort(lat)[-rank]) if rank else None,
        drift=drift,
    )
    for what, t in (("latency", drift.latency), ("throughput", drift.throughput)):
        if t is not None and t.drift:
            invalid.append(
                f"drift: mean {what} changed {t.change:+.0%} over the step "
                f"(Mann–Kendall p = {t.p:.2g} < {limits.drift_p:g}, Sen slope beyond ±{limits.drift_change:.0%})"
            )
    if n < limits.sample_floor:
        low.append(
            f"{n} requests after the warm-up cut, below the {limits.sample_floor} that {judged} needs "
            "(MLPerf early stopping): its upper bound is loose or missing"
        )
    value, high = thr.value or 0.0, thr.high
    if value > 0 and high is not None and (high - value) / value > limits.max_throughput_halfwidth:
        low.append(
            f"throughput ±{(high - value) / value:.0%} (95 %), wider than ±{limits.max_throughput_halfwidth:.0%}"
        )
    return statistics, invalid, low


def _trend(x: np.ndarray, limits: Limits) -> Trend:
    """Mann–Kendall and Sen over batch means, rounded as the document keeps them."""
    t = st.trend(x, limits.drift_p, limits.drift_change)
    p, tau, change = float(t.p or 0.0), float(t.tau or 0.0), float(t.change or 0.0)
    return Trend(p=float(f"{p:.3g}"), tau=round(tau, 4), change=round(change, 4), drift=t.drift)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)


# the INVALID reasons another measurement may not repeat (a stream merged by a starved load process too)
RETRYABLE = ("drift:", "no steady state:", MERGED_BY_A_LATE_CLIENT)


def worth_retrying(verdict: str, reasons: Sequence[str]) -> bool:
    """True when a step is INVALID only for reasons of the time it ran at (drift, no steady state)."""
    return verdict == INVALID and bool(reasons) and all(r.startswith(RETRYABLE) for r in reasons)


def judge(
    *,
    requests: int,
    error_rate: float,
    loadgen_cpu: Sequence[float],
    offered_rps: float | None = None,
    achieved_rps: float | None = None,
    aborted: str | None = None,
    invalid: Sequence[str] = (),
    low_precision: Sequence[str] = (),
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[str, list[str]]:
    """The verdict and its reasons: every INVALID reason, else every LOW-PRECISION reason (VALID: none)."""
    reasons: list[str] = []
    if aborted:
        reasons.append(f"step did not finish: {aborted}")
    if requests < limits.min_requests:
        reasons.append(f"too few requests: {requests} < {limits.min_requests}")
    if error_rate > limits.max_error_rate:
        reasons.append(f"error rate {error_rate:.2%} above the limit {limits.max_error_rate:.2%}")
    busiest = max(loadgen_cpu, default=0.0)
    if busiest > limits.max_loadgen_cpu:
        reasons.append(
            f"load generator saturated: a load process used {busiest:.0%} of a core "
            f"(limit {limits.max_loadgen_cpu:.0%})"
        )
    if offered_rps and achieved_rps is not None and achieved_rps < limits.min_rate_fraction * offered_rps:
        reasons.append(
            f"open-loop rate not achieved: {achieved_rps:.1f} of {offered_rps:.1f} requests/s "
            f"(< {limits.min_rate_fraction:.0%})"
        )
    reasons += list(invalid)
    if reasons:
        return INVALID, reasons
    if low_precision:
        return LOW_PRECISION, list(low_precision)
    return VALID, []
