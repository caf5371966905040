"""Turn results teams already have into accelbench result documents.

perf_analyzer ``-f FILE.csv`` (plain and ``--verbose-csv``; every latency in µs; columns as written by
perf_analyzer's report_writer.cc) and Locust's ``--csv`` ``*_stats.csv`` (latencies in ms, percentiles
bucketed: whole ms below 100 ms, 10 ms below 1 s, 100 ms below 10 s). Each imported step records
``latency_resolution_us`` so a reader knows how coarse its percentiles are.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from accelbench.documents import (
    Errors,
    ImportedFrom,
    LatencyUs,
    LoadProfile,
    Metrics,
    Offered,
    Provenance,
    ResultDocument,
    ServerInfo,
    ServerStats,
    Step,
    dump_json,
    to_dict,
)
from accelbench.errors import BadInputError
from accelbench.util import atomic_write_text, sha256_file, utc_now_iso

_PA_LATENCY = {"p50 latency": "p50", "p90 latency": "p90", "p95 latency": "p95", "p99 latency": "p99"}
_PA_SERVER = {
    "Server Queue": "queue_us",
    "Server Compute Input": "compute_input_us",
    "Server Compute Infer": "compute_infer_us",
    "Server Compute Output": "compute_output_us",
}
_LOCUST_PCT = {"50%": "p50", "90%": "p90", "95%": "p95", "99%": "p99", "99.9%": "p99.9"}


def _read_csv(path: str | Path, what: str) -> list[dict[str, str]]:
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise BadInputError(f"{what} CSV not found: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise BadInputError(f"cannot read {what} CSV {path}: {err}") from None
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows:
        raise BadInputError(f"{what} CSV {path} has no data rows")
    return rows


def _num(row: dict[str, str], column: str, path: str | Path) -> float:
    try:
        value = float(row[column])
    except (KeyError, TypeError, ValueError):
        raise BadInputError(f"{path}: column {column!r} missing or not a number") from None
    if not math.isfinite(value):
        raise BadInputError(f"{path}: column {column!r} is not finite")
    return value


def _gpu_power_w(cell: str | None) -> float | None:
    """perf_analyzer writes ``gpu-uuid:watts;`` per GPU; the sum is the power of the step."""
    if not cell:
        return None
    total = 0.0
    for part in cell.split(";"):
        if ":" in part:
            try:
                total += float(part.rsplit(":", 1)[1])
            except ValueError:
                return None
    return total or None


def _no_errors() -> Errors:
    return Errors(connection=0, timeout=0, server=0, wrong_output=0)


def _pa_step(index: int, row: dict[str, str], path: str | Path, batch_size: int) -> Step:
    if "Concurrency" in row:
        offered = Offered(concurrency=int(_num(row, "Concurrency", path)))
    elif "Request Rate" in row:
        offered = Offered(rate_rps=_num(row, "Request Rate", path))
    else:
        raise BadInputError(
            f"{path}: neither a Concurrency nor a Request Rate column; is this perf_analyzer -f output?"
        )
    ips = _num(row, "Inferences/Second", path)
    latency: dict[str, float | None] = {
        key: _num(row, col, path) for col, key in _PA_LATENCY.items() if row.get(col) not in (None, "")
    }
    if "p99" not in latency and "Avg latency" not in row:
        raise BadInputError(f"{path}: no latency columns (p50..p99 or Avg latency)")
    latency["mean"] = _num(row, "Avg latency", path) if row.get("Avg latency") else None
    server = {key: _num(row, col, path) for col, key in _PA_SERVER.items() if row.get(col) not in (None, "")}
    power_w = _gpu_power_w(row.get("Avg GPU Power Usage"))
    return Step(
        index=index,
        offered=offered,
        started_at=None,
        duration_s=None,
        requests=None,
        inferences=None,
        errors=_no_errors(),  # perf_analyzer stops at the first failed request, so a row it wrote had none
        error_rate=0.0,
        throughput_rps=ips / batch_size,
        throughput_ips=ips,
        latency_us=LatencyUs.model_validate(latency),
        latency_resolution_us=1.0,
        histogram=None,
        server_stats=ServerStats.model_validate(server) if server else None,
        metrics=Metrics(cpu_utilization=None, gpu_power_w=power_w, energy_j=None),
        energy_per_request_j=(power_w / (ips / batch_size)) if power_w and ips else None,
        verdict="VALID",
        reasons=[],
    )


def import_document(
    origin: str, model: str, target: str, precision: str, batch: int, src: Path, kind: str
) -> ResultDocument:
    """The result document of an imported file, without steps: what every importer (here and
    llm_importers) fills in."""
    command = f"accelbench import {origin.removesuffix('-import').replace('_', '-')} {src.name}"
    return ResultDocument(
        run_id=f"{model}__{target}__{precision}__{origin}-b{batch}",
        origin=origin,
        model=model,
        variant=f"{model}__{target}__{precision}",
        target=target,
        precision=precision,
        batch_size=batch,
        accuracy=None,
        graph_cost=None,
        # host, packages and command are the measuring run's, which the file does not record: left empty,
        # never filled in with the importing machine's; the import itself is named in the note
        provenance=Provenance(
            host={},
            packages={},
            manifest_hash="",
            repository_config="",
            server=ServerInfo(url="", version=""),
            created_at=utc_now_iso(),
            command=None,
            imported_from=ImportedFrom(file=src.name, sha256=sha256_file(src)),
            note=f"imported by `{command}`: the measuring host, its packages and command are not in the file",
        ),
        load_profile=LoadProfile(kind=kind, protocol=None, levels=[], duration_s=None),
        steps=[],
        complete=True,
    )


def import_perf_analyzer(
    csv_path: str | Path, target: str, model: str, precision: str = "fp32", batch_size: int = 1
) -> ResultDocument:
    """One result document from a perf_analyzer ``-f`` CSV; one step per row, ordered by offered load."""
    rows = _read_csv(csv_path, "perf_analyzer")
    steps = [_pa_step(0, row, csv_path, batch_size) for row in rows]
    steps.sort(key=lambda s: sorted(to_dict(s.offered).items()))
    for i, step in enumerate(steps):
        step.index = i
    closed = steps[0].offered.concurrency is not None
    doc = import_document(
        "perf_analyzer-import",
        model,
        target,
        precision,
        batch_size,
        Path(csv_path),
        "closed" if closed else "open",
    )
    # every row has the same columns, so every step has the level its first one has
    doc.load_profile.levels = [
        level for s in steps if (level := s.offered.concurrency if closed else s.offered.rate_rps) is not None
    ]
    doc.steps = steps
    return doc


def locust_resolution_us(latency_ms: float) -> float:
    """The bucket width Locust stored a latency in (locust.stats.bucket_response_time)."""
    if latency_ms < 100:
        return 1000.0
    if latency_ms < 1000:
        return 10_000.0
    if latency_ms < 10_000:
        return 100_000.0
    return 1_000_000.0


def import_locust(
    csv_path: str | Path,
    target: str,
    model: str,
    precision: str = "fp32",
    batch_size: int = 1,
    users: int | None = None,
) -> ResultDocument:
    """One single-step result document from a Locust ``*_stats.csv`` (its Aggregated row)."""
    rows = _read_csv(csv_path, "Locust stats")
    agg = [r for r in rows if r.get("Name") == "Aggregated"]
    if not agg:
        raise BadInputError(f"{csv_path}: no 'Aggregated' row; is this a Locust *_stats.csv?")
    row = agg[0]
    n_req = _num(row, "Request Count", csv_path)
    n_fail = _num(row, "Failure Count", csv_path)
    rps = _num(row, "Requests/s", csv_path)
    latency = {key: _num(row, col, csv_path) * 1000.0 for col, key in _LOCUST_PCT.items() if row.get(col)}
    latency["max"] = _num(row, "Max Response Time", csv_path) * 1000.0  # raw, not bucketed
    latency["mean"] = _num(row, "Average Response Time", csv_path) * 1000.0  # raw, not bucketed
    step = Step(
        index=0,
        offered=Offered(users=users),
        started_at=None,
        duration_s=(n_req / rps) if rps else None,
        requests=int(n_req),
        inferences=int(n_req) * batch_size,
        errors=Errors(connection=0, timeout=0, server=int(n_fail), wrong_output=0),
        error_rate=(n_fail / n_req) if n_req else 0.0,
        throughput_rps=rps,
        throughput_ips=rps * batch_size,
        latency_us=LatencyUs.model_validate(latency),
        latency_resolution_us=locust_resolution_us(latency.get("p99", 0.0) / 1000.0),
        histogram=None,
        server_stats=None,
        metrics=Metrics(cpu_utilization=None, gpu_power_w=None, energy_j=None),
        energy_per_request_j=None,
        verdict="VALID" if n_req > 0 else "INVALID",
        reasons=[] if n_req > 0 else ["no requests recorded"],
    )
    doc = import_document("locust-import", model, target, precision, batch_size, Path(csv_path), "closed")
    doc.load_profile.levels = [users] if users else []
    doc.provenance.note = "percentiles from Locust's bucketed histogram (whole ms below 100 ms); failures counted as server errors"
    doc.steps = [step]
    return doc


def write_imported(doc: ResultDocument, out_dir: str | Path) -> Path:
    """Write an imported document as ``<out>/<run_id>.json`` (atomically)."""
    path = Path(out_dir) / f"{doc.run_id}.json"
    atomic_write_text(path, dump_json(doc))
    return path
