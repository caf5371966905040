"""The flat table the report is made of: one row per model × precision × target; CSV, Parquet and JSON."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

# (column, type): the order of the CSV/Parquet columns; units are in the names.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("model", "str"), ("precision", "str"), ("target", "str"), ("target_name", "str"), ("toolchain", "str"),
    ("status", "str"), ("variant", "str"), ("origin", "str"), ("rank", "int"), ("ranked", "bool"),
    ("meets_slo", "bool"), ("capacity_rps", "float"), ("capacity_ips", "float"), ("latency_us", "float"), ("latency_resolution_us", "float"),
    ("percentile", "str"), ("slo_ms", "float"), ("usd_per_hour", "float"), ("price_basis", "str"),
    ("price_note", "str"), ("price_source", "str"), ("price_as_of", "str"), ("cost_per_million_usd", "float"),
    ("energy_per_request_j", "float"), ("baseline_target", "str"), ("baseline_status", "str"),
    ("capacity_vs_baseline", "float"), ("latency_vs_baseline", "float"), ("cost_vs_baseline", "float"),
    ("accuracy_metric", "str"), ("accuracy_value", "float"), ("accuracy_verdict", "str"), ("accuracy_of", "str"),
    ("efficiency", "float"), ("efficiency_source", "str"), ("efficiency_kind", "str"),
    ("efficiency_low", "float"), ("efficiency_high", "float"), ("calibration", "str"),
    ("projected_capacity_rps_low", "float"), ("projected_capacity_rps_high", "float"),
    ("projected_batch", "int"), ("served_batch", "int"),
    ("roofline_bound", "str"),
    ("precision_used", "str"), ("chosen_run_id", "str"), ("chosen_step", "int"), ("offered", "str"),
    ("batch_size", "int"), ("host", "str"), ("measured_at", "str"), ("versions", "str"), ("sources", "str"),
    ("reason", "str"),
    ("capacity_low", "float"), ("capacity_high", "float"), ("latency_low_us", "float"), ("latency_high_us", "float"),
    ("cost_low", "float"), ("cost_high", "float"), ("slo_verdict", "str"), ("step_verdict", "str"),
    ("step_reasons", "str"), ("comparison", "str"),
)  # fmt: skip
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)


def flat_rows(rows: list[dict[str, Any]], slo_ms: float, percentile: str) -> list[dict[str, Any]]:
    """The rows restricted to COLUMNS, in order, with the SLO settings on every row."""
    out = []
    for row in rows:
        full = {**row, "slo_ms": slo_ms, "percentile": percentile}
        out.append({name: _cast(full.get(name), kind) for name, kind in COLUMNS})
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
        writer.writerow(
            {k: ("" if v is None else repr(float(v)) if isinstance(v, float) else v) for k, v in row.items()}
        )
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
