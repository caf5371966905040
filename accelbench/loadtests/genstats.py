"""Token-level figures of a generative step: per-request records from the load processes, merged, then the
step's ``generative`` block (documents.GenerativeStep) with the statistics of docs/statistics.md.

Definitions (docs/llm.md): TTFT = send -> first token event of any kind (reasoning or output); TTFO = send ->
first output (non-reasoning) token event; TTST = first -> second token event (AIPerf's TTST); ITL = every gap between two consecutive tokens
(an event with k tokens after a gap of d gives k gaps of d/k; the extra tokens of the first event give gaps
of 0); TPOT = (e2e - TTFT) / (output tokens - 1); e2e = send -> end of the stream. Only ``Record`` runs in the
load processes; the rest is pure and runs in the caller's process (sweep.build_step).
"""

from __future__ import annotations

import base64
import time
import zlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from accelbench.documents import Interval, ThroughputInterval, to_dict
from accelbench.loadtests import histogram
from accelbench.loadtests import statistics as st
from accelbench.loadtests.jsonwire import GenerativeBlock, ProfileWire, RecordWire
from accelbench.loadtests.streams import TOKEN_SOURCES, StreamAnswer

# per-request columns, in completion order (µs; token counts)
COLUMNS = (
    "done_us",
    "ttft_us",
    "e2e_us",
    "out_tokens",
    "in_tokens",
    "isl",
    "osl",
    "gaps",
    "ttfo_us",
    "ttst_us",
    "reasoning_tokens",
    "cached_tokens",
    "count_source",
    "arrival",
)
# ttfo_us -1: no output token (all reasoning); ttst_us -1: one event; cached_tokens -1: not sent;
# count_source: the index in streams.TOKEN_SOURCES of where the output count came from;
# arrival: bit flags ARRIVED_IN_ONE_BURST | LOOP_WAS_LATE | KERNEL_TIMES
METRICS = ("ttft_us", "itl_us", "tpot_us", "e2e_us")
SHORT_OUTPUT_RATIO = 0.90  # MLPerf: output length at least 90 % of the reference

# Streams judged as streams (docs/llm.md, "Answers that arrive in one burst"). Token events that reached the
# host less than BURST_GAP_US apart arrived together (1,000 tokens/s to one user: beyond what engines stream
# a user; a Python server writing a burst chunk by chunk on this loaded 2-core VM spaced them up to 1.8 ms,
# p99 0.85 ms); an answer arrived in one burst when one such arrival held BURST_TOKEN_SHARE of its output
# tokens (two or more); a step with more than BURST_STEP_SHARE of its answers so is INVALID: its TTFT, ITL
# and TPOT do not describe a stream. A burst answer whose load process was late by more than LOOP_LATE_US
# while it streamed (a read that waited that long in the socket, or the loop-lag timer) may be the client's
# merge, not the server's (merging 90 % of an answer's gaps needs the loop away for most of its decode: at
# 1 ms a token and 16 tokens, 14 ms): the step counts those apart.
BURST_GAP_US = 1000
BURST_TOKEN_SHARE = 0.90
BURST_STEP_SHARE = 0.05
LOOP_LATE_US = 10_000
ARRIVED_IN_ONE_BURST, LOOP_WAS_LATE, KERNEL_TIMES = 1, 2, 4
MERGED_BY_A_LATE_CLIENT = "not streamed as read (the load process was late):"


def largest_burst(times_ns: list[int], counts: list[int]) -> int:
    """Output tokens in the largest run of events each less than BURST_GAP_US after the one before."""
    best = run = counts[0] if counts else 0
    for i in range(1, len(times_ns)):
        run = run + counts[i] if times_ns[i] - times_ns[i - 1] < BURST_GAP_US * 1000 else counts[i]
        best = max(best, run)
    return best


def arrived_in_one_burst(times_ns: list[int], counts: list[int]) -> bool:
    """Whether an answer's output (two tokens or more) came in one burst (BURST_TOKEN_SHARE of it)."""
    total = sum(counts)
    return total >= 2 and largest_burst(times_ns, counts) >= BURST_TOKEN_SHARE * total


