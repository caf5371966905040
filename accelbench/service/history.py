"""The history of one (model, target, precision): each stored run at the report's SLO, oldest first, and
whether it moved beyond the run-to-run variation from the run before of the same load profile:
``accelbench report --compare``'s rule (``accelbench.reports.compare.judge_change``), called, not copied,
with the between-run variance from the earlier runs of that load (``reports.noise.history_spread``, at least
three), else the host kind's noise floor, else "inconclusive: single runs". Runs without step statistics
(imports, older results) are listed but not judged."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial
from typing import TYPE_CHECKING

from accelbench import answers
from accelbench.answers import GenerativeFigures, ResultSummary
from accelbench.documents import ResultDocument
from accelbench.errors import BadInputError
from accelbench.reports.options import ReportOptions
from accelbench.reports.rows import ReportRow
from accelbench.service import queries
from accelbench.service.build_process import problem_line
from accelbench.service.errors import ApiError
from accelbench.service.models import aware
from accelbench.service.report_cache import Reports

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from accelbench.hardware.catalog import Catalog
    from accelbench.reports.compare import Judgement
    from accelbench.reports.llm_report import GenerativeReport


def _change(old: float | None, new: float | None) -> float | None:
    return None if old is None or new is None or old == 0 else (new - old) / old


@dataclass(frozen=True)
class Change:
    """How a run moved from the run before of the same load: relative changes and the --compare judgement."""

    capacity_change: float | None  # (new - old) / old
    latency_change: float | None
    judgement: Judgement

    def answer(self) -> answers.Change:
        return answers.Change.model_validate(
            {
                "capacity_change": self.capacity_change,
                "latency_change": self.latency_change,
                **asdict(self.judgement),
            }
        )


@dataclass(frozen=True)
class HistoryRun:
    """One stored run of the series: its capacity at the SLO with the intervals, and the change from the run
    before of the same load (None for the first); a generative run has its token figures instead."""

    result: ResultSummary
    host_label: str | None
    capacity_rps: float | None = None
    latency_us: float | None = None
    capacity_low: float | None = None
    capacity_high: float | None = None
    latency_low_us: float | None = None
    latency_high_us: float | None = None
    meets_slo: bool = False
    cost_per_million_usd: float | None = None
    reason: str = ""
    change: Change | None = None
    generative: GenerativeFigures | None = None

    @classmethod
    def measured(
        cls, result: ResultSummary, host_label: str | None, row: ReportRow, change: Change | None
    ) -> HistoryRun:
        return cls(
            result,
            host_label,
            capacity_rps=row.capacity_rps,
            latency_us=row.latency_us,
            capacity_low=row.capacity_low,
            capacity_high=row.capacity_high,
            latency_low_us=row.latency_low_us,
            latency_high_us=row.latency_high_us,
            meets_slo=row.meets_slo,
            cost_per_million_usd=row.cost_per_million_usd,
            reason=row.reason,
            change=change,
        )

    @property
    def label(self) -> str:
        """When it was measured, to the minute (the trend plot's axis)."""
        return (self.result.created_at or self.result.received_at or "")[:16].replace("T", " ")

    @property
    def regression(self) -> bool:
        return self.change is not None and self.change.judgement.regression

    def answer(self) -> answers.HistoryRun:
        return answers.HistoryRun(
            **dict(self.result),
            host_label=self.host_label,
            capacity_rps=self.capacity_rps,
            latency_us=self.latency_us,
            capacity_low=self.capacity_low,
            capacity_high=self.capacity_high,
            latency_low_us=self.latency_low_us,
            latency_high_us=self.latency_high_us,
            meets_slo=self.meets_slo,
            cost_per_million_usd=self.cost_per_million_usd,
            reason=self.reason,
            change=self.change.answer() if self.change else None,
            generative=self.generative,
        )


@dataclass(frozen=True)
class History:
    model: str
    target: str
    precision: str
    rule: str  # the --compare rule, in words
    slo_ms: float
    percentile: str
    runs: list[HistoryRun]  # oldest first

    def answer(self) -> answers.History:
        """What ``GET /api/v1/history`` answers."""
        return answers.History(
            model=self.model,
            target=self.target,
            precision=self.precision,
            rule=self.rule,
            slo_ms=self.slo_ms,
            percentile=self.percentile,
            runs=[run.answer() for run in self.runs],
        )


# per-run figures kept per app, as many as parsed documents (a run's figures depend on its document and options)
RUNS_KEPT = 20_000


def history(
    reports: Reports, session: Session, options: ReportOptions, model: str, target: str, precision: str
) -> History:
    """The runs of one series with their capacity at the SLO and, from the second run of a load on, the change
    from the run before. A run's figures come from a report over that run alone, built once per app and
    options (``reports.memo``): after a push only the new run is built."""
    from accelbench.reports.capacity import percentile_key
    from accelbench.reports.compare import RULE, judge_change
    from accelbench.reports.noise import history_spread
    from accelbench.reports.repeats import repeat_key

    rows = queries.stored_rows(session, model=model, target=target, precision=precision)
    if not rows:
        raise ApiError(404, f"no results stored for {model} on {target} at {precision}")
    rows.sort(key=lambda r: (aware(r.created_at) or aware(r.received_at), r.id))
    docs = dict(zip((r.id for r in rows), reports.documents(session, rows), strict=True))
    runs: list[HistoryRun] = []
    earlier: dict[str, list[ReportRow]] = {}  # measured rows so far, per load profile
    for row in rows:
        doc = docs[row.id]
        figures = reports.memo(
            "history run",
            (row.content_hash, repr(options), target),
            partial(_run_figures, doc, reports.catalog, options, model, target),
            keep=RUNS_KEPT,
        )
        if figures is None:  # one run the report cannot take is left out (logged when it was built)
            continue
        if isinstance(figures, GenerativeFigures):  # a generative run: TTFT, TPOT and tokens/s
            runs.append(
                HistoryRun(
                    queries.summary(row),
                    row.host_label,
                    meets_slo=figures.meets_objective,
                    reason=figures.reason,
                    generative=figures,
                )
            )
            continue
        change = None
        before = earlier.setdefault(repeat_key(doc)[1], [])
        if before:  # the --compare rule on the two rows, called, not copied
            previous = before[-1]
            spread = history_spread([r.capacity_rps for r in before], [r.latency_us for r in before])
            change = Change(
                _change(previous.capacity_rps, figures.capacity_rps),
                _change(previous.latency_us, figures.latency_us),
                judge_change(previous, figures, percentile_key(options.percentile), spread),
            )
        runs.append(HistoryRun.measured(queries.summary(row), row.host_label, figures, change))
        before.append(figures)
    return History(model, target, precision, RULE, options.slo_ms, options.percentile, runs)


def _run_figures(
    doc: ResultDocument, catalog: Catalog, options: ReportOptions, model: str, target: str
) -> ReportRow | GenerativeFigures | None:
    """The measured report row, or the generative figures, of one run alone; None when the report cannot take
    it (logged); BadInputError (a bad option) is the history's 422."""
    from accelbench.reports.build import build_report

    try:
        data = build_report([doc], catalog, options)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None
    except Exception as err:  # noqa: BLE001 - one run the report cannot take is left out, logged
        problem_line(err, model)
        return None
    measured = next((r for r in data.rows if r.target == target and r.status == "measured"), None)
    if measured is None and data.generative is not None:
        return _generative_figures(data.generative, target)
    return measured  # None: cannot happen for a stored row


def _generative_figures(gen: GenerativeReport, target: str) -> GenerativeFigures | None:
    """One generative run's figures at the objective (its fastest step when none meets it)."""
    row = next((r for r in gen.rows if r.target == target and r.status == "measured"), None)
    if row is None or not row.points:
        return None
    p = row.capacity or max(row.points, key=lambda q: q.output_tps)
    return GenerativeFigures(
        output_tokens_per_s=p.output_tps,
        ttft_p99_ms=p.ttft_p99_ms,
        tpot_p99_ms=p.tpot_p99_ms,
        tokens_per_s_per_user=p.tokens_per_user,
        concurrency=p.concurrency,
        usd_per_million_output_tokens=row.cost(gen.price_basis),
        ttft_objective_ms=gen.ttft_ms,
        tpot_objective_ms=gen.tpot_ms,
        meets_objective=row.capacity is not None,
        reason=row.reason,
    )
