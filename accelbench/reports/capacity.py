"""Capacity at the latency SLO: the highest throughput among VALID steps that meet the SLO. Pure functions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from accelbench.documents import Step
from accelbench.errors import BadInputError

PERCENTILE_KEYS = ("p50", "p90", "p95", "p99", "p99.9")
# An error rate above this disqualifies a step; the same limit the load-test verdict uses (loadtests/verdict.py).
DEFAULT_MAX_ERROR_RATE = 0.01


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

    capacity_rps: float | None  # requests/s of the best qualifying step; None = does not meet the SLO
    capacity_ips: float | None  # inferences/s of the same step
    latency_us: float | None  # the chosen percentile at that step
    step_key: tuple[str, int] | None  # (run_id, step index) of the chosen step
    qualifying_steps: int
    valid_steps: int
    reason: str  # one line: why this capacity (or "does not meet the SLO: ...")

    @property
    def meets_slo(self) -> bool:
        return self.capacity_rps is not None


def latency_at(step: Step, pct_key: str) -> float | None:
    """The step's latency in µs at a percentile key ("p99"), None when not recorded."""
    value = step.latency_us.at(pct_key) if step.latency_us else None
    return None if value is None else float(value)


def step_qualifies(
    step: Step, slo_us: float, pct_key: str, max_error_rate: float = DEFAULT_MAX_ERROR_RATE
) -> bool:
    """A step counts when it is VALID, its error rate is within the limit and its percentile within the SLO."""
    if step.verdict != "VALID":
        return False
    latency = latency_at(step, pct_key)
    if latency is None or step.throughput_rps is None:
        return False
    return float(step.error_rate or 0.0) <= max_error_rate and latency <= slo_us


def capacity_at_slo(
    steps: Iterable[tuple[str, Step]],
    slo_us: float,
    percentile: float | str = 99,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
) -> Capacity:
    """Best qualifying throughput among ``(run_id, step)`` pairs pooled from every run of one target.

    Ties on throughput go to the lower latency, then to the earlier (run_id, index), so the answer is
    independent of the order the files were read in.
    """
    key = percentile_key(percentile)
    pairs: Sequence[tuple[str, Step]] = list(steps)
    valid = [(rid, s) for rid, s in pairs if s.verdict == "VALID"]
    good = [(rid, s) for rid, s in valid if step_qualifies(s, slo_us, key, max_error_rate)]
    if not good:
        if not valid:
            why = "does not meet the SLO: no VALID step"
        else:
            recorded = (latency_at(s, key) for _, s in valid)
            best_latency = min((v for v in recorded if v is not None), default=None)
            shown = "unknown" if best_latency is None else f"{best_latency / 1000:.3g} ms"
            why = (
                f"does not meet the SLO: best {key} {shown} > {slo_us / 1000:g} ms (or error rate over limit)"
            )
        return Capacity(None, None, None, None, 0, len(valid), why)
    run_id, best = min(
        good,
        key=lambda p: (-float(p[1].throughput_rps), latency_at(p[1], key), p[0], p[1].index),
    )
    rps = float(best.throughput_rps)
    ips = best.throughput_ips
    return Capacity(
        capacity_rps=rps,
        capacity_ips=float(ips) if ips is not None else None,
        latency_us=latency_at(best, key),
        step_key=(run_id, best.index),
        qualifying_steps=len(good),
        valid_steps=len(valid),
        reason=f"best of {len(good)} qualifying step(s) of {len(valid)} VALID",
    )