def _pack(values: array[int] | np.ndarray) -> str:
    arr = np.asarray(values, dtype="<i8")
    return base64.b64encode(zlib.compress(arr.tobytes(), 6)).decode("ascii")


def _unpack(text: str | None) -> np.ndarray:
    if not text:
        return np.zeros(0, dtype=np.int64)
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype="<i8").astype(np.int64)


@dataclass(frozen=True)
class Extra:
    """A request's figures beyond its token times: the first output (non-reasoning) token's arrival (None:
    the first token was one, or none came), reasoning tokens, cached prompt tokens (None: not sent) and the
    index in streams.TOKEN_SOURCES of where its output count came from."""

    first_output_ns: int | None = None
    reasoning: int = 0
    cached: int | None = None
    source: int = 0
    arrival: int = 0  # ARRIVED_IN_ONE_BURST | LOOP_WAS_LATE | KERNEL_TIMES


def arrival_flags(answer: StreamAnswer, counts: list[int], loop_late: bool) -> int:
    """An answer's ``arrival`` flags: in one burst, its load process late while it streamed, kernel times."""
    late = loop_late or answer.late_us > LOOP_LATE_US
    return (
        (ARRIVED_IN_ONE_BURST if arrived_in_one_burst(answer.times_ns, counts) else 0)
        | (LOOP_WAS_LATE if late else 0)
        | (KERNEL_TIMES if answer.kernel_times else 0)
    )


def extra(answer: StreamAnswer, counts: list[int], source: str, loop_late: bool = False) -> Extra:
    """A streamed answer's reasoning tokens, first output token, cached prompt tokens, count source and
    arrival flags (``loop_late``: the loop-lag timer saw its load process late while it streamed)."""
    first_output = None
    reasoning = 0
    for i, is_reasoning in enumerate(answer.reasoning):
        if is_reasoning:
            reasoning += counts[i]
        elif first_output is None:
            first_output = answer.times_ns[i]
    return Extra(
        first_output_ns=first_output,
        reasoning=reasoning,
        cached=answer.cached_tokens,
        source=TOKEN_SOURCES.index(source),
        arrival=arrival_flags(answer, counts, loop_late),
    )


