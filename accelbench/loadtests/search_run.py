"""The SLO-capacity search run by a sweep: each round of loads the search plans (loadtests/search.py) is
measured and recorded as ordinary steps, and the document's ``search`` keeps every step's phase and, at the
end, the answer with its interval.

A round's loads go to the Locust child measuring the round before when they are of its kind (the child takes
further steps on its stdin, as for retries), so a concurrency search starts one child; a rate search starts
a second one for its Poisson rates after the closed-loop synchronous and saturation steps. A rerun keeps
the finished steps and their phases, and the search goes on from them (the search is a function of them).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from accelbench.documents import LatencyUs, Offered, ResultDocument, SearchResult, SearchStep, Step
from accelbench.errors import BadInputError
from accelbench.loadtests import results, search
from accelbench.loadtests.distributed import MasterBind
from accelbench.loadtests.profiles import LoadProfile, StepPlan

MAX_STEPS = 64  # a search that has not converged by then stops (its answer says so)
# A search has a time budget (--search-budget-s): each step it plans is given what is left, shared among
# the steps it may still need (bracketing, between, refinements), less its warm-up and STEP_OVERHEAD_S (the
# users' start, the drain of the requests in flight, the child's messages), at least MIN_STEP_S. A step so
# short may hold fewer requests than its p99 needs (662 for an early-stopping bound): the answer then says
# the interval its samples give. When the budget is spent, the search answers from what it measured.
STEP_OVERHEAD_S = 3.0
MIN_STEP_S = 2.0

Plans = list[StepPlan]
Measure = Callable[[str, Plans, Callable[[], Plans]], None]  # (closed | open, plans, more) -> None


def plan_of(profile: LoadProfile) -> search.Plan:
    s, w = profile.search, profile.workload
    if s is None or w is None:
        raise ValueError("not a search profile")
    objectives = search.Objectives(w.slo_ttft_p99_ms, w.slo_tpot_p99_ms)
    return search.Plan(s.mode, objectives, s.max_concurrency, s.between, s.refinements)


def _p99_ms(latency: LatencyUs | None) -> float | None:
    return latency.p99 / 1000 if latency is not None and latency.p99 is not None else None


def point_of(step: Step) -> search.Point:
    """A measured step as the search reads it: its TTFT and TPOT p99, throughput, errors, achieved rate."""
    offered = {k: float(v) for k, v in (step.offered.model_dump(exclude_none=True)).items()}
    g = step.generative
    achieved = step.requests / step.duration_s if step.requests and step.duration_s else None
    return search.Point(
        step.index,
        offered,
        _p99_ms(g.ttft_us) if g else None,
        _p99_ms(g.tpot_us) if g else None,
        float(step.throughput_rps or 0.0),
        float(step.error_rate or 0.0),
        achieved,
        finished=not step.aborted and g is not None and bool(g.requests),
    )


class SearchRun:
    """One search over ``doc``'s steps; ``measure`` measures plans of one kind, ``save`` writes the document."""

    def __init__(
        self,
        doc: ResultDocument,
        profile: LoadProfile,
        save: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.doc, self.plan, self.save = doc, plan_of(profile), save
        self.clock, self.started = clock, clock()
        self.budget_s = profile.search.budget_s if profile.search else 0.0
        self.warmup_s = profile.warmup_s
        self.planned_here = 0  # steps this run planned (a rerun's budget covers its own steps)
        w = profile.workload
        if doc.search is None or doc.search.mode != self.plan.mode:
            doc.search = SearchResult(
                mode=self.plan.mode,
                ttft_p99_ms=w.slo_ttft_p99_ms if w else None,
                tpot_p99_ms=w.slo_tpot_p99_ms if w else None,
                steps=[],
            )
        measured = {s.index for s in doc.steps}
        # a phase planned but never measured (a run cut short) is planned again
        doc.search.steps = [s for s in doc.search.steps if s.index in measured]

    def spent(self) -> bool:
        """The time budget is used up: no further step is planned."""
        return self.clock() - self.started >= self.budget_s

    def step_cap_s(self) -> float:
        """The next step's longest measured window: its share of the budget left (see MIN_STEP_S)."""
        left = self.budget_s - (self.clock() - self.started)
        most = 2 + self.plan.between + self.plan.refinements
        steps_left = max(1, most - self.planned_here)
        return round(max(MIN_STEP_S, left / steps_left - self.warmup_s - STEP_OVERHEAD_S), 1)

    def phases(self) -> dict[int, str]:
        return {s.index: s.phase for s in self.doc.search.steps} if self.doc.search else {}

    def _next(self) -> list[search.Load]:
        points = [point_of(s) for s in self.doc.steps]
        if len(points) >= MAX_STEPS:
            return []
        return search.next_loads(self.plan, points, self.phases())

    def _plans(self, loads: list[search.Load]) -> Plans:
        """Plans for ``loads`` under fresh step indexes; their phases are recorded at once."""
        search_doc = self.doc.search
        assert search_doc is not None
        start = max([s.index for s in self.doc.steps] + [s.index for s in search_doc.steps] + [-1]) + 1
        out = []
        for i, (offered, phase) in enumerate(loads):
            cap = self.step_cap_s()
            self.planned_here += 1
            if "concurrency" in offered:
                out.append(StepPlan(start + i, concurrency=int(offered["concurrency"]), max_duration_s=cap))
            else:
                out.append(StepPlan(start + i, rate_rps=float(offered["rate_rps"]), max_duration_s=cap))
            search_doc.steps.append(SearchStep(index=start + i, phase=phase))
        self.save()
        return out

    def run(self, measure: Measure, stopped: Callable[[], bool]) -> None:
        """Measure round after round until the search is done (or ``stopped``), then record the answer."""
        while not stopped() and not self.spent():
            loads = self._next()
            if not loads:
                break
            kind = _kind(loads[0])
            before = len(self.doc.steps)

            def more(kind: str = kind) -> Plans:  # the same child goes on while the loads are of its kind
                nxt = [] if stopped() or self.spent() else self._next()
                return self._plans(nxt) if nxt and all(_kind(x) == kind for x in nxt) else []

            measure(kind, self._plans([x for x in loads if _kind(x) == kind]), more)
            if len(self.doc.steps) == before:
                break  # nothing measured: the caller has the reason
        self.finish(complete=not stopped())

    def finish(self, complete: bool) -> None:
        points = [point_of(s) for s in self.doc.steps]
        got = search.answer(self.plan, points, self.phases())
        doc = self.doc.search
        assert doc is not None
        key = "concurrency" if self.plan.mode == "concurrency" else "rate_rps"

        def offered(level: float | None) -> Offered | None:
            if level is None:
                return None
            return Offered.model_validate({key: int(level) if key == "concurrency" else level})

        for s in doc.steps:
            s.met = got.met.get(s.index)
        doc.answer, doc.above, doc.answer_step = offered(got.level), offered(got.above), got.step
        notes = [got.reason, *self._evidence(got)]
        if self.spent() and self._next():
            notes.append(f"the search's time budget of {self.budget_s:g} s ran out before it converged")
        doc.reason, doc.complete = "; ".join(n for n in notes if n), complete
        self.save()

    def _evidence(self, got: search.Answer) -> list[str]:
        """The TTFT p99 of the answer's step and of the step above it, each with the 95 % interval its own
        requests give, and whether they were fewer than a bounded p99 needs."""
        by_index = {s.index: s for s in self.doc.steps}
        above = next(
            (s for s in self.doc.steps if got.above is not None and point_of(s).level == got.above), None
        )
        out = []
        for step in (by_index.get(got.step) if got.step is not None else None, above):
            line = ttft_p99_evidence(step) if step is not None else None
            if line:
                out.append(line)
        return out


def ttft_p99_evidence(step: Step) -> str | None:
    """``at concurrency 4: TTFT p99 71.0 ms (95 % 65.2-∞ ms, 180 requests; a bounded p99 needs 662)``."""
    g = step.generative
    interval = ((g.intervals or {}).get("ttft_us") or {}).get("p99") if g else None
    if g is None or interval is None or interval.value is None:
        return None
    floor = (g.sample_floors or {}).get("ttft_us")

    def ms(us: float | None) -> str:
        return "∞" if us is None else f"{us / 1000:.1f}"

    short = f"; a bounded p99 needs {floor}" if floor and (g.requests or 0) < floor else ""
    label = ", ".join(f"{k} {v:g}" for k, v in step.offered.model_dump(exclude_none=True).items())
    return (
        f"at {label}: TTFT p99 {ms(interval.value)} ms (95 % interval {ms(interval.low)}-{ms(interval.high)} ms "
        f"from {g.requests} requests{short})"
    )


def _kind(load: search.Load) -> str:
    return "closed" if "concurrency" in load[0] else "open"


class Load(Protocol):
    """What the sweep's load driver (sweep._Load, a dataclass) offers a search."""

    doc: ResultDocument
    path: Path
    profile: LoadProfile

    @property
    def bind(self) -> MasterBind | None: ...

    def measure(self, plans: Plans, retry_rounds: int, more: Callable[[], Plans] | None = None) -> None: ...


def drive(load: Load, was_complete: bool, stopped: Callable[[], bool]) -> None:
    """The SLO-capacity search of a sweep: a closed-loop child for concurrencies (and a rate search's
    bracketing steps), an open-loop one for rates; each goes on through the child's stdin."""
    search_plan = load.profile.search
    if load.bind is not None and search_plan is not None and search_plan.mode == "rate":
        raise BadInputError(
            "a rate search measures in two load children, and workers on other hosts serve one: "
            "use --search concurrency, or local --processes"
        )
    run = SearchRun(load.doc, load.profile, lambda: results.save(load.doc, load.path))
    if was_complete:
        return

    def measure(kind: str, plans: Plans, more: Callable[[], Plans]) -> None:
        own = (
            load.profile
            if kind == load.profile.kind
            else dataclasses.replace(load.profile, kind=kind, search=None)
        )
        # load is sweep._Load, a dataclass, which a Protocol cannot say
        dataclasses.replace(load, profile=own).measure(plans, retry_rounds=0, more=more)  # type: ignore[type-var]  # see above

    run.run(measure, stopped)
