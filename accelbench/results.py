"""Results as pandas DataFrames, for a notebook: ``frames(PATHS)`` → the measured steps, the report's rows and
the generative points, with typed columns and the unit in each column's name.

    >>> from accelbench.results import frames
    >>> f = frames(["accelbench-results/results"])
    >>> f.rows.sort_values("cost_per_million_usd")[["model", "target", "status", "cost_per_million_usd"]]

- ``steps``: one row per measured load step of every result document (the steps each report row was chosen from);
- ``rows``: one row per model × precision × target, the columns of the report's results.csv/results.parquet
  (``read_rows`` reads those files back into the same frame);
- ``generative``: one row per point of each generative row's frontier (measured steps and projected points).

pandas is an optional extra (``pip install accelbench[pandas]``); the rest of accelbench does not import it.
A composition root above the stages, like the CLI: it loads documents from folders and builds the report's
table (reports/) the way ``accelbench report`` does, so a frame and the report never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.documents import ResultDocument, Step, to_dict
from accelbench.errors import ToolchainMissingError
from accelbench.hardware.catalog import Catalog, load_catalog
from accelbench.reports.build import build_report
from accelbench.reports.inputs import load_documents
from accelbench.reports.options import ReportOptions
from accelbench.reports.table import COLUMNS, flat_rows

if TYPE_CHECKING:
    import pandas as pd

    from accelbench.reports.llm_report import GenerativeReport

_DTYPES = {"str": "string", "float": "Float64", "int": "Int64", "bool": "boolean"}

# (column, kind) of the steps frame: the unit in each name
STEP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "str"),
    ("model", "str"),
    ("precision", "str"),
    ("target", "str"),
    ("origin", "str"),
    ("host", "str"),
    ("repeat", "int"),
    ("step", "int"),
    ("attempt", "int"),
    ("offered_concurrency", "int"),
    ("offered_rate_rps", "float"),
    ("offered_users", "int"),
    ("verdict", "str"),
    ("reasons", "str"),
    ("duration_s", "float"),
    ("requests", "int"),
    ("error_rate", "float"),
    ("throughput_rps", "float"),
    ("throughput_rps_low", "float"),
    ("throughput_rps_high", "float"),
    ("throughput_ips", "float"),
    ("latency_p50_us", "float"),
    ("latency_p90_us", "float"),
    ("latency_p95_us", "float"),
    ("latency_p99_us", "float"),
    ("latency_max_us", "float"),
    ("energy_per_request_j", "float"),
    ("ttft_p50_us", "float"),
    ("ttft_p99_us", "float"),
    ("tpot_p50_us", "float"),
    ("tpot_p99_us", "float"),
    ("itl_p50_us", "float"),
    ("itl_p99_us", "float"),
    ("output_tokens_per_s", "float"),
)

# (column, kind) of the generative frame: one frontier point of one row
POINT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("model", "str"),
    ("precision", "str"),
    ("target", "str"),
    ("status", "str"),
    ("isl_tokens", "int"),
    ("osl_tokens", "int"),
    ("run_id", "str"),
    ("step", "int"),
    ("concurrency", "float"),
    ("output_tokens_per_s", "float"),
    ("output_tokens_per_s_low", "float"),
    ("output_tokens_per_s_high", "float"),
    ("input_tokens_per_s", "float"),
    ("tokens_per_s_per_user", "float"),
    ("ttft_p99_ms", "float"),
    ("tpot_p99_ms", "float"),
    ("verdict", "str"),
    ("is_capacity", "bool"),
    ("usd_per_hour", "float"),
    ("usd_per_million_output_tokens", "float"),
)


@dataclass(frozen=True)
class Frames:
    steps: pd.DataFrame
    rows: pd.DataFrame
    generative: pd.DataFrame


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ToolchainMissingError(
            "pandas is not installed: pip install 'accelbench[pandas]' (or pip install pandas)"
        ) from None
    return pandas


def _frame(records: list[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """A frame of exactly ``columns``, each with its nullable pandas dtype, whether or not there are rows."""
    pd = _pandas()
    data = {name: pd.array([r.get(name) for r in records], dtype=_DTYPES[kind]) for name, kind in columns}
    return pd.DataFrame(data, columns=[name for name, _ in columns])


def frames(
    paths: Sequence[str | Path] | str | Path,
    options: ReportOptions | None = None,
    catalog: Catalog | str | Path | None = None,
) -> Frames:
    """The steps, the report's rows and the generative points of every result document under ``paths``
    (files or folders, as ``accelbench report`` takes them). ``options``: the report's (SLO, projections,
    prices; default ReportOptions()); ``catalog``: a Catalog or a user catalog file over the packaged one."""
    given = [paths] if isinstance(paths, (str, Path)) else list(paths)
    docs = load_documents([str(p) for p in given])
    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog)
    data = build_report(docs, cat, options or ReportOptions())
    return Frames(
        steps=steps_frame(docs),
        rows=_frame(flat_rows(data.rows), COLUMNS),
        generative=_frame(_points(data.generative), POINT_COLUMNS),
    )


def read_rows(path: str | Path) -> pd.DataFrame:
    """A report's results.parquet or results.csv as the ``rows`` frame: the same columns and dtypes."""
    pd = _pandas()
    path = Path(path)
    raw = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, keep_default_na=False)
    if path.suffix != ".parquet":  # CSV: an empty cell is a missing value
        raw = raw.replace("", None)
    return pd.DataFrame({name: raw[name].astype(_DTYPES[kind]) for name, kind in COLUMNS})


