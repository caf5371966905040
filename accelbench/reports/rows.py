"""The report's rows, typed: each column's name, type and unit in one place.

- ``ReportRow``: one per model × precision × target of the request-based report (reports/build.py); its column
  fields, in order, are results.csv, results.parquet and the ``--json`` table (reports/table.py), and every
  section and plot reads its attributes.
- ``TokenRow``: one per model × precision × target of generative.csv / generative.json (reports/llm_report.py).
- ``PlanRow`` and ``TokenPlanRow``: one line of the capacity plan in requests/s, and in output tokens/s.

A field made with ``column(kind, unit)`` is a table column (kind: str, float, int or bool: the CSV/Parquet type),
in the order the fields are declared; one made with ``extra()`` is carried for the sections only. Rows are frozen:
a stage that adds figures (prices, ratios, ranks) returns a new row with ``dataclasses.replace``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

_NO_DEFAULT: Any = object()


def column(kind: str, unit: str = "", default: Any = None) -> Any:
    """A table column of type ``kind`` (str, float, int, bool), ``unit`` as read by people ("" for text)."""
    meta = {"kind": kind, "unit": unit}
    return field(metadata=meta) if default is _NO_DEFAULT else field(default=default, metadata=meta)


def key(kind: str = "str") -> Any:
    """A column every row has (no default): what identifies the row."""
    return column(kind, default=_NO_DEFAULT)


def extra(default: Any = None) -> Any:
    """A field the sections read that is not a table column."""
    return field(default=default)


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # str | float | int | bool
    unit: str


def columns_of(cls: type) -> tuple[Column, ...]:
    """The table columns of a row class, in declaration order."""
    return tuple(
        Column(f.name, f.metadata["kind"], f.metadata["unit"]) for f in fields(cls) if "kind" in f.metadata
    )


USD_PER_MILLION_REQUESTS = "USD per 10⁶ requests"


@dataclass(frozen=True)
class ReportRow:
    """One model × precision × target: measured (from result documents) or projected (roofline × efficiency)."""

    model: str = key()
    precision: str = key()
    target: str = key()  # catalog id
    target_name: str = key()
    toolchain: str = key()
    status: str = key()  # measured | projected
    variant: str = key()
    origin: str | None = column("str")  # the documents' origins, comma-separated; "roofline-projection"
    rank: int | None = column("int", "rank by cost per million requests, 1 = cheapest")
    ranked: bool = column(
        "bool", default=False
    )  # priced, meets the SLO, accuracy not FAIL (or --include-failed)
    meets_slo: bool = column("bool", default=False)
    capacity_rps: float | None = column("float", "requests/s")  # at the SLO
    capacity_ips: float | None = column("float", "inferences/s")
    latency_us: float | None = column("float", "µs")  # the percentile at capacity
    latency_resolution_us: float | None = column("float", "µs")  # bucketed imports (Locust): > 1
    percentile: str = column("str", default="p99")  # the SLO's percentile key
    slo_ms: float | None = column("float", "ms")
    usd_per_hour: float | None = column("float", "USD per accelerator-hour")
    price_basis: str | None = column("str")
    price_note: str | None = column("str")
    price_source: str | None = column("str")
    price_as_of: str | None = column("str", "date")
    cost_per_million_usd: float | None = column("float", USD_PER_MILLION_REQUESTS)
    energy_per_request_j: float | None = column("float", "J/request")
    baseline_target: str | None = column("str")
    baseline_status: str | None = column("str")
    capacity_vs_baseline: float | None = column("float", "ratio")
    latency_vs_baseline: float | None = column("float", "ratio")
    cost_vs_baseline: float | None = column("float", "ratio")
    accuracy_metric: str | None = column("str")
    accuracy_value: float | None = column("float", "the accuracy metric's own")
    accuracy_verdict: str | None = column("str")
    accuracy_of: str | None = column("str")  # the variant whose accuracy a projected row shows
    efficiency: float | None = column("float", "fraction of the roofline bound")
    efficiency_source: str | None = column("str")
    efficiency_kind: str | None = column("str")  # published | toolchain-median | measured | assumed
    efficiency_low: float | None = column("float", "fraction of the roofline bound")
    efficiency_high: float | None = column("float", "fraction of the roofline bound")
    calibration: str | None = column("str")
    projected_capacity_rps_low: float | None = column("float", "requests/s (projected range)")
    projected_capacity_rps_high: float | None = column("float", "requests/s (projected range)")
    projected_batch: int | None = column("int", "inferences per batch")
    served_batch: int | None = column("int", "inferences per batch")
    roofline_bound: str | None = column("str")  # compute | memory
    precision_used: str | None = column("str")
    chosen_run_id: str | None = column("str")
    chosen_step: int | None = column("int", "step index")
    offered: str | None = column("str")  # the offered load of the step that set the capacity
    batch_size: int | None = column("int", "inferences per request")
    host: str | None = column("str")
    measured_at: str | None = column("str", "ISO 8601")
    versions: str | None = column("str")
    sources: str | None = column("str")  # "<run_id>@<sha256[:12]>" per document, ";"-separated
    reason: str = column("str", default="")
    capacity_low: float | None = column("float", "requests/s (95 % interval)")
    capacity_high: float | None = column("float", "requests/s (95 % interval)")
    latency_low_us: float | None = column("float", "µs (95 % interval)")
    latency_high_us: float | None = column("float", "µs (95 % interval)")
    cost_low: float | None = column("float", USD_PER_MILLION_REQUESTS + " (95 % interval)")
    cost_high: float | None = column("float", USD_PER_MILLION_REQUESTS + " (95 % interval)")
    slo_verdict: str | None = column("str")  # PASS | FAIL | INCONCLUSIVE
    step_verdict: str | None = column("str")  # VALID | LOW-PRECISION | INVALID
    step_reasons: str | None = column("str")
    comparison: str | None = column("str")  # against the cheapest measured row of the model
    # for the sections and comparisons, not columns
    capacity_se: float | None = extra()  # requests/s
    capacity_df: float | None = extra()
    runs: int | None = extra()  # repeated runs combined into this row (reports/repeats.py); None: not repeats
    runs_note: str | None = extra()
    batching_note: str | None = extra()


REPORT_COLUMNS = columns_of(ReportRow)


@dataclass(frozen=True)
class PlanRow:
    """One line of the capacity plan for a request rate: whole accelerators, or MIG slices of one."""

    model: str
    precision: str
    target: str
    status: str
    unit: str  # "whole accelerator" | "MIG <profile>"
    capacity_rps: float  # per replica
    usd_per_hour: float  # per replica
    replicas: int
    gpus: int  # devices the replicas occupy
    monthly_usd: float


@dataclass(frozen=True)
class TokenRow:
    """One generative row as generative.csv and generative.json have it, on one price basis."""

    model: str = key()
    precision: str = key()
    target: str = key()
    status: str = key()  # measured | projected
    isl: int | None = column("int", "tokens")
    osl: int | None = column("int", "tokens")
    meets_objective: bool = column("bool", default=False)
    capacity_output_tokens_per_s: float | None = column("float", "output tokens/s per accelerator")
    capacity_output_tokens_per_s_low: float | None = column("float", "output tokens/s (95 % interval)")
    capacity_output_tokens_per_s_high: float | None = column("float", "output tokens/s (95 % interval)")
    capacity_tokens_per_s_per_user: float | None = column("float", "tokens/s per user")
    capacity_concurrency: float | None = column("float", "concurrent requests (projected: batch)")
    ttft_p99_ms: float | None = column("float", "ms")
    tpot_p99_ms: float | None = column("float", "ms")
    price_basis: str | None = column("str")
    usd_per_hour: float | None = column("float", "USD per accelerator-hour")
    usd_per_million_output_tokens: float | None = column("float", "USD per 10⁶ output tokens")
    usd_per_million_output_tokens_low: float | None = column("float", "USD per 10⁶ output tokens (95 %)")
    usd_per_million_output_tokens_high: float | None = column("float", "USD per 10⁶ output tokens (95 %)")
    usd_per_million_input_tokens: float | None = column("float", "USD per 10⁶ input tokens")
    usd_per_million_blended_tokens: float | None = column("float", "USD per 10⁶ input + output tokens")
    min_tokens_per_user: float | None = column("float", "tokens/s per user")
    answer_output_tokens_per_s: float | None = column("float", "output tokens/s per accelerator")
    answer_output_tokens_per_s_low: float | None = column("float", "output tokens/s (projected range)")
    answer_output_tokens_per_s_high: float | None = column("float", "output tokens/s (projected range)")
    answer_usd_per_million_output_tokens: float | None = column("float", "USD per 10⁶ output tokens")
    answer_usd_per_million_output_tokens_low: float | None = column(
        "float", "USD per 10⁶ output tokens (range)"
    )
    answer_usd_per_million_output_tokens_high: float | None = column(
        "float", "USD per 10⁶ output tokens (range)"
    )
    answer_how: str = column("str", default="")
    efficiency_source: str | None = column("str")
    weights_dtype: str | None = column("str")  # the serving recipe (hardware/llm_memory.ServingRecipe)
    kv_dtype: str | None = column("str")
    compute_dtype: str | None = column("str")
    kv_dtype_source: str | None = column("str")
    tp: int | None = column("int", "accelerators (tensor parallel)")
    max_batch: int | None = column("int", "sequences")
    reason: str = column("str", default="")
    # the output-token cost on every price basis (cost.PRICE_BASES)
    usd_per_million_output_tokens_on_demand: float | None = column("float", "USD per 10⁶ output tokens")
    usd_per_million_output_tokens_spot: float | None = column("float", "USD per 10⁶ output tokens")
    usd_per_million_output_tokens_reserved: float | None = column("float", "USD per 10⁶ output tokens")

    def as_columns(self) -> dict[str, Any]:
        """The row as generative.csv writes it: every column, in order, values as they are."""
        return {c.name: getattr(self, c.name) for c in TOKEN_COLUMNS}


TOKEN_COLUMNS = columns_of(TokenRow)


@dataclass(frozen=True)
class TokenPlanRow:
    """One line of the capacity plan for an output-token rate."""

    model: str
    target: str
    precision: str
    status: str
    capacity_tps: float  # output tokens/s per replica
    replicas: int
    usd_per_hour: float  # per replica
    monthly_usd: float
