"""How much a measurement moves from one run to the next: the basis every comparison is judged against. Pure.

Two runs of the same configuration differ by more than either run's own interval says (on shared VMs the
drift between runs is as large as the spread within one), so a change is judged against the between-run
variance, from the first of these that exists (docs/statistics.md):

1. ``repeats``: both sides are means of repeated runs (``--repeats``); their standard errors are between-run.
2. ``history``: earlier runs of the same (model, target, precision, load), at least MIN_RUNS of them; their
   standard deviation of log capacity and of log latency (conbench and Bencher judge a new result against the
   distribution of earlier ones).
3. ``noise floor``: the between-run coefficient of variation measured on this kind of host, stored with the
   measurement that set it in ``noise_floor.toml`` (``bench/between_run_noise.py`` writes it).

With none of them, two single runs are "inconclusive: single runs": no regression is claimed.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from accelbench.reports.repeats import MIN_RUNS
from accelbench.reports.rows import ReportRow

FLOOR_FILE = Path(__file__).with_name("noise_floor.toml")


@dataclass(frozen=True)
class Spread:
    """The between-run standard deviation of log capacity and log latency, and where it comes from."""

    sd_log_capacity: float | None
    sd_log_latency: float | None
    df: float  # degrees of freedom of the estimate (runs − 1)
    basis: str  # "history", "noise floor" (or "repeats" for the capacity of repeated rows)
    source: str  # one line: which runs, or the measurement that set the floor


@dataclass(frozen=True)
class NoiseFloor:
    targets: tuple[str, ...]
    cv_capacity: float
    cv_latency: float
    runs: int
    host: str
    measured_at: str
    command: str
    note: str = ""

    def spread(self) -> Spread:
        source = f"{self.runs} identical runs on {self.host}, {self.measured_at} ({self.command})"
        return Spread(
            _log_sd(self.cv_capacity), _log_sd(self.cv_latency), float(self.runs - 1), "noise floor", source
        )


def _log_sd(cv: float) -> float:
    """The standard deviation of log X for a coefficient of variation ``cv`` (log-normal)."""
    return math.sqrt(math.log1p(cv * cv))


@lru_cache(maxsize=4)
def noise_floors(path: Path = FLOOR_FILE) -> tuple[NoiseFloor, ...]:
    """The stated noise floors (an absent file: none)."""
    if not path.is_file():
        return ()
    data = tomllib.loads(path.read_text())
    return tuple(
        NoiseFloor(
            tuple(f["targets"]),
            float(f["cv_capacity"]),
            float(f["cv_latency"]),
            int(f["runs"]),
            str(f["host"]),
            str(f["measured_at"]),
            str(f["command"]),
            str(f.get("note", "")),
        )
        for f in data.get("floor", [])
    )


def floor_for(target: str, floors: Sequence[NoiseFloor] | None = None) -> Spread | None:
    """The noise floor measured on this kind of host (by catalog target id), or None."""
    for floor in noise_floors() if floors is None else floors:
        if target in floor.targets:
            return floor.spread()
    return None


def history_spread(capacities: Sequence[float | None], latencies_us: Sequence[float | None]) -> Spread | None:
    """The spread of earlier single runs of one configuration; None with fewer than MIN_RUNS."""
    caps = [math.log(c) for c in capacities if c and c > 0]
    if len(caps) < MIN_RUNS:
        return None
    lats = [math.log(v) for v in latencies_us if v and v > 0]
    return Spread(
        _sd(caps),
        _sd(lats) if len(lats) >= MIN_RUNS else None,
        float(len(caps) - 1),
        "history",
        f"{len(caps)} earlier runs of the same configuration",
    )


def _sd(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def capacity_se_between(row: ReportRow) -> tuple[float, float] | None:
    """(SE, df) of a report row's capacity that include the between-run variance: a repeated row's own
    (reports/repeats.py), else the larger of its within-run SE and its host kind's noise floor; None for a
    single run with no floor (no basis to call it different from anything)."""
    if row.capacity_se is None or not row.capacity_rps:
        return None
    own = (float(row.capacity_se), float(row.capacity_df or 1))
    if int(row.runs or 1) >= 2:
        return own
    floor = floor_for(str(row.target))
    if floor is None or floor.sd_log_capacity is None:
        return None
    between = floor.sd_log_capacity * float(row.capacity_rps)
    return (between, floor.df) if between > own[0] else own
