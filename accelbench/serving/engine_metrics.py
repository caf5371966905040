"""An LLM engine's Prometheus ``/metrics`` over a measured step: queue length, running requests, KV-cache use
and prefix-cache hit rate, whichever of vLLM, SGLang, TGI or Triton (with TensorRT-LLM) names them.

``parse`` reads one exposition text into an ``EngineSample`` (pure); ``Summary`` folds the samples of a step
into the document's ``engine_metrics`` block (docs/llm.md): gauges as the mean and max of the samples taken
during the step, counters as the difference between a reading taken just before the window opens (its load
paused) and the last sample, taken as it closes. ``Poller`` samples an
endpoint every ``interval_s`` on a daemon thread (in a process of its own beside the load child,
loadtests/metrics_poll.py, never in its event loop): memory is bounded (running sums, not the samples),
and a failed scrape is counted and its message kept, never raised, so an engine without ``/metrics`` costs
the step nothing but a note.

Names (each engine's own docs; recorded texts in tests/data/serving/engine_metrics/, SOURCES.md there):

| meaning | vLLM | SGLang | TGI | Triton (TensorRT-LLM backend) |
|---|---|---|---|---|
| running | ``vllm:num_requests_running`` | ``sglang:num_running_reqs`` | ``tgi_batch_current_size`` | ``nv_trt_llm_request_metrics{request_type="scheduled"}`` |
| queue | ``vllm:num_requests_waiting`` | ``sglang:num_queue_reqs`` | ``tgi_queue_size`` | ``nv_trt_llm_request_metrics{request_type="waiting"}``, else ``nv_inference_pending_request_count`` |
| KV cache, 0-1 | ``vllm:kv_cache_usage_perc`` (V1), ``vllm:gpu_cache_usage_perc`` (V0) | ``sglang:token_usage`` | — | ``nv_trt_llm_kv_cache_block_metrics``: ``fraction``, else ``used`` / ``max`` |
| prefix cache | ``vllm:prefix_cache_hits_total`` / ``queries_total`` (counters, tokens; V1), ``vllm:gpu_prefix_cache_hit_rate`` (V0 gauge) | ``sglang:cache_hit_rate`` (gauge) | — | — |

A counter's hit rate is hits / queries over the step (the tokens the cache served of those it was asked
for); an engine that only exports a hit-rate gauge gives the gauge's mean over the step (its own window,
said in ``prefix_cache_hit_rate_from``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from accelbench.serving.http_client import HttpStatus, Unreachable, get_text

GAUGES = ("running", "queue", "kv_cache_usage")
MAX_FAILURES_BEFORE_ANY_SAMPLE = 3  # an endpoint that never answered is asked no more in the step
SCRAPE_TIMEOUT_S = 2.0

# engine -> meaning -> metric names in order of preference (the first one present wins)
_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "running": ("vllm:num_requests_running",),
        "queue": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
    },
    "sglang": {
        "running": ("sglang:num_running_reqs",),
        "queue": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
        "prefix_hit_rate": ("sglang:cache_hit_rate",),
    },
    "tgi": {"running": ("tgi_batch_current_size",), "queue": ("tgi_queue_size",)},
}
_TRT = "nv_trt_llm_request_metrics"
_TRT_KV = "nv_trt_llm_kv_cache_block_metrics"
_TRITON_PENDING = "nv_inference_pending_request_count"


@dataclass(frozen=True)
class EngineSample:
    """One scrape in the engine's own units: requests, fraction 0-1, tokens (counters)."""

    engine: str | None
    running: float | None = None
    queue: float | None = None
    kv_cache_usage: float | None = None
    prefix_hits: float | None = None  # counter
    prefix_queries: float | None = None  # counter
    prefix_hit_rate: float | None = None  # gauge (engines without the counters)