def steps_frame(documents: Sequence[ResultDocument]) -> pd.DataFrame:
    """One row per step of ``documents``, in document then step order."""
    return _frame([_step(doc, step) for doc in documents for step in doc.steps], STEP_COLUMNS)


def _step(doc: ResultDocument, step: Step) -> dict[str, Any]:
    thr = (step.statistics.throughput_rps if step.statistics else None) or None
    lat = step.latency_us
    gen = step.generative
    offered = to_dict(step.offered)
    record: dict[str, Any] = {
        "run_id": doc.run_id,
        "model": doc.model,
        "precision": doc.precision,
        "target": doc.target,
        "origin": doc.origin,
        "host": doc.provenance.host.get("hostname"),
        "repeat": doc.load_profile.repeat,
        "step": step.index,
        "attempt": step.attempt or 1,
        "offered_concurrency": offered.get("concurrency"),
        "offered_rate_rps": offered.get("rate_rps"),
        "offered_users": offered.get("users"),
        "verdict": step.verdict,
        "reasons": "; ".join(step.reasons) or None,
        "duration_s": step.duration_s,
        "requests": step.requests,
        "error_rate": step.error_rate,
        "throughput_rps": step.throughput_rps,
        "throughput_rps_low": thr.low if thr else None,
        "throughput_rps_high": thr.high if thr else None,
        "throughput_ips": step.throughput_ips,
        "energy_per_request_j": step.energy_per_request_j,
    }
    for key in ("p50", "p90", "p95", "p99", "max"):
        record[f"latency_{key}_us"] = lat.at(key) if lat else None
    if gen is not None:
        for metric in ("ttft", "tpot", "itl"):
            values = getattr(gen, f"{metric}_us")
            for key in ("p50", "p99"):
                record[f"{metric}_{key}_us"] = values.at(key) if values else None
        rate = gen.output_tokens_per_s
        record["output_tokens_per_s"] = rate.value if rate else None
    return record


def _points(gen: GenerativeReport | None) -> list[dict[str, Any]]:
    if gen is None:
        return []
    out = []
    for r in gen.rows:
        quote = r.prices.get(gen.price_basis)
        for p in r.points:
            out.append(
                {
                    "model": r.model,
                    "precision": r.precision,
                    "target": r.target,
                    "status": r.status,
                    "isl_tokens": r.isl,
                    "osl_tokens": r.osl,
                    "run_id": p.run_id,
                    "step": p.step_index,
                    "concurrency": p.concurrency,
                    "output_tokens_per_s": p.output_tps,
                    "output_tokens_per_s_low": p.output_tps_low,
                    "output_tokens_per_s_high": p.output_tps_high,
                    "input_tokens_per_s": p.input_tps,
                    "tokens_per_s_per_user": p.tokens_per_user,
                    "ttft_p99_ms": p.ttft_p99_ms,
                    "tpot_p99_ms": p.tpot_p99_ms,
                    "verdict": p.verdict,
                    "is_capacity": p is r.capacity,
                    "usd_per_hour": quote.usd_per_hour if quote else None,
                    "usd_per_million_output_tokens": r.cost(gen.price_basis, "output", p.output_tps),
                }
            )
    return out
