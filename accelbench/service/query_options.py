"""The report's options as query parameters, shared by the JSON API and the pages: the names and defaults of
``accelbench report`` (the one definition both read, ``reports/options.py``), with the API's own HTTP bounds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import Query

from accelbench.errors import BadInputError
from accelbench.reports.cost import PRICE_BASES, parse_price_overrides
from accelbench.reports.options import DEFAULTS, ReportOptions, options_from
from accelbench.service.errors import ApiError

if TYPE_CHECKING:
    PriceBasis = str  # mypy reads no Literal made from a tuple; FastAPI checks the values at run time
else:
    PriceBasis = Literal[PRICE_BASES]


def report_options(
    slo_p99_ms: Annotated[
        float, Query(gt=0, le=1e7, allow_inf_nan=False, description="latency SLO, ms")
    ] = DEFAULTS.slo_ms,
    percentile: Annotated[str, Query(max_length=10, description="50 90 95 99 99.9")] = DEFAULTS.percentile,
    baseline: Annotated[
        str | None, Query(max_length=100, description="target id to compare against")
    ] = DEFAULTS.baseline,
    price_basis: PriceBasis = DEFAULTS.price_basis,
    price: Annotated[list[str], Query(description="ID=USD per accelerator-hour, repeatable")] = [],  # noqa: B006
    project: Annotated[list[str], Query(description="also project these target ids")] = [],  # noqa: B006
    target_qps: Annotated[float | None, Query(gt=0, le=1e9, allow_inf_nan=False)] = DEFAULTS.target_qps,
    headroom: Annotated[float, Query(ge=0, lt=1, allow_inf_nan=False)] = DEFAULTS.headroom,
    include_failed: bool = DEFAULTS.include_failed,
    max_error_rate: Annotated[float, Query(ge=0, le=1, allow_inf_nan=False)] = DEFAULTS.max_error_rate,
    amortization_years: Annotated[
        float | None, Query(gt=0, le=100, allow_inf_nan=False)
    ] = DEFAULTS.amortization_years,
    usd_per_kwh: Annotated[float, Query(ge=0, le=1e3, allow_inf_nan=False)] = DEFAULTS.usd_per_kwh,
    # generative results; strings so that an empty form field means "not set" (the default)
    slo_ttft_p99_ms: Annotated[
        str | None, Query(max_length=20, description="generative: a step's TTFT p99 objective, ms")
    ] = None,
    slo_tpot_p99_ms: Annotated[
        str | None, Query(max_length=20, description="generative: a step's TPOT p99 objective, ms")
    ] = None,
    slo_ttft_ms: Annotated[
        str | None, Query(max_length=20, deprecated=True, description="old spelling of slo_ttft_p99_ms")
    ] = None,
    slo_tpot_ms: Annotated[
        str | None, Query(max_length=20, deprecated=True, description="old spelling of slo_tpot_p99_ms")
    ] = None,
    min_tokens_per_user: Annotated[
        str | None, Query(max_length=20, description="generative: tokens/s per user")
    ] = None,
) -> ReportOptions:
    """The options of ``accelbench report`` as query parameters: the same names, and the defaults of the one
    definition both read (reports/options.py); the HTTP bounds are the API's own."""
    try:
        overrides = parse_price_overrides(tuple(price))
    except BadInputError as err:
        raise ApiError(422, f"field price: {err}") from None
    return options_from(
        {
            "slo_ms": slo_p99_ms,
            "percentile": percentile,
            "baseline": baseline,
            "price_basis": price_basis,
            "price_overrides": overrides,
            "target_qps": target_qps,
            "headroom": headroom,
            "project": project,
            "include_failed": include_failed,
            "max_error_rate": max_error_rate,
            "amortization_years": amortization_years,
            "usd_per_kwh": usd_per_kwh,
            "slo_ttft_p99_ms": _objective("slo_ttft_p99_ms", slo_ttft_p99_ms, "slo_ttft_ms", slo_ttft_ms),
            "slo_tpot_p99_ms": _objective("slo_tpot_p99_ms", slo_tpot_p99_ms, "slo_tpot_ms", slo_tpot_ms),
            "min_tokens_per_user": _positive("min_tokens_per_user", min_tokens_per_user),
        }
    )


def _objective(name: str, text: str | None, old_name: str, old_text: str | None) -> float | None:
    """An objective given by its name or by its deprecated spelling (not both, unless one is empty)."""
    value, old = _positive(name, text), _positive(old_name, old_text)
    if value is not None and old is not None:
        raise ApiError(422, f"field {old_name}: the old spelling of {name}; give one of them")
    return value if value is not None else old


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


def default_page_options() -> ReportOptions:
    """The options the report page has with no query (``report_options``' defaults)."""
    return report_options(price=[], project=[])