def parse(text: str, model: str | None = None) -> EngineSample:
    """The engine sample in a Prometheus exposition text; series labelled with another model than ``model``
    (``model_name`` / ``model``) are left out where some carry ``model``. Raises ValueError on bad text."""
    from prometheus_client.parser import text_string_to_metric_families

    series: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            series.setdefault(s.name, []).append((s.labels, float(s.value)))
    series = {name: _of_model(rows, model) for name, rows in series.items()}
    for engine, names in _NAMES.items():
        if any(n in series for ns in names.values() for n in ns):
            got = {meaning: _first(series, ns) for meaning, ns in names.items()}
            return EngineSample(engine, **got)
    if _TRT in series or _TRT_KV in series or _TRITON_PENDING in series:
        return _triton(series)
    return EngineSample(None)


def _of_model(
    rows: list[tuple[dict[str, str], float]], model: str | None
) -> list[tuple[dict[str, str], float]]:
    if model is None:
        return rows
    mine = [r for r in rows if model in (r[0].get("model_name"), r[0].get("model"))]
    return mine or rows


def _first(series: dict[str, list[tuple[dict[str, str], float]]], names: tuple[str, ...]) -> float | None:
    for name in names:
        if name in series:
            return _combine(name, [v for _, v in series[name]])
    return None


def _combine(name: str, values: list[float]) -> float:
    """Several series of one metric (data-parallel engines, Triton model versions): fractions are averaged,
    counts and counters summed."""
    fraction = name.endswith(("_perc", "token_usage", "hit_rate"))
    return sum(values) / len(values) if fraction else sum(values)


