"""Is a load step's measurement trustworthy? Pure functions: numbers in, VALID/INVALID and reasons out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

VALID = "VALID"
INVALID = "INVALID"


@dataclass(frozen=True)
class Limits:
    """Thresholds a step must meet. ``max_loadgen_cpu`` is the fraction of one core per load process."""

    min_requests: int = 50
    max_error_rate: float = 0.01
    max_loadgen_cpu: float = 0.90
    min_rate_fraction: float = 0.90
    stability_tolerance: float = 0.10
    stability_windows: int = 3


DEFAULT_LIMITS = Limits()


def spread(values: Sequence[float]) -> float:
    """(max - min) / max: 0 when all agree; 0 for an all-zero list."""
    top = max(values)
    return 0.0 if top <= 0 else (top - min(values)) / top


def is_stable(windows: Sequence[tuple[float, float]], limits: Limits = DEFAULT_LIMITS) -> bool | None:
    """Do the last N windows (throughput_rps, p99_us) agree within the tolerance?

    ``None`` when there are fewer than N windows: stability was not assessed.
    """
    n = limits.stability_windows
    if len(windows) < n:
        return None
    last = windows[-n:]
    tol = limits.stability_tolerance
    return spread([w[0] for w in last]) <= tol and spread([w[1] for w in last]) <= tol


def judge(
    *,
    requests: int,
    error_rate: float,
    loadgen_cpu: Sequence[float],
    stable: bool | None,
    offered_rps: float | None = None,
    achieved_rps: float | None = None,
    aborted: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[str, list[str]]:
    """The verdict and every reason that makes a step INVALID (empty list when VALID)."""
    reasons: list[str] = []
    if aborted:
        reasons.append(f"step did not finish: {aborted}")
    if requests < limits.min_requests:
        reasons.append(f"too few requests: {requests} < {limits.min_requests}")
    if error_rate > limits.max_error_rate:
        reasons.append(f"error rate {error_rate:.2%} above the limit {limits.max_error_rate:.2%}")
    if stable is False:
        reasons.append(
            f"unstable: the last {limits.stability_windows} windows differ by more than "
            f"{limits.stability_tolerance:.0%} in throughput or p99"
        )
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
    return (INVALID if reasons else VALID), reasons
