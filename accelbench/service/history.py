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


def _change(old: float | None, new: float | None) -> float | None:
    return None if old is None or new is None or old == 0 else (new - old) / old


def history(
    session: Any, catalog: Any, options: Any, model: str, target: str, precision: str
) -> dict[str, Any]:
    from accelbench.reports.build import build_report
    from accelbench.reports.capacity import percentile_key
    from accelbench.reports.compare import RULE, judge_change
    from accelbench.reports.noise import history_spread
    from accelbench.reports.repeats import repeat_key
    from accelbench.service.views import documents

    rows = queries.stored_rows(session, model=model, target=target, precision=precision)
    if not rows:
        raise ApiError(404, f"no results stored for {model} on {target} at {precision}")
    rows.sort(key=lambda r: (aware(r.created_at) or aware(r.received_at), r.id))
    points: list[dict[str, Any]] = []
    earlier: dict[str, list[dict[str, Any]]] = {}  # measured rows so far, per load profile
    for row in rows:
        try:
            data = build_report(documents([row]), catalog, options)
        except BadInputError as err:
            raise ApiError(422, str(err)) from None
        except Exception as err:  # noqa: BLE001 - one run the report cannot take is left out, logged
            from accelbench.service.views import problem_line

            problem_line(err, model)
            continue
        measured = next((r for r in data.rows if r["target"] == target and r["status"] == "measured"), None)
        if measured is None and data.generative is not None:  # a generative run: TTFT, TPOT and tokens/s
            gen = _generative_point(data.generative, target)
            if gen is not None:
                points.append({**queries.summary(row), **gen})
            continue
        if measured is None:  # cannot happen for a stored row of this target; never a 500 if it does
            continue
        point = {
            **queries.summary(row),
            "capacity_rps": measured["capacity_rps"], "latency_us": measured["latency_us"],
            "capacity_low": measured.get("capacity_low"), "capacity_high": measured.get("capacity_high"),
            "latency_low_us": measured.get("latency_low_us"), "latency_high_us": measured.get("latency_high_us"),
            "meets_slo": measured["meets_slo"], "cost_per_million_usd": measured["cost_per_million_usd"],
            "reason": measured["reason"], "change": None,
        }  # fmt: skip
        load = repeat_key(documents([row])[0])[1]
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