def _triton(series: dict[str, list[tuple[dict[str, str], float]]]) -> EngineSample:
    def by(name: str, label: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for labels, value in series.get(name, []):
            key = labels.get(label, "")
            out[key] = out.get(key, 0.0) + value
        return out

    req, kv = by(_TRT, "request_type"), by(_TRT_KV, "kv_cache_block_type")
    queue = req.get("waiting")
    if queue is None and _TRITON_PENDING in series:
        queue = sum(v for _, v in series[_TRITON_PENDING])
    usage = kv.get("fraction")
    if usage is None and kv.get("max"):
        usage = kv.get("used", 0.0) / kv["max"]
    return EngineSample(
        "triton", running=req.get("scheduled", req.get("active")), queue=queue, kv_cache_usage=usage
    )


@dataclass
class Summary:
    """The samples of one step, folded as they come (bounded: sums, maxima, the first and last counters)."""

    samples: int = 0
    failures: int = 0
    last_error: str | None = None
    engine: str | None = None
    _sum: dict[str, float] = field(default_factory=dict)
    _n: dict[str, int] = field(default_factory=dict)
    _max: dict[str, float] = field(default_factory=dict)
    _first: EngineSample | None = None
    _last: EngineSample | None = None

    def add(self, sample: EngineSample) -> None:
        self.samples += 1
        self.engine = self.engine or sample.engine
        for key in (*GAUGES, "prefix_hit_rate"):
            value = getattr(sample, key)
            if value is not None:
                self._sum[key] = self._sum.get(key, 0.0) + value
                self._n[key] = self._n.get(key, 0) + 1
                self._max[key] = max(self._max.get(key, value), value)
        if sample.prefix_queries is not None:
            self._first = self._first or sample
            self._last = sample

    def baseline(self, sample: EngineSample) -> None:
        """The counters just before the measured window opens (its load paused): the hit rate's starting
        point, so the step's counters bracket every request of the window however late the first sample
        in it comes. Its gauges (an idle engine) are not the step's."""
        if sample.prefix_queries is not None:
            self._first = sample
        self.engine = self.engine or sample.engine

    def fail(self, message: str) -> None:
        self.failures += 1
        self.last_error = message[:300]

    def mean(self, key: str) -> float | None:
        return self._sum[key] / self._n[key] if self._n.get(key) else None

    def as_block(self) -> dict[str, Any]:
        """The document's ``engine_metrics`` (documents.EngineMetrics), rounded."""
        out: dict[str, Any] = {
            "engine": self.engine,
            "samples": self.samples,
            "failures": self.failures,
            "last_error": self.last_error,
        }
        for key in GAUGES:
            mean = self.mean(key)
            out[f"{key}_mean"] = None if mean is None else round(mean, 4)
            out[f"{key}_max"] = self._max.get(key)
        rate, source = self._hit_rate()
        out["prefix_cache_hit_rate"] = None if rate is None else round(rate, 4)
        out["prefix_cache_hit_rate_from"] = source
        return out

    def _hit_rate(self) -> tuple[float | None, str | None]:
        a, b = self._first, self._last
        if a is not None and b is not None and a is not b:
            queries = (b.prefix_queries or 0.0) - (a.prefix_queries or 0.0)
            hits = (b.prefix_hits or 0.0) - (a.prefix_hits or 0.0)
            if queries > 0:
                return hits / queries, "counters"
        gauge = self.mean("prefix_hit_rate")
        return (gauge, "gauge") if gauge is not None else (None, None)


def summarize(samples: Iterable[EngineSample]) -> dict[str, Any]:
    """``Summary`` over samples already taken (tests; recorded texts)."""
    summary = Summary()
    for s in samples:
        summary.add(s)
    return summary.as_block()


def metrics_url(api: str, url: str, triton_metrics_url: str | None) -> str | None:
    """Where the engine's metrics are: Triton's metrics port, else ``/metrics`` beside an OpenAI base URL
    (vLLM, SGLang and TGI serve it on the API's port); None when not known."""
    if triton_metrics_url:
        return triton_metrics_url
    if not api.startswith("openai"):
        return None
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/metrics", "", ""))


def scrape(url: str, model: str | None = None, timeout_s: float = SCRAPE_TIMEOUT_S) -> EngineSample:
    """GET and parse ``url``; raises http_client's errors or ValueError (unparsable text)."""
    return parse(get_text(url, timeout_s), model)


class Poller:
    """Samples ``url`` every ``interval_s`` from ``start`` to ``stop`` (which returns the step's block).

    ``scrape_fn`` is ``scrape`` unless a test gives another. A scrape that fails is counted, never raised;
    after MAX_FAILURES_BEFORE_ANY_SAMPLE failures without one success the poller stops asking."""

    def __init__(
        self,
        url: str,
        model: str | None = None,
        interval_s: float = 0.5,
        scrape_fn: Callable[[str, str | None], EngineSample] | None = None,
    ) -> None:
        self.url, self.model, self.interval_s = url, model, interval_s
        self._scrape = scrape_fn or scrape
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.summary = Summary()

    def start(self) -> Poller:
        """Read the counters once now (``Summary.baseline``: call it while the load is paused), then sample
        every ``interval_s`` in a thread until ``stop``."""
        self._once(baseline=True)
        self._thread = threading.Thread(target=self._run, name="engine-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """Stop, take one last sample (so counters cover the whole step) and return the block."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=SCRAPE_TIMEOUT_S + 1)
        if self._thread is None or not self._thread.is_alive():  # a scrape still hanging keeps the summary
            self._once()
        return self.summary.as_block()

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            self._once()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))

    def _once(self, baseline: bool = False) -> None:
        s = self.summary
        if s.samples == 0 and s.failures >= MAX_FAILURES_BEFORE_ANY_SAMPLE:
            return
        try:
            sample = self._scrape(self.url, self.model)
            if baseline:
                s.baseline(sample)
            else:
                s.add(sample)
        except HttpStatus as err:
            s.fail(f"{self.url}: HTTP {err.status} {err.reason}")
        except Unreachable as err:
            s.fail(f"{self.url}: {err.reason}")
        except (OSError, ValueError) as err:  # a scrape_fn of a test's own
            s.fail(f"{self.url}: {err}")
