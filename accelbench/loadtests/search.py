"""The SLO-capacity search: the highest load whose TTFT p99 and TPOT p99 meet their objectives.

Pure: measured points in, the next loads to measure (or none) and the answer out; the sweep measures them
(sweep.run_sweep hands each round to the same Locust child). The phases, as GuideLLM's ``sweep`` brackets:

1. **synchronous**: concurrency 1, one request at a time (its throughput is the synchronous rate);
2. **saturation**: concurrency ``max_concurrency`` (its throughput is the most the server gave);
3. **between**: ``between`` loads spread over that range: concurrencies geometrically between 1 and the
   maximum (closed loop), Poisson rates evenly between the synchronous and the saturated throughput (rates);
4. **refinement**: bisection between the highest load that met the objectives and the lowest above it that
   did not, ``refinements`` times at most; concurrencies stop when the two are 1 apart.

Loads are assumed to meet the objectives below a capacity and miss them above it (one crossing). The answer
is the highest load that met them with its interval [that load, the lowest load above it that did not]; a
saturation step that met them gives the interval [max, unbounded); a synchronous step that did not, none.

A step meets the objectives when it finished, its error rate is at most 1 %, it completed streamed requests,
its TTFT p99 and TPOT p99 are within the objectives, and (rates) it achieved 90 % of the offered rate.
LOW-PRECISION steps count (a search step is sized for the decision, not for a published percentile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MODES = ("concurrency", "rate")
PHASES = ("synchronous", "saturation", "between", "refinement")
MAX_ERROR_RATE = 0.01
MIN_ACHIEVED = 0.90  # of the offered rate (verdict.py's open-loop rule)


@dataclass(frozen=True)
class Point:
    """One measured search step, as the search reads it."""

    index: int
    offered: dict[str, float]  # {"concurrency": n} | {"rate_rps": r}
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    throughput_rps: float
    error_rate: float = 0.0
    achieved_rps: float | None = None
    finished: bool = True

    @property
    def level(self) -> float:
        return float(self.offered.get("concurrency", self.offered.get("rate_rps", 0.0)))

    @property
    def is_rate(self) -> bool:
        return "rate_rps" in self.offered


@dataclass(frozen=True)
class Objectives:
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None

    def met_by(self, p: Point) -> bool:
        if not p.finished or p.error_rate > MAX_ERROR_RATE or p.ttft_p99_ms is None:
            return False
        if self.ttft_p99_ms is not None and p.ttft_p99_ms > self.ttft_p99_ms:
            return False
        if self.tpot_p99_ms is not None and (p.tpot_p99_ms is None or p.tpot_p99_ms > self.tpot_p99_ms):
            return False
        return not (p.is_rate and p.achieved_rps is not None and p.achieved_rps < MIN_ACHIEVED * p.level)


@dataclass(frozen=True)
class Plan:
    mode: str  # concurrency | rate
    objectives: Objectives
    max_concurrency: int = 64
    between: int = 3
    refinements: int = 4


@dataclass(frozen=True)
class Answer:
    """The search's result: ``level`` (a concurrency or requests/s) met the objectives, ``above`` (None:
    unbounded) did not; ``phases`` maps each step index to its phase; ``reason`` says why it ended."""

    level: float | None
    above: float | None
    step: int | None
    phases: dict[int, str] = field(default_factory=dict)
    met: dict[int, bool] = field(default_factory=dict)
    reason: str = ""


def _sync_and_saturation(plan: Plan, points: list[Point]) -> tuple[Point | None, Point | None]:
    closed = [p for p in points if not p.is_rate]
    sync = next((p for p in closed if p.level == 1), None)
    sat = next((p for p in closed if p.level == plan.max_concurrency), None)
    return sync, sat


def _candidates(plan: Plan, points: list[Point]) -> list[Point]:
    """The points of the searched kind (rates, or concurrencies), by load."""
    own = [p for p in points if p.is_rate == (plan.mode == "rate")]
    return sorted(own, key=lambda p: p.level)


def between_levels(plan: Plan, sync: Point, sat: Point) -> list[float]:
    """The ``between`` loads spread over the bracketing range (phase 3)."""
    k = plan.between
    if plan.mode == "concurrency":
        top = plan.max_concurrency
        raw = [round(top ** ((i + 1) / (k + 1))) for i in range(k)]
        return sorted({float(c) for c in raw if 1 < c < top})
    low, high = sync.throughput_rps, max(sat.throughput_rps, sync.throughput_rps)
    return [round(low + (high - low) * (i + 1) / (k + 1), 3) for i in range(k)] if high > 0 else []


def _bracket(plan: Plan, points: list[Point]) -> tuple[Point | None, Point | None]:
    """The highest point that met the objectives below the lowest that did not above it."""
    cands = _candidates(plan, points)
    first_fail = next((p for p in cands if not plan.objectives.met_by(p)), None)
    below = [
        p for p in cands if plan.objectives.met_by(p) and (first_fail is None or p.level < first_fail.level)
    ]
    return (below[-1] if below else None), first_fail


def _refined(points: list[Point], phases: dict[int, str]) -> int:
    return sum(1 for p in points if phases.get(p.index) == "refinement")


Load = tuple[dict[str, float], str]  # what to offer ({"concurrency": n} | {"rate_rps": r}) and its phase


def next_loads(plan: Plan, points: list[Point], phases: dict[int, str]) -> list[Load]:
    """The loads to measure next, each with its phase; none: the search is done. ``phases`` names the phase
    each measured step was planned in (the caller keeps it with the steps)."""
    sync, sat = _sync_and_saturation(plan, points)
    if sync is None or sat is None:
        todo = [({"concurrency": 1.0}, "synchronous")] if sync is None else []
        if sat is None and plan.max_concurrency != 1:
            todo.append(({"concurrency": float(plan.max_concurrency)}, "saturation"))
        return todo
    if plan.mode == "concurrency" and (not plan.objectives.met_by(sync) or plan.objectives.met_by(sat)):
        return []
    key = "concurrency" if plan.mode == "concurrency" else "rate_rps"
    done = {p.level for p in points if phases.get(p.index) == "between"}
    missing = [v for v in between_levels(plan, sync, sat) if v not in done]  # all of them, or a rerun's rest
    if missing:
        return [({key: v}, "between") for v in missing]
    if _refined(points, phases) >= plan.refinements:
        return []
    lo, hi = _bracket(plan, points)
    if plan.mode == "concurrency":
        low = lo.level if lo else 1.0
        high = hi.level if hi else float(plan.max_concurrency)
        return [({key: float(math.floor((low + high) / 2))}, "refinement")] if high - low > 1 else []
    if hi is None:  # every rate met them: the saturated throughput bounds the search
        return []
    low = lo.level if lo else 0.0
    mid = round((low + hi.level) / 2, 3)
    return [({key: mid}, "refinement")] if mid > 0 and mid not in (low, hi.level) else []


def answer(plan: Plan, points: list[Point], phases: dict[int, str]) -> Answer:
    """The highest load that met the objectives and its interval (see the module's docstring)."""
    met = {p.index: plan.objectives.met_by(p) for p in points}
    sync, sat = _sync_and_saturation(plan, points)
    if sync is None or sat is None:
        return Answer(None, None, None, dict(phases), met, "not finished: the bracketing steps are missing")
    if plan.mode == "concurrency" and met[sat.index]:
        return Answer(
            sat.level,
            None,
            sat.index,
            dict(phases),
            met,
            f"concurrency {plan.max_concurrency} (the saturation step) met the objectives: raise "
            "max_concurrency to find where they stop holding",
        )
    if not met[sync.index]:
        return Answer(
            None, sync.level, None, dict(phases), met, "one request at a time already misses the objectives"
        )
    lo, hi = _bracket(plan, points)
    if plan.mode == "concurrency" and lo is None:
        lo = sync
    if lo is None:
        return Answer(
            None, hi.level if hi else None, None, dict(phases), met, "no rate measured met the objectives"
        )
    why = (
        f"{lo.level:g} met the objectives, {hi.level:g} did not"
        if hi
        else f"every rate measured met the objectives, up to the saturated throughput {sat.throughput_rps:g}/s"
    )
    return Answer(lo.level, hi.level if hi else None, lo.index, dict(phases), met, why)
