"""The engine's /metrics scraped per step, live (issue 39): the reference server with 2 slots (its /metrics are
vLLM's names over its own state) measured at concurrency 1 and 8; at 8 the engine queues what its slots cannot
run and the document says so. And an output length beyond the engine's context (its /v1/models
``max_model_len``) is refused in one line before anything is measured."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from accelbench.documents import load_result
from accelbench.loadtests import reference_server
from accelbench.serving.server import free_port

pytestmark = pytest.mark.slow
ACCELBENCH = [sys.executable, "-m", "accelbench.cli"]
SLOTS, ISL, CACHED = 2, 32, 8


@pytest.fixture(scope="module")
def engine():
    with reference_server.running(free_port(), "--ttft-ms", "10", "--itl-ms", "5", "--slots", str(SLOTS),
                                  "--cached-tokens", str(CACHED)) as url:  # fmt: skip
        yield url


def _loadtest(url: str, out, *args: str) -> subprocess.CompletedProcess:
    cmd = [*ACCELBENCH, "loadtest", "--url", url, "--api", "openai", "--model", "reference", "--isl", str(ISL),
           "--warmup", "1", "--out", str(out), "--json", *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_queue_and_running_per_step_beyond_the_engines_slots(engine, tmp_path):
    done = _loadtest(engine, tmp_path, "--osl", "8", "--concurrency", "1,8", "--duration", "4",
                     "--max-duration", "4")  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    load_result(doc)  # the block is the schema's
    one, eight = (s["generative"]["engine_metrics"] for s in doc["steps"])
    for block in (one, eight):
        assert block["engine"] == "vllm" and block["failures"] == 0 and block["samples"] >= 5, block
        # the reference's prefix cache serves CACHED tokens of every ISL-token prompt: the step's counters say so
        assert (
            block["prefix_cache_hit_rate"] == CACHED / ISL
            and block["prefix_cache_hit_rate_from"] == "counters"
        )
    assert one["queue_max"] == 0 and one["running_max"] == 1
    # 8 users on 2 slots: the engine runs 2 and queues about 6 (some are between requests at each sample)
    assert eight["running_max"] == SLOTS and eight["queue_max"] >= 4 and eight["queue_mean"] > 2, eight
    # the reference: 1 % of its KV cache per running request
    assert eight["kv_cache_usage_max"] == SLOTS / 100


def test_an_output_beyond_the_context_is_refused_before_measuring(engine, tmp_path):
    began = time.monotonic()
    done = _loadtest(engine, tmp_path, "--osl", "10000000", "--concurrency", "1", "--duration", "60")
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode != 0 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "beyond the model's context of 2048 tokens" in lines[0] and "10000000" in lines[0]
    assert time.monotonic() - began < 50  # no 60 s step was run
    assert not list(tmp_path.glob("*.json"))
