"""The generative rows of ``accelbench report --json`` (and of the service's report API, byte for byte).

The JSON table is one list. Classic rows come first, each with results.csv's columns (reports/rows.ReportRow),
as they always were. Generative rows follow, one per model × precision × target in generative.csv's order, each
a ``GenerativeJsonRow``: the marker ``"table": "generative"`` (classic rows have no ``table`` key), every
generative.csv column (reports/rows.TokenRow), the objectives the row was judged at (``slo_ttft_p99_ms``,
``slo_tpot_p99_ms``, ``slo_source``: as a classic row carries its ``slo_ms`` and ``percentile``), ``points``,
its frontier points as generative.json has them (llm_report.GenPoint), and ``tp_options``: for a projected row
every tensor-parallel degree that fits with its capacity (llm_projected.TpOption.summary; the row's ``tp`` is the
one chosen).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from accelbench.reports.llm_report import GenerativeReport, GenPoint, token_row
from accelbench.reports.rows import TokenRow

GENERATIVE_TABLE: Literal["generative"] = "generative"  # the marker of a generative row in the JSON table


@dataclass(frozen=True)
class GenerativeJsonRow:
    """One generative row of the JSON table: its generative.csv row, its objectives and its frontier points."""

    row: TokenRow
    slo_ttft_p99_ms: float  # the TTFT p99 objective the capacity was judged at
    slo_tpot_p99_ms: float  # the TPOT p99 objective
    slo_source: str  # where the objectives came from (the options, the workload, MLPerf's defaults)
    points: tuple[GenPoint, ...]
    tp_options: tuple[
        dict[str, Any], ...
    ] = ()  # a projected row: every TP degree that fits, and its capacity
    table: Literal["generative"] = GENERATIVE_TABLE

    def as_json(self) -> dict[str, Any]:
        """The row as the JSON table has it (plain values; ``points`` in the row's order)."""
        return {
            "table": self.table,
            **self.row.as_columns(),
            "slo_ttft_p99_ms": self.slo_ttft_p99_ms,
            "slo_tpot_p99_ms": self.slo_tpot_p99_ms,
            "slo_source": self.slo_source,
            "points": [p.to_dict() for p in self.points],
            "tp_options": list(self.tp_options),
        }


def generative_rows(gen: GenerativeReport | None) -> list[GenerativeJsonRow]:
    """The report's generative rows (none when no result is generative), in generative.csv's order."""
    if gen is None:
        return []
    return [
        GenerativeJsonRow(
            token_row(r, gen.price_basis, gen.min_tokens_per_user),
            gen.ttft_ms,
            gen.tpot_ms,
            gen.objective_source,
            tuple(r.points),
            r.tp_options,
        )
        for r in gen.rows
    ]


def json_table(classic: list[dict[str, Any]], gen: GenerativeReport | None) -> list[dict[str, Any]]:
    """The whole JSON table: the classic flat rows, then the generative rows."""
    return [*classic, *(r.as_json() for r in generative_rows(gen))]