class Record:
    """One load process's completed requests in a measured window (appended in completion order)."""

    def __init__(self) -> None:
        self.cols = {name: array("q") for name in COLUMNS}
        self.itl = array("q")  # every gap, request after request (``gaps`` per request)
        self.hists = {m: histogram.new_histogram() for m in METRICS}
        self.mismatches = 0
        self.cancelled = 0  # requests cancelled on purpose (workload cancel_after_ms)
        self.t0_ns = time.perf_counter_ns()

    def add(
        self,
        start_ns: int,
        times_ns: list[int],
        counts: list[int],
        total: int,
        end_ns: int,
        n_in: int,
        isl: int,
        osl: int,
        mismatch: bool,
        extra: Extra | None = None,
    ) -> None:
        ttft = (times_ns[0] - start_ns) // 1000
        x = extra or Extra()
        first_out = (
            x.first_output_ns
            if x.first_output_ns is not None
            else (times_ns[0] if x.reasoning == 0 else None)
        )
        e2e = (end_ns - start_ns) // 1000
        gaps = [0] * (counts[0] - 1)
        for i in range(1, len(times_ns)):
            k = counts[i]
            gap = (times_ns[i] - times_ns[i - 1]) // (1000 * k)
            gaps.extend([gap] * k)
        c = self.cols
        c["done_us"].append((end_ns - self.t0_ns) // 1000)
        c["ttft_us"].append(ttft)
        c["e2e_us"].append(e2e)
        c["out_tokens"].append(total)
        c["in_tokens"].append(n_in)
        c["isl"].append(isl)
        c["osl"].append(osl)
        c["gaps"].append(len(gaps))
        c["ttfo_us"].append((first_out - start_ns) // 1000 if first_out is not None else -1)
        c["ttst_us"].append((times_ns[1] - times_ns[0]) // 1000 if len(times_ns) > 1 else -1)
        c["reasoning_tokens"].append(x.reasoning)
        c["cached_tokens"].append(-1 if x.cached is None else x.cached)
        c["count_source"].append(x.source)
        c["arrival"].append(x.arrival)
        self.itl.extend(gaps)
        self.mismatches += mismatch
        h = self.hists
        histogram.record_us(h["ttft_us"], ttft)
        histogram.record_us(h["e2e_us"], e2e)
        if total > 1:
            histogram.record_us(h["tpot_us"], (e2e - ttft) // (total - 1))
        for gap in gaps:
            histogram.record_us(h["itl_us"], gap)

    def encode(self, workload: ProfileWire) -> RecordWire:
        return {
            "columns": {k: _pack(v) for k, v in self.cols.items()},
            "itl": _pack(self.itl),
            "histograms": {m: histogram.encode(h) for m, h in self.hists.items()},
            "usage_mismatches": self.mismatches,
            "cancelled": self.cancelled,
            "workload": workload,
        }


def combine(parts: Iterable[RecordWire | None]) -> RecordWire | None:
    """The processes' records as one (columns concatenated and ordered by completion, histograms merged)."""
    given = [p for p in parts if p]
    if not given:
        return None
    cols = {k: np.concatenate([_unpack(p["columns"][k]) for p in given]) for k in COLUMNS}
    itl_parts = [_unpack(p["itl"]) for p in given]
    # each request's gaps, kept with the request through the completion-order merge
    per_request = []
    for p, gaps in zip(given, itl_parts, strict=True):
        n = _unpack(p["columns"]["gaps"])
        per_request += np.split(gaps, np.cumsum(n)[:-1]) if len(n) else []
    order = np.argsort(cols["done_us"], kind="stable")
    cols = {k: v[order] for k, v in cols.items()}
    itl = np.concatenate([per_request[i] for i in order]) if len(order) else np.zeros(0, dtype=np.int64)
    return {
        "columns": {k: _pack(v) for k, v in cols.items()},
        "itl": _pack(itl),
        "histograms": {
            m: histogram.encode(histogram.merge(p["histograms"][m] for p in given)) for m in METRICS
        },
        "usage_mismatches": sum(p.get("usage_mismatches", 0) for p in given),
        "cancelled": sum(p.get("cancelled", 0) for p in given),
        "workload": given[0].get("workload"),
    }


def _latency(x: np.ndarray) -> tuple[GenerativeBlock, dict[str, Interval]]:
    """LatencyUs (exact percentiles, max, mean) and each percentile's exact 95 % interval."""
    if not len(x):
        return {}, {}
    summary: GenerativeBlock = {}
    intervals = {}
    for key, q in histogram.PERCENTILES:
        intervals[key] = st.quantile_interval(x, q).rounded(1)
        summary[key] = intervals[key].value
    summary["max"] = int(x.max())
    summary["mean"] = round(float(x.mean()), 1)
    return summary, intervals


def _counts(values: np.ndarray, asked: np.ndarray) -> dict[str, int | float]:
    return {
        "total": int(values.sum()),
        "mean": round(float(values.mean()), 2),
        "min": int(values.min()),
        "max": int(values.max()),
        "asked": round(float(asked.mean()), 2),
    }


def _goodput(
    ttft: np.ndarray, tpot: np.ndarray, workload: ProfileWire, span_s: float
) -> GenerativeBlock | None:
    """Requests whose own TTFT and TPOT both met the objectives (a one-token answer has no TPOT to miss)."""
    slo_ttft, slo_tpot = workload.get("slo_ttft_p99_ms"), workload.get("slo_tpot_p99_ms")
    if slo_ttft is None and slo_tpot is None:
        return None
    ok = np.ones(len(ttft), dtype=bool)
    if slo_ttft is not None:
        ok &= ttft <= slo_ttft * 1000
    if slo_tpot is not None:
        ok &= np.isnan(tpot) | (tpot <= slo_tpot * 1000)
    good = int(ok.sum())
    return {
        "ttft_ms": slo_ttft,
        "tpot_ms": slo_tpot,
        "requests": good,
        "fraction": round(good / len(ok), 4) if len(ok) else None,
        "rps": round(good / span_s, 3),
    }


def _reasoning_and_cache(kept: dict[str, np.ndarray]) -> GenerativeBlock:
    """TTFO and TTST percentiles, reasoning and cached prompt tokens, and where the output counts came from
    (columns missing in an older record give nothing)."""
    out: GenerativeBlock = {}
    if "ttfo_us" not in kept:
        return out
    for metric in ("ttfo_us", "ttst_us"):
        x = kept[metric]
        out[metric] = _latency(x[x >= 0].astype(float))[0] or None
    reasoning = kept["reasoning_tokens"]
    out["reasoning_tokens"] = {
        "total": int(reasoning.sum()),
        "mean": round(float(reasoning.mean()), 2),
        "requests": int((reasoning > 0).sum()),
    }
    cached = kept["cached_tokens"]
    sent = cached >= 0
    if sent.any():
        prompt = int(kept["in_tokens"][sent].sum())
        out["cached_tokens"] = {
            "total": int(cached[sent].sum()),
            "requests": int(sent.sum()),
            "fraction": round(float(cached[sent].sum()) / prompt, 4) if prompt else None,
        }
    sources = np.bincount(kept["count_source"], minlength=len(TOKEN_SOURCES))
    out["output_token_sources"] = {TOKEN_SOURCES[i]: int(n) for i, n in enumerate(sources) if n}
    return out


def _bursts(arrival: np.ndarray, out: GenerativeBlock) -> str | None:
    """The step's burst counts into ``out`` (``burst_answers``, ``burst_answers_loop_late``, ``streamed``,
    ``token_times``); the INVALID reason when more than BURST_STEP_SHARE of its answers came in one burst."""
    n = len(arrival)
    burst = (arrival & ARRIVED_IN_ONE_BURST) > 0
    late = int((burst & ((arrival & LOOP_WAS_LATE) > 0)).sum())
    out["burst_answers"] = int(burst.sum())
    out["burst_answers_loop_late"] = late
    out["token_times"] = "kernel" if n and bool(((arrival & KERNEL_TIMES) > 0).all()) else "loop"
    out["streamed"] = not (n and burst.sum() > BURST_STEP_SHARE * n)
    if out["streamed"]:
        return None
    # every burst while the load process was late: the client's merge (measured against vLLM here: none of
    # those bursts were on the wire), which another measurement may not repeat (verdict.RETRYABLE)
    head = MERGED_BY_A_LATE_CLIENT if late == int(burst.sum()) else "not streamed:"
    return (
        f"{head} {int(burst.sum())} of {n} answers arrived in one burst (>= {BURST_TOKEN_SHARE:.0%} of "
        f"their tokens less than {BURST_GAP_US} µs apart; limit {BURST_STEP_SHARE:.0%} of the answers), so "
        f"TTFT, ITL and TPOT do not describe a stream; {late} of them while the load process was late "
        f"(> {LOOP_LATE_US / 1000:g} ms), {int(burst.sum()) - late} with it on time (the server's bursts)"
    )


def step(
    gen: RecordWire,
    offered: dict[str, float],
    duration_s: float,
    cpu_s: float,
    failed: int,
    sample_floor: int,
    ci_batches: int = 10,
) -> tuple[GenerativeBlock, list[str], list[str]]:
    """The step's ``generative`` block, its INVALID reasons (short outputs) and LOW-PRECISION reasons (too
    few requests or gaps after the warm-up cut). The warm-up cut is MSER-5 on e2e in completion order, as
    the classic statistics cut the same requests."""
    cols = {k: _unpack(v) for k, v in gen["columns"].items()}
    workload = gen.get("workload") or {}
    n_all = len(cols["done_us"])
    out: GenerativeBlock = {
        "requests": 0,
        "failed": failed,
        "histograms": gen.get("histograms"),
        "sample_floors": dict.fromkeys(METRICS, sample_floor),
        "usage_mismatches": gen.get("usage_mismatches", 0),
    }
    if workload.get("cancel_after_ms") is not None:
        out["cancelled"] = int(gen.get("cancelled", 0))
    total_tokens = int(cols["out_tokens"].sum()) if n_all else 0
    out["client_cpu_us_per_token"] = round(cpu_s * 1e6 / total_tokens, 2) if total_tokens else None
    if n_all < 2:
        return out, [], [f"only {n_all} completed generative requests"]
    cut = st.warmup_cut(cols["e2e_us"].astype(float)).cut
    done_s = cols["done_us"] / 1e6
    start = float(done_s[cut - 1]) if cut else 0.0
    end = max(float(duration_s), float(done_s[-1]))
    span = max(end - start, 1e-9)
    gaps_per = cols["gaps"]
    itl = _unpack(gen["itl"])[int(gaps_per[:cut].sum()) :]
    kept = {k: v[cut:] for k, v in cols.items()}
    n = len(kept["done_us"])
    ttft, e2e, outn = kept["ttft_us"].astype(float), kept["e2e_us"].astype(float), kept["out_tokens"]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(outn > 1, (e2e - ttft) / np.maximum(outn - 1, 1), np.nan)
    out["requests"] = n
    out["truncated_requests"] = cut
    out["gaps"] = len(itl)
    intervals = {}
    for metric, x in (
        ("ttft_us", ttft),
        ("itl_us", itl.astype(float)),
        ("tpot_us", tpot[~np.isnan(tpot)]),
        ("e2e_us", e2e),
    ):
        out[metric], intervals[metric] = _latency(x)
    out["intervals"] = intervals
    out.update(_reasoning_and_cache(kept))
    out["input_tokens"] = _counts(kept["in_tokens"], kept["isl"])
    out["output_tokens"] = _counts(outn, kept["osl"])
    out["short_outputs"] = int((outn < kept["osl"]).sum())
    if "ignore_eos" in workload:
        out["output_length_forced"] = bool(workload["ignore_eos"])
    out["output_length_honoured"] = bool((outn == kept["osl"]).all())
    ratio = float(outn.mean() / kept["osl"].mean()) if kept["osl"].mean() else None
    out["output_length_ratio"] = round(ratio, 4) if ratio is not None else None
    rates, means = st.time_batches(done_s[cut:], outn.astype(float), start, end, ci_batches)
    thr, se, df = st.mean_interval(rates * np.nan_to_num(means))
    out["output_tokens_per_s"] = ThroughputInterval(**to_dict(thr.rounded(2)), se=round(se, 3), df=df)
    tokens_per_s = float(outn.sum()) / span
    out["input_tokens_per_s"] = round(float(kept["in_tokens"].sum()) / span, 2)
    out["requests_per_s"] = round(n / span, 3)
    tpot_p50 = out["tpot_us"].get("p50") if out["tpot_us"] else None
    out["tokens_per_s_per_user"] = round(1e6 / tpot_p50, 3) if tpot_p50 else None
    # closed loop: the offered concurrency; open loop: the mean requests in flight (Little's law)
    users = offered.get("concurrency") or (n / span) * float(e2e.mean()) / 1e6
    out["tokens_per_s_per_user_by_throughput"] = round(tokens_per_s / users, 3) if users else None
    out["goodput"] = _goodput(ttft, tpot, workload, span)
    invalid, low = [], []
    if ratio is not None and ratio < SHORT_OUTPUT_RATIO:
        invalid.append(
            f"short outputs: mean output {outn.mean():.1f} of {kept['osl'].mean():.1f} tokens asked "
            f"({ratio:.0%} < {SHORT_OUTPUT_RATIO:.0%}, MLPerf); {out['short_outputs']} of {n} requests ended early"
        )
    not_streamed = _bursts(kept["arrival"], out)
    if not_streamed:
        invalid.append(not_streamed)
    if len(itl) < sample_floor:
        low.append(
            f"{len(itl)} inter-token gaps after the warm-up cut, below the ITL sample floor {sample_floor}"
        )
    return out, invalid, low
