"""Repeated runs (``--repeats N``): one capacity from N result documents of the same sweep. Pure.

Documents of one (model, precision, target) whose load profiles agree except for ``repeat`` are repeats of
one another. Each run's capacity at the SLO is found on its own steps (reports/capacity.py); the runs that
meet the SLO are then combined by ``statistics.combine_runs``: their mean, with the between-run standard
error s/√R (df R − 1) when it exceeds the pooled within-run one (Kalibera & Jones 2013: the level that
varies most). The step shown beside the capacity (latency, verdict, offered load) is the run closest to the
mean: a measured step, not an average of steps. With no repeats this module changes nothing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace

from scipy import stats

from accelbench.documents import ResultDocument, to_dict
from accelbench.loadtests.statistics import combine_runs
from accelbench.reports.capacity import Capacity, capacity_at_slo
from accelbench.reports.groups import Group, Result

MIN_RUNS = 3  # fewer runs estimate the between-run variance poorly (Kalibera & Jones; STATISTICS.md)


@dataclass(frozen=True)
class Combined:
    capacity: Capacity
    runs: int  # documents combined into this capacity
    note: str  # one line for the report's note column


def repeat_key(doc: ResultDocument) -> tuple[str, str]:
    """What repeats of one sweep share: the variant and the load profile without its ``repeat``."""
    profile = {k: v for k, v in to_dict(doc.load_profile).items() if k != "repeat"}
    return doc.variant or doc.run_id, json.dumps(profile, sort_keys=True, default=str)


def repeat_sets(results: list[Result]) -> list[list[Result]]:
    """The group's results split into sets of repeats (a set of one: a single run), in a fixed order."""
    sets: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        sets.setdefault(repeat_key(r.doc), []).append(r)
    return [
        sorted(s, key=lambda r: (int(r.doc.load_profile.repeat or 1), r.doc.run_id, r.sha256))
        for _, s in sorted(sets.items())
    ]


def _repeated(results: list[Result]) -> bool:
    """A set is repeats only when a document says so (``repeat`` ≥ 2): the same sweep written by two hosts
    without ``--repeats`` stays pooled, its best step chosen, as before repeats existed."""
    return any(int(r.doc.load_profile.repeat or 1) > 1 for r in results)


def combine_repeats(group: Group, slo_us: float, percentile: str, max_error_rate: float) -> Combined | None:
    """The group's capacity from its repeated runs, or None when no sweep in it was repeated (then the
    caller pools the steps as before). Several sweeps (e.g. closed and open loop): the highest capacity."""
    sets = repeat_sets(group.results)
    if not any(len(s) > 1 and _repeated(s) for s in sets):
        return None
    found = [_combine(group, s, slo_us, percentile, max_error_rate) for s in sets]
    return max(found, key=lambda c: (c.capacity.capacity_rps or -1.0, -c.runs))


def _combine(
    group: Group, runs: list[Result], slo_us: float, percentile: str, max_error_rate: float
) -> Combined:
    if not _repeated(runs):  # a single run, or one sweep from several hosts: its steps pooled
        pooled = [(group.label(r), s) for r in runs for s in r.doc.steps]
        return Combined(capacity_at_slo(pooled, slo_us, percentile, max_error_rate), 1, "")
    caps = [
        capacity_at_slo([(group.label(r), s) for s in r.doc.steps], slo_us, percentile, max_error_rate)
        for r in runs
    ]
    total = len(caps)
    met = [(c, c.capacity_rps) for c in caps if c.capacity_rps is not None]  # the runs that meet the SLO
    if not met:
        return Combined(caps[0], total, f"none of {total} runs meets the SLO")
    mean, se, df = combine_runs(
        [rps for _, rps in met],
        [c.capacity_se or 0.0 for c, _ in met],
        [int(c.capacity_df or 0) for c, _ in met],
    )
    half = float(stats.t.ppf(0.975, df)) * se if math.isfinite(df) and df > 0 and math.isfinite(se) else None
    shown = min(met, key=lambda m: (abs(m[1] - mean), m[0].step_key))[0]
    ips = [c.capacity_ips for c, _ in met if c.capacity_ips is not None]
    cap = replace(
        shown,
        capacity_rps=mean,
        capacity_se=se,
        capacity_df=df,
        capacity_ips=sum(ips) / len(ips) if len(ips) == len(met) else None,
        capacity_low=mean - half if half is not None else None,
        capacity_high=mean + half if half is not None else None,
    )
    return Combined(cap, len(met), _note(len(met), total, df, len(met) - 1))


def _note(used: int, total: int, df: float, between_df: int) -> str:
    if used == 1:
        note = "1 run's capacity"
    else:
        level = (
            "between-run" if df == between_df else "within-run (the runs agree more closely than each step)"
        )
        note = f"mean of {used} runs, {level} variance"
    if used < total:
        note += f"; {total - used} of {total} runs have no usable PASS step and are left out"
    if used < MIN_RUNS:
        note += f"; fewer than {MIN_RUNS} runs: the between-run variance is poorly estimated"
    return note
