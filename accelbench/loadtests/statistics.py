"""The statistics behind a load step's verdict and every interval in the report (docs/statistics.md).

Pure functions on numbers: no I/O, no Locust. Intervals and trends are the result document's own parts
(``documents.Interval``, ``documents.Trend``), unrounded; the step's statistics round them for the file. SciPy does the distributions (binomial/beta for order
statistics and MLPerf's early stopping, Student t for batch means and Welch, Kendall's tau and Theil–Sen for
trends); what SciPy lacks (MSER-5 truncation, the Hamed–Rao variance correction, Holm's step-down) is here,
each with its source.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from accelbench.documents import Interval, Trend

# scipy is imported in the functions that use it: the load child imports this module (warmup_cut) and never
# needs scipy, whose import was half of the child's 1.2 s start (each `loadtest` and each step of a `run`)

FloatArray: TypeAlias = "npt.NDArray[np.float64]"
Floats: TypeAlias = "Sequence[float] | FloatArray"  # samples as a list or an array

MSER_BATCH = 5  # MSER-5 (Spratt 1998): the truncation rule on means of 5 consecutive observations
DRIFT_P = 0.01  # Mann–Kendall two-sided p below this ...
DRIFT_CHANGE = 0.05  # ... and a Sen-slope change over the step above this: drift (STATISTICS.md simulation)
HAMED_RAO = False  # see mann_kendall_p: a level shift looks like autocorrelation to the correction


# ---- MLPerf LoadGen early stopping (loadgen/early_stopping.cc) ------------------------------------------


def sample_floor(percentile: float = 99.0, confidence: float = 0.99, overlatency: int = 1) -> int:
    """Fewest requests for early stopping to bound the ``percentile``: the smallest n = h + t with
    I_p(h, t + 1) ≤ 1 − c (t over-latency queries, h passing). p99 at t = 1, c = 0.99: 662 (LoadGen)."""
    from scipy import special

    p = percentile / 100.0
    h = 1
    while special.betainc(h, overlatency + 1, p) > 1.0 - confidence:
        h += 1
    return h + overlatency


def early_stopping_rank(n: int, percentile: float = 99.0, confidence: float = 0.99) -> int | None:
    """LoadGen's early-stopping estimate of the percentile is the t-th largest of n latencies, t the most
    over-latency queries that still pass (binomial CDF ≤ 1 − c). 10,000 at p99 → 77. None below the floor."""
    from scipy import stats

    tail = 1.0 - percentile / 100.0
    t = int(stats.binom.ppf(1.0 - confidence, n, tail))
    while t >= 0 and stats.binom.cdf(t, n, tail) > 1.0 - confidence:
        t -= 1
    while stats.binom.cdf(t + 1, n, tail) <= 1.0 - confidence:
        t += 1
    return t if t >= 1 else None


# ---- order statistics --------------------------------------------------------------------------------


def percentile_point(sorted_x: FloatArray, percentile: float) -> float:
    """The ⌈q·n⌉-th smallest value (the HdrHistogram convention, so both agree on the same samples)."""
    n = len(sorted_x)
    rank = max(1, math.ceil(percentile / 100.0 * n))
    return float(sorted_x[min(rank, n) - 1])


def quantile_interval(x: FloatArray, percentile: float, confidence: float = 0.95) -> Interval:
    """Exact distribution-free interval [X(l), X(u)] for a quantile (Hahn & Meeker; scipy quantile_test)."""
    from scipy import stats

    ordered = np.sort(np.asarray(x, dtype=float))
    ci = stats.quantile_test(ordered, q=0, p=percentile / 100.0).confidence_interval(confidence)
    return Interval(
        value=percentile_point(ordered, percentile),
        low=_finite(ci.low),
        high=_finite(ci.high),
        confidence=confidence,
    )


def quantile_upper_bound(x: FloatArray, percentile: float, confidence: float = 0.99) -> float | None:
    """One-sided upper bound of a quantile (the MLPerf-compatible figure at 99 %); None when unbounded."""
    from scipy import stats

    ci = stats.quantile_test(np.asarray(x, dtype=float), q=0, p=percentile / 100.0, alternative="less")
    return _finite(ci.confidence_interval(confidence).high)


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


# ---- warm-up: MSER-5 ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Truncation:
    cut: int  # observations to drop from the start
    steady: bool  # False: the best cut lies beyond half the series, so no steady state was seen


def mser(x: Floats, batch: int = MSER_BATCH) -> Truncation:
    """MSER-m (White 1997; Spratt 1998 for m = 5): on means z of ``batch`` consecutive observations, the cut
    d* minimises Σ_{i≥d}(z_i − z̄_d)² / (m − d)². The last quarter of the batches is not a candidate: a short
    quiet stretch at the end has trivially small variance (kim-convergence's ``ignore_end`` drops the last 5;
    on a shared host a quiet last second made that cut nearly everything). d* beyond half means no steady state."""
    values = np.asarray(x, dtype=float)
    m = len(values) // batch
    if m < 4 or float(np.std(values)) == 0.0:
        return Truncation(0, m >= 1)
    z = values[: m * batch].reshape(m, batch).mean(axis=1)
    tail_sum = np.cumsum(z[::-1])[::-1]
    tail_sq = np.cumsum((z * z)[::-1])[::-1]
    count = np.arange(m, 0, -1, dtype=float)
    score = (tail_sq - tail_sum * tail_sum / count) / (count * count)
    ignore_end = max(1, m // 4)
    d = int(np.argmin(score[:-ignore_end]))
    return Truncation(d * batch, d * batch <= (m * batch) // 2)


def warmup_cut(latency: Floats) -> Truncation:
    """MSER-5, except that a cut whose discarded start is *faster* than the rest is no warm-up: a warm-up
    makes a server slow, not fast, so that is a later slowdown (a level shift) for the drift test to see."""
    values = np.asarray(latency, dtype=float)
    cut = mser(values)
    if cut.cut and float(values[: cut.cut].mean()) < float(values[cut.cut :].mean()):
        return Truncation(0, True)
    return cut


# ---- throughput: batch means ---------------------------------------------------------------------------


def mean_interval(batch_values: Floats, confidence: float = 0.95) -> tuple[Interval, float, int]:
    """x̄ ± t(1 − α/2, k − 1)·s/√k over k batch means; returns the interval, its standard error and df."""
    from scipy import stats

    values = np.asarray(batch_values, dtype=float)
    k = len(values)
    mean = float(values.mean()) if k else 0.0
    if k < 2:
        return Interval(value=mean, low=None, high=None, confidence=confidence), math.inf, 0
    se = float(values.std(ddof=1) / math.sqrt(k))
    half = float(stats.t.ppf(0.5 + confidence / 2.0, k - 1)) * se
    return Interval(value=mean, low=mean - half, high=mean + half, confidence=confidence), se, k - 1


def time_batches(
    completion_s: FloatArray, latency: FloatArray, start_s: float, end_s: float, k: int
) -> tuple[FloatArray, FloatArray]:
    """Split [start, end) into k equal-time batches: requests/s and mean latency per batch (NaN if empty)."""
    edges = np.linspace(start_s, end_s, k + 1)
    which = np.clip(np.searchsorted(edges, completion_s, side="right") - 1, 0, k - 1)
    counts = np.bincount(which, minlength=k).astype(float)
    sums = np.bincount(which, weights=latency, minlength=k)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return counts / ((end_s - start_s) / k), means


# ---- drift: Mann–Kendall with Sen's slope ----------------------------------------------------------------


def mann_kendall_p(x: Floats, hamed_rao: bool = True, lags: int = 3) -> tuple[float, float]:
    """(p, tau) of the Mann–Kendall test; with ``hamed_rao`` the variance of S is inflated for positive
    autocorrelation of the detrended ranks (Hamed & Rao 1998, their first ``lags`` lags, as pymannkendall's
    ``hamed_rao_modification_test(lag=3)``). The correction never makes the test less conservative."""
    from scipy import stats

    values = np.asarray(x, dtype=float)
    n = len(values)
    tau, p_plain = stats.kendalltau(np.arange(n), values)
    if n < 4 or not math.isfinite(tau):
        return 1.0, 0.0
    if not hamed_rao:
        return float(p_plain), float(tau)
    s = float(np.sum(np.sign(values[None, :] - values[:, None])[np.triu_indices(n, 1)]))
    var_s = n * (n - 1) * (2 * n + 5) / 18.0
    slope = stats.theilslopes(values).slope
    ranks = stats.rankdata(values - slope * np.arange(n))
    centred = ranks - ranks.mean()
    denom = float(np.sum(centred * centred))
    bound = stats.norm.ppf(0.975) / math.sqrt(n)
    total = 0.0
    for lag in range(1, min(lags, n - 3) + 1):
        rho = float(np.sum(centred[:-lag] * centred[lag:]) / denom)
        if abs(rho) > bound:  # only significant autocorrelations count (Hamed & Rao)
            total += (n - lag) * (n - lag - 1) * (n - lag - 2) * rho
    factor = max(1.0, 1.0 + 2.0 * total / (n * (n - 1) * (n - 2)))
    z = (s - math.copysign(1.0, s)) / math.sqrt(var_s * factor) if s else 0.0
    return float(2.0 * stats.norm.sf(abs(z))), float(tau)


def trend(
    x: Floats,
    p_limit: float = DRIFT_P,
    change_limit: float = DRIFT_CHANGE,
    hamed_rao: bool = HAMED_RAO,
) -> Trend:
    """Drift = Mann–Kendall p < ``p_limit`` AND |Sen-slope change over the series| > ``change_limit``.
    ``p``: the two-sided p-value; ``tau``: Kendall's tau between time and value; ``change``: the Sen line's
    end ÷ its start − 1 (the relative change over the series)."""
    from scipy import stats

    values = np.asarray([v for v in x if math.isfinite(v)], dtype=float)
    if len(values) < 4:
        return Trend(p=1.0, tau=0.0, change=0.0, drift=False)
    p, tau = mann_kendall_p(values, hamed_rao)
    fit = stats.theilslopes(values)
    start, end = float(fit.intercept), float(fit.intercept + fit.slope * (len(values) - 1))
    change = end / start - 1.0 if start > 0 else 0.0
    return Trend(p=p, tau=tau, change=change, drift=bool(p < p_limit and abs(change) > change_limit))


# ---- SLO verdict and comparisons -------------------------------------------------------------------------

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"


def slo_verdict(low: float | None, high: float | None, slo: float) -> str:
    """PASS when the upper bound is within the SLO, FAIL when the lower bound exceeds it, else INCONCLUSIVE."""
    if high is not None and high <= slo:
        return PASS
    if low is not None and low > slo:
        return FAIL
    return INCONCLUSIVE


@dataclass(frozen=True)
class Ratio:
    """cost_A / cost_B with its interval and the two-sided p-value of 'no difference'."""

    ratio: float
    low: float
    high: float
    p: float
    df: float


def cost_ratio(
    price_a: float,
    rate_a: float,
    se_a: float,
    df_a: float,
    price_b: float,
    rate_b: float,
    se_b: float,
    df_b: float,
    confidence: float = 0.95,
) -> Ratio:
    """Welch interval on log(cost_A/cost_B) = log(price_A/price_B) − log(T_A/T_B); the delta method gives
    SE = √((SE_A/T_A)² + (SE_B/T_B)²), Welch–Satterthwaite the degrees of freedom (prices are exact)."""
    from scipy import stats

    a, b = se_a / rate_a, se_b / rate_b
    log_ratio = math.log(price_a / price_b) - math.log(rate_a / rate_b)
    se = math.hypot(a, b)
    if se == 0.0:
        return Ratio(math.exp(log_ratio), math.exp(log_ratio), math.exp(log_ratio), 0.0, math.inf)
    df = (a * a + b * b) ** 2 / sum(v**4 / d for v, d in ((a, df_a), (b, df_b)) if d and math.isfinite(d))
    half = float(stats.t.ppf(0.5 + confidence / 2.0, df)) * se
    p = float(2.0 * stats.t.sf(abs(log_ratio) / se, df))
    return Ratio(math.exp(log_ratio), math.exp(log_ratio - half), math.exp(log_ratio + half), p, df)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def combine_runs(
    means: Sequence[float], ses: Sequence[float], dfs: Sequence[int]
) -> tuple[float, float, float]:
    """One estimate from R repeated runs: (mean, SE, df). With R ≥ 2 the between-run SE s/√R (df R − 1) is
    used when it exceeds the runs' pooled within-run SE (Kalibera & Jones 2013: the level that varies most)."""
    r = len(means)
    mean = float(np.mean(means))
    within = math.sqrt(sum(s * s for s in ses)) / r
    within_df = float(sum(dfs)) or math.inf
    if r < 2:
        return mean, within, within_df
    between = float(np.std(means, ddof=1) / math.sqrt(r))
    return (mean, between, float(r - 1)) if between > within else (mean, within, within_df)
