"""Exact request latencies: HDR histograms at microsecond resolution, encoded for transport and merged.

Locust buckets response times to whole milliseconds below 100 ms, so sub-millisecond inference shows up as
0 or 1 ms. Every latency is recorded here instead; histograms from several processes merge exactly (bucket
counts add), which averaging percentiles cannot do.
"""

from __future__ import annotations

from collections.abc import Iterable

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 60_000_000  # 60 s: anything slower is a failure of the measurement, not a latency
SIGNIFICANT_DIGITS = 3
# the percentiles every step records: document key (LatencyUs, StepStatistics.latency_us) and percentile;
# the step statistics, the generative figures and the report's SLO choices all read this one table
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9))


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_us(hist: HdrHistogram, latency_us: int) -> None:
    """Record one latency, clamped into the histogram's range so that no sample is silently dropped."""
    hist.record_value(min(max(int(latency_us), LOWEST_US), HIGHEST_US))


def encode(hist: HdrHistogram) -> str:
    """Compressed base64 text (the HdrHistogram V2 encoding), safe to put in JSON."""
    encoded: bytes = hist.encode()
    return encoded.decode("ascii")


def decode(text: str) -> HdrHistogram:
    return HdrHistogram.decode(text.encode("ascii"))


def merge(encoded: Iterable[str | None]) -> HdrHistogram:
    """One histogram holding every sample of the given encoded histograms (``None`` entries are skipped)."""
    total = new_histogram()
    for text in encoded:
        if text:
            total.add(decode(text))
    return total


def summary_us(hist: HdrHistogram) -> dict[str, float | int | None]:
    """p50/p90/p95/p99/p99.9/max/mean in µs; all ``None`` when nothing was recorded."""
    keys = [name for name, _ in PERCENTILES] + ["max", "mean"]
    if hist.get_total_count() == 0:
        return dict.fromkeys(keys)
    out: dict[str, float | int | None] = {
        name: int(hist.get_value_at_percentile(pct)) for name, pct in PERCENTILES
    }
    out["max"] = int(hist.get_max_value())
    out["mean"] = round(float(hist.get_mean_value()), 1)
    return out
