"""The engine's Prometheus /metrics per step (issue 39): vLLM (V1 and V0 names), SGLang, TGI and Triton's texts
(tests/data/serving/engine_metrics/SOURCES.md) read into queue, running, KV-cache use and prefix-cache hit rate;
the step's summary (gauge mean and max, counter deltas); a poller whose failures are recorded, not raised."""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import pytest

from accelbench.serving.engine_metrics import (
    MAX_FAILURES_BEFORE_ANY_SAMPLE,
    EngineSample,
    Poller,
    metrics_url,
    parse,
    summarize,
)

DATA = Path(__file__).parent / "data" / "serving"
TEXTS = DATA / "engine_metrics"


def _read(name: str, model: str | None = None) -> EngineSample:
    return parse((TEXTS / name).read_text(), model)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("vllm_v1_qwen2.5-7b_idle.txt", EngineSample("vllm", 0.0, 0.0, 0.0)),
        ("vllm_v1_busy_1.txt", EngineSample("vllm", 3.0, 2.0, 0.25, 750.0, 1000.0)),
        ("vllm_v0_llama-2-7b.txt", EngineSample("vllm", 0.0, 0.0, 0.35, prefix_hit_rate=0.6)),
        (
            "sglang_llama-3.1-8b_docs.txt",
            EngineSample("sglang", 162.0, 2826.0, 0.28, prefix_hit_rate=0.007507552643049313),
        ),  # fmt: skip
        ("tgi.txt", EngineSample("tgi", running=2.0, queue=6.0)),
        (
            "triton_trtllm_backend_readme.txt",
            EngineSample("triton", running=1.0, queue=0.0, kv_cache_usage=1 / 6239),
        ),  # fmt: skip
    ],
)
def test_each_engines_names_are_read(name, expected):
    assert _read(name) == expected


def test_plain_triton_gives_its_pending_requests_as_the_queue():
    got = parse((DATA / "triton_metrics_cpu.txt").read_text())
    assert got.engine == "triton" and got.queue == 0 and got.running is None and got.kv_cache_usage is None


def test_a_text_of_no_known_engine_and_a_bad_text():
    assert parse("# TYPE go_gc_duration_seconds gauge\ngo_gc_duration_seconds 0.1\n") == EngineSample(None)
    with pytest.raises(ValueError):
        parse("vllm:num_requests_running{engine= 3\n")


def test_series_of_another_model_are_left_out_and_data_parallel_engines_add_up():
    text = (
        'vllm:num_requests_running{engine="0",model_name="a"} 2\n'
        'vllm:num_requests_running{engine="1",model_name="a"} 3\n'
        'vllm:num_requests_running{engine="0",model_name="b"} 50\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.2\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="a"} 0.4\n'
    )
    got = parse(text, "a")
    assert got.running == 5 and got.kv_cache_usage == pytest.approx(0.3)
    assert parse(text, "not-served").running == 55  # no series names it: all of them


def test_a_step_summary_means_gauges_and_differences_counters():
    block = summarize([_read("vllm_v1_busy_1.txt"), _read("vllm_v1_busy_2.txt")])
    assert block["engine"] == "vllm" and block["samples"] == 2 and block["failures"] == 0
    assert (block["running_mean"], block["running_max"]) == (4.0, 5.0)
    assert (block["queue_mean"], block["queue_max"]) == (3.0, 4.0)
    assert (block["kv_cache_usage_mean"], block["kv_cache_usage_max"]) == (0.375, 0.5)
    # (1950 - 750) hits of (3000 - 1000) queried tokens during the step, not the engine's lifetime 0.65
    assert block["prefix_cache_hit_rate"] == 0.6 and block["prefix_cache_hit_rate_from"] == "counters"
    gauge = summarize([_read("sglang_llama-3.1-8b_docs.txt")])
    assert gauge["prefix_cache_hit_rate"] == round(0.007507552643049313, 4)
    assert gauge["prefix_cache_hit_rate_from"] == "gauge"
    assert summarize([_read("tgi.txt")])["prefix_cache_hit_rate"] is None


def test_where_the_metrics_are():
    assert metrics_url("openai-chat", "http://127.0.0.1:8000/v1", None) == "http://127.0.0.1:8000/metrics"
    assert metrics_url("triton", "http://127.0.0.1:8000", "http://127.0.0.1:8002/metrics") == (
        "http://127.0.0.1:8002/metrics"
    )
    assert metrics_url("triton-grpc", "127.0.0.1:8001", None) is None


class _Engine(http.server.BaseHTTPRequestHandler):
    """Serves the two busy vLLM texts in turn, or 404 (an engine without /metrics)."""

    texts: list[str] = []
    calls = 0

    def do_GET(self):  # noqa: N802 - the http.server API
        cls = type(self)
        if not cls.texts:
            self.send_error(404)
            return
        body = cls.texts[min(cls.calls, len(cls.texts) - 1)].encode()
        cls.calls += 1
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def engine():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield _Engine, f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def test_the_poller_reads_the_counters_at_start_samples_during_the_step_and_once_at_its_end(engine):
    handler, url = engine
    handler.texts = [(TEXTS / "vllm_v1_busy_1.txt").read_text(), (TEXTS / "vllm_v1_busy_2.txt").read_text()]
    handler.calls = 0
    poller = Poller(url, "qwen3.8-27b", interval_s=0.1).start()
    assert handler.calls == 1  # the counters' baseline, read before start returns (the load still paused)
    time.sleep(0.35)
    block = poller.stop()
    assert block["samples"] == handler.calls - 1 >= 3 and block["failures"] == 0
    # the baseline's gauges (3 running) are not the step's; its counters are where the hit rate starts from
    assert block["running_mean"] == block["running_max"] == 5.0
    assert block["prefix_cache_hit_rate"] == 0.6 and block["prefix_cache_hit_rate_from"] == "counters"


def test_a_hit_rate_needs_no_second_sample_inside_a_short_step(engine):
    """One sample in the window (a starved poller) still gives the hit rate: the baseline read before the
    window opened and the sample at its end bracket the step's requests."""
    handler, url = engine
    handler.texts = [(TEXTS / "vllm_v1_busy_1.txt").read_text(), (TEXTS / "vllm_v1_busy_2.txt").read_text()]
    handler.calls = 0
    poller = Poller(url, "qwen3.8-27b", interval_s=60)
    poller._run = lambda: None  # noqa: SLF001 - no sample inside the window: only the one stop takes
    block = poller.start().stop()
    assert block["samples"] == 1 and block["prefix_cache_hit_rate"] == 0.6, block


def test_an_engine_without_metrics_is_recorded_not_fatal(engine):
    handler, url = engine
    handler.texts, handler.calls = [], 0
    poller = Poller(url, interval_s=0.05).start()
    time.sleep(0.4)
    block = poller.stop()
    assert block["samples"] == 0 and block["failures"] == MAX_FAILURES_BEFORE_ANY_SAMPLE
    assert "404" in block["last_error"] and block["running_mean"] is None
