"""Generative results measured elsewhere → accelbench result documents the report prices.

- ``aiperf``: NVIDIA AIPerf's ``profile_export_aiperf.json`` (one record per metric: ``{unit, avg, p50, p90, p99,
  ...}`` under the metric's tag, e.g. ``time_to_first_token``, ``inter_token_latency``, ``output_token_throughput``;
  the run's settings under ``input_config``).
- ``guidellm``: GuideLLM's ``benchmarks.json`` (one benchmark per load level: ``benchmarks[i].metrics.<metric>.
  successful.{median, mean, percentiles.p99}``; its ``time_per_output_token_ms`` counts the first token, so TPOT
  here is recomputed as (e2e − TTFT) ÷ (output tokens − 1) from the per-level means when they are present).
- ``vllm-bench``: ``vllm bench serve --save-result`` JSON (keys from vllm/benchmarks/serve.py: ``completed``,
  ``failed``, ``duration``, ``output_throughput``, ``total_input_tokens``, ``{mean,median,p99}_{ttft,tpot,itl,
  e2el}_ms``, ``max_concurrency``, ``request_rate``, and per-request ``ttfts``/``itls``/``latencies``).

Each level becomes one step with its generative block (docs/llm.md): percentiles as the tool computed them (no
per-request samples, so no exact intervals: the report's verdicts then use the point values, as for perf_analyzer
imports), output tokens/s, input tokens/s, tokens/s per user = 1000 / TPOT p50 ms.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from accelbench.documents import (
    Errors,
    GenerativeStep,
    LatencyUs,
    Offered,
    ResultDocument,
    Step,
    ThroughputInterval,
    TokenCounts,
    Workload,
)
from accelbench.errors import BadInputError
from accelbench.reports.importers import import_document

TOOLS = ("aiperf", "guidellm", "vllm-bench")


def _read_json(path: str | Path, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise BadInputError(f"{what} file not found: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadInputError(f"cannot read {what} file {path}: {err}") from None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _lat_ms(values: dict[str, Any]) -> LatencyUs | None:
    """{"p50": ms, "p99": ms, ...} → LatencyUs in µs (missing keys left out)."""
    us = {k: v * 1000.0 for k, v in values.items() if _num(v) is not None}
    return LatencyUs.model_validate(us) if us else None


def _step(
    index: int,
    *,
    concurrency: float | None,
    rate: float | None,
    duration: float | None,
    completed: int,
    failed: int,
    in_tokens: float | None,
    out_tokens: float | None,
    ttft: dict[str, Any],
    itl: dict[str, Any],
    tpot: dict[str, Any],
    e2e: dict[str, Any],
    out_tps: float | None,
    in_tps: float | None,
    rps: float | None,
) -> Step:
    tpot_p50 = _num(tpot.get("p50"))
    gen = GenerativeStep(
        requests=completed,
        failed=failed,
        ttft_us=_lat_ms(ttft),
        itl_us=_lat_ms(itl),
        tpot_us=_lat_ms(tpot),
        e2e_us=_lat_ms(e2e),
        input_tokens=TokenCounts(mean=in_tokens) if in_tokens is not None else None,
        output_tokens=TokenCounts(mean=out_tokens) if out_tokens is not None else None,
        output_tokens_per_s=ThroughputInterval(value=out_tps) if out_tps is not None else None,
        input_tokens_per_s=in_tps,
        requests_per_s=rps,
        tokens_per_s_per_user=1000.0 / tpot_p50 if tpot_p50 else None,
        tokens_per_s_per_user_by_throughput=(out_tps / concurrency) if out_tps and concurrency else None,
    )
    total = completed + failed
    ok = completed > 0 and out_tps is not None
    return Step(
        index=index,
        offered=Offered(concurrency=int(concurrency) if concurrency else None, rate_rps=rate),
        duration_s=duration,
        requests=completed,
        inferences=completed,
        errors=Errors(connection=0, timeout=0, server=failed, wrong_output=0),
        error_rate=(failed / total) if total else 0.0,
        throughput_rps=rps,
        throughput_ips=rps,
        latency_us=_lat_ms(e2e),
        generative=gen,
        verdict="VALID" if ok else "INVALID",
        reasons=[] if ok else ["no completed request or no output token rate"],
    )


def _doc(
    tool: str,
    path: Path,
    target: str,
    model: str,
    precision: str,
    steps: list[Step],
    kind: str,
    workload: Workload,
    note: str,
    packages: dict[str, str],
) -> ResultDocument:
    if not steps:
        raise BadInputError(f"{path}: no benchmark results found in this {tool} file")
    doc = import_document(f"{tool}-import", model, target, precision, 1, path, kind)
    doc.task = "text-generation"
    doc.steps = steps
    doc.load_profile.workload = workload
    doc.load_profile.levels = [s.offered.concurrency or s.offered.rate_rps or 0 for s in steps]
    doc.provenance.note = note
    doc.provenance.packages = packages
    doc.provenance.command = f"accelbench import {tool} {path.name}"
    return doc


def _workload(api: str, steps: list[Step]) -> Workload:
    def mean(attr: str) -> int | None:
        vals = [getattr(s.generative, attr).mean for s in steps if getattr(s.generative, attr)]
        vals = [v for v in vals if v is not None]
        return round(sum(vals) / len(vals)) if vals else None

    return Workload(api=api, isl=mean("input_tokens"), osl=mean("output_tokens"))


# ------------------------------------------------------------------------------------------------ vLLM
def import_vllm_bench(path: str | Path, target: str, model: str, precision: str) -> Any:
    """``vllm bench serve --save-result`` JSON → one step."""
    path = Path(path)
    raw = _read_json(path, "vllm bench")
    if not isinstance(raw, dict) or "completed" not in raw or "output_throughput" not in raw:
        raise BadInputError(
            f"{path}: not a `vllm bench serve --save-result` file (no completed/output_throughput)"
        )

    def pcts(metric: str) -> dict[str, Any]:
        return {
            "p50": raw.get(f"median_{metric}_ms"),
            "p90": raw.get(f"p90_{metric}_ms"),
            "p95": raw.get(f"p95_{metric}_ms"),
            "p99": raw.get(f"p99_{metric}_ms"),
            "mean": raw.get(f"mean_{metric}_ms"),
        }

    completed = int(raw.get("completed") or 0)
    duration = _num(raw.get("duration"))
    in_total = _num(raw.get("total_input_tokens"))
    out_total = _num(raw.get("total_output_tokens"))
    rate = _num(raw.get("request_rate"))
    step = _step(
        0,
        concurrency=_num(raw.get("max_concurrency")),
        rate=rate,
        duration=duration,
        completed=completed,
        failed=int(raw.get("failed") or 0),
        in_tokens=in_total / completed if in_total and completed else None,
        out_tokens=out_total / completed if out_total and completed else None,
        ttft=pcts("ttft"),
        itl=pcts("itl"),
        tpot=pcts("tpot"),
        e2e=pcts("e2el"),
        out_tps=_num(raw.get("output_throughput")),
        in_tps=in_total / duration if in_total and duration else None,
        rps=_num(raw.get("request_throughput")),
    )
    version = {"vllm": str(raw["vllm_version"])} if raw.get("vllm_version") else {}
    note = (
        f"vllm bench serve --save-result ({raw.get('backend') or raw.get('endpoint_type') or 'openai'}, "
        f"model {raw.get('model_id', '?')}); TPOT excludes the first token, ITL per gap"
    )
    kind = "closed" if raw.get("max_concurrency") and (rate is None or math.isinf(rate)) else "open"
    return _doc(
        "vllm-bench", path, target, model, precision, [step], kind, _workload("openai", [step]), note, version
    )


# ---------------------------------------------------------------------------------------------- AIPerf
def import_aiperf(path: str | Path, target: str, model: str, precision: str) -> Any:
    """AIPerf ``profile_export_aiperf.json`` → one step."""
    path = Path(path)
    raw = _read_json(path, "AIPerf")
    records = raw.get("records", raw) if isinstance(raw, dict) else None
    if not isinstance(records, dict) or "time_to_first_token" not in records:
        raise BadInputError(f"{path}: not an AIPerf profile export (no time_to_first_token record)")

    def rec(tag: str) -> dict[str, Any]:
        r = records.get(tag) or {}
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1000.0}.get(str(r.get("unit", "ms")).lower(), 1.0)
        return {
            k: (r[k] * scale if _num(r.get(k)) is not None else None)
            for k in ("p50", "p90", "p95", "p99", "avg")
            if k in r
        } | ({"mean": r["avg"] * scale} if _num(r.get("avg")) is not None else {})

    def avg(tag: str) -> float | None:
        return _num((records.get(tag) or {}).get("avg"))

    cfg = raw.get("input_config") or {}
    # 0.13 keeps the load under input_config.phases[] (the profiling phase); older exports under loadgen
    phase = next((ph for ph in cfg.get("phases") or [] if ph.get("kind") == "profiling"), None) or {}
    load = {**(cfg.get("loadgen") or {}), **phase}
    concurrency = _num(load.get("concurrency"))
    completed = int(avg("request_count") or 0)
    failed = int(avg("error_request_count") or 0)
    duration = avg("benchmark_duration")
    out_tps, in_len = avg("output_token_throughput"), avg("input_sequence_length")
    rps = avg("request_throughput")
    step = _step(
        0,
        concurrency=concurrency,
        rate=_num(load.get("request_rate")),
        duration=duration,
        completed=completed,
        failed=failed,
        in_tokens=in_len,
        out_tokens=avg("output_sequence_length"),
        ttft=rec("time_to_first_token"),
        itl=rec("inter_token_latency"),
        tpot=rec("inter_token_latency"),
        e2e=rec("request_latency"),
        out_tps=out_tps,
        in_tps=in_len * rps if in_len and rps else None,
        rps=rps,
    )
    note = (
        "AIPerf profile export; its inter_token_latency is (e2e − TTFT) ÷ (output tokens − 1) per request, "
        "i.e. TPOT, used for both ITL and TPOT"
    )
    version = {"aiperf": str(raw.get("aiperf_version"))} if raw.get("aiperf_version") else {}
    return _doc(
        "aiperf",
        path,
        target,
        model,
        precision,
        [step],
        "closed" if concurrency else "open",
        _workload("openai", [step]),
        note,
        version,
    )


# -------------------------------------------------------------------------------------------- GuideLLM
def _gl_stat(metrics: dict[str, Any], name: str) -> dict[str, Any]:
    block = ((metrics.get(name) or {}).get("successful")) or {}
    pct = block.get("percentiles") or {}
    return {
        "p50": block.get("median", pct.get("p50")),
        "p90": pct.get("p90"),
        "p95": pct.get("p95"),
        "p99": pct.get("p99"),
        "mean": block.get("mean"),
    }


def import_guidellm(path: str | Path, target: str, model: str, precision: str) -> Any:
    """GuideLLM ``benchmarks.json`` → one step per benchmark (load level)."""
    path = Path(path)
    raw = _read_json(path, "GuideLLM")
    benches = raw.get("benchmarks") if isinstance(raw, dict) else None
    if not isinstance(benches, list) or not benches:
        raise BadInputError(f"{path}: not a GuideLLM benchmarks file (no benchmarks list)")
    steps = []
    for i, b in enumerate(benches):
        m = b.get("metrics") or {}
        ttft, itl, e2e = (
            _gl_stat(m, "time_to_first_token_ms"),
            _gl_stat(m, "inter_token_latency_ms"),
            _gl_stat(m, "request_latency"),
        )
        e2e = {k: (v * 1000.0 if _num(v) is not None else None) for k, v in e2e.items()}  # GuideLLM: seconds
        totals = m.get("request_totals") or {}
        strategy = (b.get("config") or {}).get("strategy") or b.get("scheduler", {}).get("strategy") or {}
        concurrency = _num(strategy.get("streams")) or _num(
            (m.get("request_concurrency") or {}).get("successful", {}).get("mean")
        )
        rps = _num(_gl_stat(m, "requests_per_second").get("mean"))
        out_tokens = _num(_gl_stat(m, "output_token_count").get("mean"))
        in_tokens = _num(_gl_stat(m, "prompt_token_count").get("mean"))
        steps.append(
            _step(
                i,
                concurrency=concurrency,
                rate=_num(strategy.get("rate")),
                duration=_num(b.get("duration")) or _num((b.get("run_stats") or {}).get("duration")),
                completed=int(totals.get("successful") or 0),
                failed=int(totals.get("errored") or 0),
                in_tokens=in_tokens,
                out_tokens=out_tokens,
                ttft=ttft,
                itl=itl,
                tpot=itl,
                e2e=e2e,
                out_tps=_num(_gl_stat(m, "output_tokens_per_second").get("mean")),
                in_tps=in_tokens * rps if in_tokens and rps else None,
                rps=rps,
            )
        )
    note = (
        "GuideLLM benchmarks.json; its ITL (first token left out) is used as TPOT, its own TPOT includes the "
        "first token"
    )
    return _doc(
        "guidellm", path, target, model, precision, steps, "closed", _workload("openai", steps), note, {}
    )


IMPORTERS = {"aiperf": import_aiperf, "guidellm": import_guidellm, "vllm-bench": import_vllm_bench}
