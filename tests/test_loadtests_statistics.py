"""Known answers for the step statistics (docs/statistics.md): MLPerf's early-stopping numbers, exact
order-statistic intervals, MSER-5 on a warm-up transient, Mann–Kendall/Sen drift on 20 % and 30 % drifts,
heavy tails, batch-means throughput intervals, the SLO verdict, Welch/Holm cost comparisons, and the
STATISTICS.md worked example. Synthetic streams are seeded, so every figure here is reproducible."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from accelbench.loadtests import statistics as st
from accelbench.loadtests.verdict import INVALID, LOW_PRECISION, VALID, Limits, analyse, judge


def stream(seed: int, *, rate=150.0, seconds=60.0, sigma=0.5, median_us=50_000.0, warmup_s=0.0,
           drift=0.0, step_at=None, step_by=0.0, noise=0.05, tail=None):  # fmt: skip
    """Poisson completions with log-normal latencies; optional warm-up transient (3× decaying over
    ``warmup_s``), a linear drift of ``drift`` over the stream, a step change, AR(1) host noise, or Pareto
    tails (shape ``tail``)."""
    rng = np.random.default_rng(seed)
    n = rng.poisson(rate * seconds)
    done = np.sort(rng.uniform(0, seconds, n))
    lat = median_us * (1 + rng.pareto(tail, n)) if tail else median_us * rng.lognormal(0, sigma, n)
    # host noise: an AR(1) factor per 0.5 s slice, 5 % standard deviation, correlation 0.8
    slices = int(seconds * 2) + 1
    ar = np.zeros(slices)
    for i in range(1, slices):
        ar[i] = 0.8 * ar[i - 1] + rng.normal(0, noise * 0.6)
    lat *= 1 + ar[(done * 2).astype(int)]
    if warmup_s:
        lat *= 1 + 2 * np.clip(1 - done / warmup_s, 0, None)
    lat *= 1 + drift * done / seconds
    if step_at is not None:
        lat *= np.where(done >= step_at, 1 + step_by, 1.0)
    return done, lat


# ---- MLPerf LoadGen's own numbers ----------------------------------------------------------------------


def test_sample_floor_matches_loadgen():
    assert st.sample_floor(99) == 662  # LoadGen's MultiStream min_query_count
    assert [st.sample_floor(p) for p in (90, 95, 99.9)] == [64, 130, 6636]
    assert st.sample_floor(99, overlatency=0) == 459
    assert st.sample_floor(99, confidence=0.95, overlatency=0) == 299
    assert Limits().sample_floor == 662 and Limits(judged_percentile=95).sample_floor == 130


def test_early_stopping_estimate_is_loadgens_order_statistic():
    assert [st.early_stopping_rank(n) for n in (1_000, 5_000, 10_000, 100_000)] == [2, 33, 77, 927]
    assert st.early_stopping_rank(400) is None  # below the floor nothing bounds p99


def test_exact_quantile_interval_for_10000_requests():
    x = np.arange(1, 10_001, dtype=float)  # the value is its own rank
    ci = st.quantile_interval(x, 99)
    assert (10_001 - ci.low, 10_001 - ci.high) == (121, 81)  # between the 121st and the 81st largest
    assert ci.value == 9_900
    assert 10_001 - st.quantile_upper_bound(x, 99, 0.99) == 78  # one-sided 99 %: the 78th largest


def test_too_few_samples_leave_the_upper_bound_open():
    ci = st.quantile_interval(np.arange(1, 201, dtype=float), 99)
    assert ci.high is None and ci.low == 195
    assert st.quantile_upper_bound(np.arange(1, 201, dtype=float), 99) is None


def test_quantile_interval_coverage_on_heavy_tails():
    """Distribution-free: a Pareto (shape 1.5) p99 interval covers the true p99 about 95 % of the time."""
    true_p99 = 50_000.0 * (1 + (0.01 ** (-1 / 1.5) - 1))
    hits = 0
    for seed in range(200):
        _, lat = stream(seed, seconds=10, tail=1.5, noise=0.0)
        ci = st.quantile_interval(lat, 99)
        hits += ci.low <= true_p99 <= ci.high
    assert 0.91 <= hits / 200 <= 0.99


# ---- warm-up -----------------------------------------------------------------------------------------


def test_mser_cuts_the_warm_up_transient_like_the_worked_example():
    done, lat = stream(7, warmup_s=5.0)
    cut = st.mser(lat)
    assert cut.steady
    assert 3.5 <= done[cut.cut] <= 6.5  # STATISTICS.md: MSER-5 cut 5.07 s of a 5 s transient


def test_mser_keeps_a_stationary_stream_whole():
    cuts = [st.mser(stream(seed)[1]) for seed in range(20)]
    assert all(c.steady for c in cuts)
    assert np.median([c.cut for c in cuts]) < 0.05 * 9_000


def test_mser_finds_no_steady_state_in_a_ramp():
    lat = np.linspace(1_000, 5_000, 5_000) * np.random.default_rng(0).lognormal(0, 0.05, 5_000)
    assert not st.mser(lat).steady


# ---- drift -------------------------------------------------------------------------------------------


def _drifts(seeds, **kw) -> float:
    return float(np.mean([bool(analyse(*stream(s, **kw), 60.0)[1]) for s in seeds]))


@pytest.mark.slow
def test_drift_rule_on_steady_and_drifting_streams():
    seeds = range(60)
    assert _drifts(seeds) <= 0.08  # steady, autocorrelated 5 % noise: rarely flagged
    assert _drifts(seeds, drift=0.20) >= 0.6  # STATISTICS.md simulation: 66 % of 20 % drifts
    assert _drifts(seeds, drift=0.30) >= 0.85  # and 91 % of 30 % drifts


def test_a_step_change_halfway_is_drift_with_its_size():
    stats, invalid, _ = analyse(*stream(3, step_at=30.0, step_by=0.5), 60.0)
    assert len(invalid) == 1 and invalid[0].startswith("drift: mean latency changed +")
    assert stats.drift.latency.drift and stats.drift.latency.change > 0.3


def test_hamed_rao_correction_only_ever_widens():
    """With autocorrelated batch means the corrected p is larger; a level shift looks like autocorrelation
    to it (which is why the step verdict uses the plain test on 20 batch means, docs/statistics.md)."""
    _, lat = stream(3, step_at=30.0, step_by=0.5)
    means = st.time_batches(*stream(3, step_at=30.0, step_by=0.5), 0.0, 60.0, 20)[1]
    plain, corrected = st.mann_kendall_p(means, hamed_rao=False)[0], st.mann_kendall_p(means)[0]
    assert plain < 0.01 < corrected
    white = np.random.default_rng(4).normal(1, 0.05, 20)
    assert st.mann_kendall_p(white)[0] == pytest.approx(
        st.mann_kendall_p(white, hamed_rao=False)[0], rel=0.05
    )


def test_mann_kendall_known_answers():
    assert st.mann_kendall_p(np.arange(20.0), hamed_rao=False)[1] == pytest.approx(1.0)
    p_plain, _ = st.mann_kendall_p(np.arange(20.0), hamed_rao=False)
    assert p_plain < 1e-6
    flat = np.random.default_rng(1).normal(1, 0.05, 20)
    assert st.trend(flat).drift is False
    # a 4 % trend is significant but below the 5 % size limit: not drift
    small = np.linspace(1, 1.04, 20) + np.random.default_rng(2).normal(0, 0.001, 20)
    t = st.trend(small)
    assert t.p < 0.01 and 0.035 < t.change < 0.045 and not t.drift


# ---- throughput, verdict -----------------------------------------------------------------------------


@pytest.mark.slow
def test_batch_means_interval_covers_the_true_rate():
    hits = 0
    for seed in range(100):
        stats, _, _ = analyse(*stream(seed, noise=0.0), 60.0)
        thr = stats.throughput_rps
        hits += thr.low <= 150.0 <= thr.high
        assert thr.df == 9
    assert hits >= 88


def test_worked_example_step_is_valid():
    stats, invalid, low = analyse(*stream(11, warmup_s=5.0), 60.0)
    assert invalid == [] and low == []
    assert stats.n > 662 and stats.truncated.seconds > 3.0
    p99 = stats.latency_us["p99"]
    assert p99.low < p99.value < p99.high <= stats.upper_99_us <= stats.early_stopping_us
    thr = stats.throughput_rps
    assert 145 < thr.value < 155 and (thr.high - thr.value) / thr.value < 0.06


def test_a_short_step_is_low_precision_not_invalid():
    done, lat = stream(5, seconds=2.0)  # ~300 requests: too few for p99's 662, and for its 95 % upper bound
    stats, invalid, low = analyse(done, lat, 2.0)
    assert invalid == [] and "below the 662 that p99 needs" in low[0]
    assert stats.latency_us["p99"].high is None
    verdict, reasons = judge(requests=300, error_rate=0.0, loadgen_cpu=[0.2], low_precision=low)
    assert verdict == LOW_PRECISION and reasons == low


def test_invalid_reasons_win_over_low_precision():
    verdict, reasons = judge(requests=300, error_rate=0.05, loadgen_cpu=[0.2], invalid=["drift: x"],
                             low_precision=["few"])  # fmt: skip
    assert verdict == INVALID and reasons[0].startswith("error rate") and reasons[1] == "drift: x"
    assert judge(requests=1000, error_rate=0.0, loadgen_cpu=[0.2]) == (VALID, [])


def test_slo_verdict():
    assert st.slo_verdict(80.0, 95.0, 100.0) == st.PASS
    assert st.slo_verdict(101.0, 130.0, 100.0) == st.FAIL
    assert st.slo_verdict(90.0, 110.0, 100.0) == st.INCONCLUSIVE
    assert st.slo_verdict(90.0, None, 100.0) == st.INCONCLUSIVE  # unbounded above: cannot pass
    assert st.slo_verdict(150.0, None, 100.0) == st.FAIL


# ---- comparisons ---------------------------------------------------------------------------------------


def test_worked_example_cost_ratio():
    """A $2.50/h at 410 ± 3.0 (SE), B $3.20/h at 480 ± 4.0, each from 10 batch means (df 9)."""
    r = st.cost_ratio(2.50, 410.0, 3.0, 9, 3.20, 480.0, 4.0, 9)
    assert round(r.ratio, 3) == 0.915 and (round(r.low, 3), round(r.high, 3)) == (0.894, 0.936)
    assert r.p < 1e-4


def test_holm_adjusts_step_down():
    assert st.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert st.holm([0.5]) == [0.5]


def test_combining_repeats_uses_the_larger_variance():
    mean, se, df = st.combine_runs([100.0, 110.0, 90.0], [1.0, 1.0, 1.0], [9, 9, 9])
    assert mean == 100.0 and se == pytest.approx(10 / np.sqrt(3)) and df == 2
    mean, se, df = st.combine_runs([100.0, 100.1, 99.9], [3.0, 3.0, 3.0], [9, 9, 9])
    assert se == pytest.approx(np.sqrt(27) / 3) and df == 27
    assert st.combine_runs([100.0], [2.0], [9]) == (100.0, 2.0, 9.0)


def test_the_load_child_imports_no_scipy():
    """The load child (one per `loadtest`, one per step of a `run`) imports this module for warmup_cut only:
    scipy, imported where the statistics use it, stays out of it (half of the child's start, 0.6 s here)."""
    code = "import sys, accelbench.loadtests.runner; print(sorted(m for m in sys.modules if m.startswith('scipy')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", (out.stdout[:500], out.stderr[-2000:])
