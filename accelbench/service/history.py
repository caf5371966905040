"""The history of one (model, target, precision): each stored run at the report's SLO, oldest first, and
whether it moved beyond the run-to-run variation from the run before of the same load profile:
``accelbench report --compare``'s rule (``accelbench.reports.compare.judge_change``), called, not copied,
with the between-run variance from the earlier runs of that load (``reports.noise.history_spread``, at least
three), else the host kind's noise floor, else "inconclusive: single runs". Runs without step statistics
(imports, older results) are listed but not judged."""

from __future__ import annotations

from typing import Any

from accelbench.errors import BadInputError
from accelbench.service import queries
from accelbench.service.errors import ApiError
from accelbench.service.models import aware
from accelbench.service.views import Reports, problem_line


def _change(old: float | None, new: float | None) -> float | None:
    return None if old is None or new is None or old == 0 else (new - old) / old


# per-run figures kept per app, as many as parsed documents (a run's figures depend on its document and options)
RUNS_KEPT = 20_000


def history(
    reports: Reports, session: Any, options: Any, model: str, target: str, precision: str
) -> dict[str, Any]:
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
    points: list[dict[str, Any]] = []
    earlier: dict[str, list[dict[str, Any]]] = {}  # measured rows so far, per load profile
    for row in rows:
        doc = docs[row.id]
        figures = reports.memo("history run", (row.content_hash, repr(options), target),
                               lambda doc=doc: _run_figures(doc, reports.catalog, options, model, target),
                               keep=RUNS_KEPT)  # fmt: skip
        if figures is None:  # one run the report cannot take is left out (logged when it was built)
            continue
        kind, measured = figures
        if kind == "generative":  # a generative run: TTFT, TPOT and tokens/s
            points.append({**queries.summary(row), "host_label": row.host_label, **measured})
            continue
        point = {
            **queries.summary(row), "host_label": row.host_label,
            "capacity_rps": measured["capacity_rps"], "latency_us": measured["latency_us"],
            "capacity_low": measured.get("capacity_low"), "capacity_high": measured.get("capacity_high"),
            "latency_low_us": measured.get("latency_low_us"), "latency_high_us": measured.get("latency_high_us"),
            "meets_slo": measured["meets_slo"], "cost_per_million_usd": measured["cost_per_million_usd"],
            "reason": measured["reason"], "change": None,
        }  # fmt: skip
        load = repeat_key(doc)[1]
        before = earlier.setdefault(load, [])
        if before:  # the --compare rule on the two rows, called, not copied
            previous = before[-1]
            spread = history_spread([r["capacity_rps"] for r in before], [r["latency_us"] for r in before])
            verdict = judge_change(previous, measured, percentile_key(options.percentile), spread)
            point["change"] = {"capacity_change": _change(previous["capacity_rps"], measured["capacity_rps"]),
                               "latency_change": _change(previous["latency_us"], measured["latency_us"]),
                               **verdict}  # fmt: skip
        points.append(point)
        before.append(measured)
    return {"model": model, "target": target, "precision": precision, "rule": RULE,
            "slo_ms": options.slo_ms, "percentile": options.percentile, "runs": points}  # fmt: skip


def _run_figures(doc: Any, catalog: Any, options: Any, model: str, target: str) -> tuple[str, Any] | None:
    """("measured", its report row) or ("generative", its point) of one run alone; None when the report cannot
    take it (logged); BadInputError (a bad option) is the history's 422."""
    from accelbench.reports.build import build_report

    try:
        data = build_report([doc], catalog, options)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None
    except Exception as err:  # noqa: BLE001 - one run the report cannot take is left out, logged
        problem_line(err, model)
        return None
    measured = next((r for r in data.rows if r["target"] == target and r["status"] == "measured"), None)
    if measured is None and data.generative is not None:
        gen = _generative_point(data.generative, target)
        return ("generative", gen) if gen is not None else None
    return ("measured", measured) if measured is not None else None  # None: cannot happen for a stored row


def _generative_point(gen: Any, target: str) -> dict[str, Any] | None:
    """One generative run's figures at the objective (its fastest step when none meets it)."""
    row = next((r for r in gen.rows if r.target == target and r.status == "measured"), None)
    if row is None or not row.points:
        return None
    p = row.capacity or max(row.points, key=lambda q: q.output_tps)
    return {"capacity_rps": None, "latency_us": None, "meets_slo": row.capacity is not None,
            "cost_per_million_usd": None, "reason": row.reason, "change": None,
            "generative": {"output_tokens_per_s": p.output_tps, "ttft_p99_ms": p.ttft_p99_ms,
                           "tpot_p99_ms": p.tpot_p99_ms, "tokens_per_s_per_user": p.tokens_per_user,
                           "concurrency": p.concurrency, "usd_per_million_output_tokens": row.cost(gen.price_basis),
                           "ttft_objective_ms": gen.ttft_ms, "tpot_objective_ms": gen.tpot_ms}}  # fmt: skip
