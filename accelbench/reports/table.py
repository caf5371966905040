"""The flat table the report is made of: one row per model × precision × target; CSV, Parquet and JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from accelbench.reports.formatting import csv_cell
from accelbench.reports.rows import REPORT_COLUMNS, ReportRow

# (column, type): the order of the CSV/Parquet columns; names, types and units are ReportRow's (reports/rows.py).
COLUMNS: tuple[tuple[str, str], ...] = tuple((c.name, c.kind) for c in REPORT_COLUMNS)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)


def flat_rows(
    rows: Iterable[ReportRow], slo_ms: float | None = None, percentile: str | None = None
) -> list[dict[str, Any]]:
    """The rows' columns, in order, as the table's plain values (what CSV, Parquet and JSON are written from).

    A row carries the SLO it was built at; ``slo_ms`` and ``percentile``, when given, must be that SLO (callers
    that hold the options pass them, so a mismatch fails loudly instead of labelling a row with another SLO).
    """
    out = []
    for row in rows:
        if (slo_ms is not None and slo_ms != row.slo_ms) or (
            percentile is not None and percentile != row.percentile
        ):
            raise ValueError(
                f"row built at {row.percentile} ≤ {row.slo_ms} ms, asked to show {percentile} ≤ {slo_ms} ms"
            )
        out.append({name: _cast(getattr(row, name), kind) for name, kind in COLUMNS})
    return out


def _cast(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "float":
        return float(value)
    if kind == "int":
        return int(value)
    if kind == "bool":
        return bool(value)
    return str(value)


def to_csv_text(flat: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMN_NAMES, lineterminator="\n")
    writer.writeheader()
    for row in flat:
        writer.writerow({k: csv_cell(v) for k, v in row.items()})
    return buf.getvalue()


def to_json_text(flat: list[dict[str, Any]]) -> str:
    return json.dumps(flat, indent=2, sort_keys=True) + "\n"


def table_files(flat: list[dict[str, Any]]) -> dict[str, bytes]:
    """results.csv and results.parquet (explicit schema, no pandas metadata, so reruns are byte-identical)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"str": pa.string(), "float": pa.float64(), "int": pa.int64(), "bool": pa.bool_()}
    schema = pa.schema([(name, types[kind]) for name, kind in COLUMNS])
    table = pa.Table.from_pylist(flat, schema=schema)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    return {"results.csv": to_csv_text(flat).encode("utf-8"), "results.parquet": buf.getvalue()}
