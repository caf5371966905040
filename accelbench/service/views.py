"""Reports from stored documents: the same builder and renderers as ``accelbench report``, fed by the database.

The documents come out of the database exactly as pushed, so the JSON and the HTML the server renders are
byte-identical to what ``accelbench report`` renders from the result folders they were pushed from.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Annotated, Any, Literal

from fastapi import Query

from accelbench.errors import BadInputError
from accelbench.service import queries
from accelbench.service.errors import ApiError


def report_options(
    slo_p99_ms: Annotated[
        float, Query(gt=0, le=1e7, allow_inf_nan=False, description="latency SLO, ms")
    ] = 100.0,
    percentile: Annotated[str, Query(max_length=10, description="50 90 95 99 99.9")] = "99",
    baseline: Annotated[str | None, Query(max_length=100, description="target id to compare against")] = None,
    price_basis: Literal["on-demand", "spot", "reserved"] = "on-demand",
    price: Annotated[list[str], Query(description="ID=USD per accelerator-hour, repeatable")] = [],  # noqa: B006
    project: Annotated[list[str], Query(description="also project these target ids")] = [],  # noqa: B006
    target_qps: Annotated[float | None, Query(gt=0, le=1e9, allow_inf_nan=False)] = None,
    headroom: Annotated[float, Query(ge=0, lt=1, allow_inf_nan=False)] = 0.3,
    include_failed: bool = False,
    max_error_rate: Annotated[float, Query(ge=0, le=1, allow_inf_nan=False)] = 0.01,
    amortization_years: Annotated[float | None, Query(gt=0, le=100, allow_inf_nan=False)] = None,
    usd_per_kwh: Annotated[float, Query(ge=0, le=1e3, allow_inf_nan=False)] = 0.15,
    # generative results; strings so that an empty form field means "not set"
    slo_ttft_ms: Annotated[
        str | None, Query(max_length=20, description="generative: TTFT p99 objective, ms")
    ] = None,
    slo_tpot_ms: Annotated[
        str | None, Query(max_length=20, description="generative: TPOT p99 objective, ms")
    ] = None,
    min_tokens_per_user: Annotated[
        str | None, Query(max_length=20, description="generative: tokens/s per user")
    ] = None,
) -> Any:
    """The options of ``accelbench report`` as query parameters (same names, same defaults)."""
    from accelbench.reports.build import ReportOptions
    from accelbench.reports.cost import parse_price_overrides

    try:
        overrides = parse_price_overrides(tuple(price))
    except BadInputError as err:
        raise ApiError(422, f"field price: {err}") from None
    projected = tuple(v.strip() for item in project for v in item.split(",") if v.strip())
    return ReportOptions(
        slo_ms=slo_p99_ms, percentile=percentile, baseline=baseline or None, price_basis=price_basis,
        price_overrides=overrides, target_qps=target_qps, headroom=headroom, project=projected,
        include_failed=include_failed, max_error_rate=max_error_rate, amortization_years=amortization_years,
        usd_per_kwh=usd_per_kwh, slo_ttft_ms=_positive("slo_ttft_ms", slo_ttft_ms),
        slo_tpot_ms=_positive("slo_tpot_ms", slo_tpot_ms),
        min_tokens_per_user=_positive("min_tokens_per_user", min_tokens_per_user),
    )  # fmt: skip


def _positive(name: str, text: str | None) -> float | None:
    """An optional positive number from a query string; empty means not set, anything else is a 422."""
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 < value <= 1e7):
        raise ApiError(422, f"field {name}: must be a number in (0, 1e7], got {text!r}")
    return value


_PARSED: dict[str, Any] = {}  # content hash → ResultDocument; stored documents never change
_PARSED_MAX = 20000


def documents(rows: list[Any]) -> list[Any]:
    """Stored rows → ResultDocuments, parsed once per process (a document never changes once stored)."""
    from accelbench.documents import load_result

    out = []
    for row in rows:
        doc = _PARSED.get(row.content_hash)
        if doc is None:
            doc = load_result(json.loads(row.document), name=row.source)
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[row.content_hash] = doc
        out.append(doc)
    return out


_RENDERED: OrderedDict[tuple, Any] = OrderedDict()  # (query, what is stored) → RenderedReport
_RENDERED_MAX = 32
_LOCK = threading.Lock()


def render(
    session: Any, catalog: Any, options: Any, model: str | None = None, formats: tuple[str, ...] = ()
) -> Any:
    """``render_report`` over every stored result (or one model's): the function ``accelbench report`` calls.
    Unknown model → 404, a bad option (unknown target id, percentile) → 422.

    Results are only ever added, so (how many, the newest id) identifies what a report was built from: a
    rendered report is reused until a push changes that (a big history would otherwise make every page view
    rebuild the report and its plots; conbench#1616).
    """
    from accelbench.reports.report import render_report

    count, newest = queries.fingerprint(session, model)
    if not count:
        raise ApiError(404, f"no results stored for model {model!r}" if model else "no results stored yet")
    bind = session.get_bind()  # one process may serve several databases (tests): they must not share entries
    key = (str(bind.url), id(bind), model, repr(options), formats, count, newest, id(catalog))
    with _LOCK:
        if key in _RENDERED:
            _RENDERED.move_to_end(key)
            return _RENDERED[key]
    rows = queries.stored_rows(session, model=model)
    try:
        rendered = render_report(documents(rows), catalog, options, formats=formats)
    except BadInputError as err:
        raise ApiError(422, str(err)) from None
    with _LOCK:
        _RENDERED[key] = rendered
        while len(_RENDERED) > _RENDERED_MAX:
            _RENDERED.popitem(last=False)
    return rendered
