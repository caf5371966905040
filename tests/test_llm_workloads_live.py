"""The workloads and the SLO-capacity search against the reference server of known timing, which logs each
request on its side (arrival on its own clock, prompt and message tokens, the prefix shared with earlier
prompts, cancellation): what arrived is what was asked. Each run is a second or two of load."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from llm_helpers import measured

from accelbench.loadtests import reference_server, traces
from accelbench.serving.server import free_port

pytestmark = pytest.mark.slow
ACCELBENCH = [sys.executable, "-m", "accelbench.cli"]
TRACE = Path(__file__).parent / "data" / "traces" / "mooncake_sample.jsonl"
CPU_LOCAL_USD_PER_HOUR = 0.08925  # catalog: cpu-local priced as c7i.large on-demand
SHORT = ("--warmup", "0.2", "--duration", "1", "--max-duration", "1")


def loadtest(url: str, out: Path, *args: str, timeout: float = 180) -> dict:
    cmd = [*ACCELBENCH, "loadtest", "--url", url, "--model", "reference", "--out", str(out), "--json", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    measured(done)  # a second of load may leave every step too short to trust: exit 5, the document printed
    return json.loads(done.stdout)


def server_log(url: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/requests", timeout=10) as answer:
        return json.loads(answer.read())["requests"]


def test_shared_prefix_reaches_the_server_as_asked(tmp_path):
    with reference_server.running(free_port(), "--ttft-ms", "10", "--itl-ms", "2", "--prefix-cache") as url:
        doc = loadtest(url, tmp_path, "--api", "openai", "--isl", "32", "--osl", "2", "--prefix-tokens", "24",
                       "--prefix-groups", "2", "--concurrency", "4", *SHORT)  # fmt: skip
        log = server_log(url)
    w = doc["load_profile"]["workload"]
    assert (w["prefix_tokens"], w["prefix_groups"]) == (24, 2) and "p24x2" in doc["run_id"]
    assert all(e["prompt_tokens"] == 32 for e in log)
    # a prompt's first send shares exactly its group's 24 tokens with earlier ones (a repeat shares all 32;
    # each group's first prompt nothing; a suffix may start like another by chance)
    first_sends = [e["cached_tokens"] for e in log if e["cached_tokens"] < 32]
    counts = Counter(first_sends)
    assert counts[0] == 2 and counts[24] >= 0.95 * (len(first_sends) - 2), counts
    # the server reports that prefix as cached (--prefix-cache): at least 24 of each measured prompt's 32 tokens
    cached = doc["steps"][0]["generative"]["cached_tokens"]
    assert cached["requests"] >= 1 and 0.7 <= cached["fraction"] <= 1.0, cached


@pytest.mark.parametrize("load", [("--concurrency", "2"), ("--rate", "8")])
def test_multi_turn_resends_the_history(tmp_path, load):
    """Closed loop: 2 users, a conversation each at a time; open loop: conversations arrive at 8/s."""
    isl, osl, turns = 8, 4, 3
    with reference_server.running(free_port(), "--ttft-ms", "10", "--itl-ms", "2") as url:
        doc = loadtest(url, tmp_path, "--api", "openai", "--isl", str(isl), "--osl", str(osl), "--turns", str(turns),
                       "--think-time", "0.05", *load, *SHORT)  # fmt: skip
        log = server_log(url)[1:]  # the preflight's first
    assert doc["load_profile"]["workload"]["turns"] == turns
    seen = Counter()
    for e in log:
        n = len(e["message_tokens"])
        assert n % 2 == 1 and n <= 2 * turns - 1, e
        assert e["messages"] == ["user", "assistant"] * (n // 2) + ["user"]
        assert e["message_tokens"] == [isl, osl] * (n // 2) + [isl], e  # every question and answer re-sent
        assert e["prompt_tokens"] == (n // 2 + 1) * isl + (n // 2) * osl
        seen[n // 2 + 1] += 1
    assert set(seen) == {1, 2, 3} and seen[1] >= seen[3] > 0, seen
    assert doc["steps"][0]["generative"]["requests"] > 0


def test_think_time_is_between_an_answer_and_the_next_turn(tmp_path):
    """One user: turn 2 arrives an answer (10 + 3 x 2 ms) plus the 100 ms think time after turn 1; a new
    conversation starts at once after the last turn's answer."""
    with reference_server.running(free_port(), "--ttft-ms", "10", "--itl-ms", "2") as url:
        loadtest(url, tmp_path, "--api", "openai", "--isl", "4", "--osl", "4", "--turns", "2", "--think-time", "0.1",
                 "--concurrency", "1", *SHORT)  # fmt: skip
        log = server_log(url)[1:]
    gaps = [(b["arrived_s"] - a["arrived_s"], len(b["messages"])) for a, b in zip(log, log[1:], strict=False)]
    assert all(gap >= 0.114 for gap, n in gaps if n == 3), gaps
    # (but where the warm-up ends and the measured window starts: the drain between them)
    assert sum(gap >= 0.08 for gap, n in gaps if n == 1) <= 2, gaps
    assert {n for _, n in gaps} == {1, 3}


def replay_laps(tmp_path: Path, laps: int) -> tuple[dict, list[dict]]:
    """The sample trace replayed ``laps`` times at its own rate in one step: the document and the server's log."""
    rate = traces.own_rate_rps(traces.read_trace(TRACE))
    seconds = f"{laps * (traces.read_trace(TRACE)[-1].at_s + 1 / rate) + 0.2:.2f}"
    with reference_server.running(free_port(), "--ttft-ms", "2", "--itl-ms", "1") as url:
        doc = loadtest(url, tmp_path, "--api", "openai", "--trace", str(TRACE), "--trace-block-tokens", "16",
                       "--rate", repr(rate), "--warmup", "0", "--duration", seconds, "--max-duration", seconds)  # fmt: skip
        return doc, server_log(url)


def lap_errors_ms(log: list[dict], laps: int) -> list[np.ndarray]:
    """Each lap's arrival errors (server clock, ms) after removing the lap's median offset."""
    entries = traces.read_trace(TRACE)
    want = np.array([e.at_s for e in entries])
    arrived = np.array([e["arrived_s"] for e in log])
    lengths = [e["prompt_tokens"] for e in log]
    # a lap is the trace's prompt lengths in order; the measured step's laps are the last ones
    starts = [
        k
        for k in range(len(log) - len(entries) + 1)
        if lengths[k : k + len(entries)] == [e.isl for e in entries]
    ]
    assert len(starts) >= laps, f"the trace's requests did not reach the server in order {laps} times"
    out = []
    for k in starts[-laps:]:
        error_ms = (arrived[k : k + len(entries)] - arrived[k] - want) * 1000
        out.append(error_ms - np.median(error_ms))
    return out


def test_trace_replay_keeps_the_traces_arrival_times(tmp_path):
    """At the trace's own rate every request arrives at its timestamp: offsets measured on the server's
    clock, aligned once per lap (the median offset), within 5 ms at p99 (plus the load process's lag p99).

    The host is shared (2 cores, other jobs): a process not scheduled for 20 ms delays what it sends then,
    whatever the generator does, and the load process measures exactly that (its event-loop lag, in the
    document). So the check is made on a measurement whose load process was on time (lag p99 within 5 ms;
    up to three tries, else skipped with the lags), on the better of two laps; every lap of it must keep its
    median error within 1 ms (a generator that mis-times fails every lap)."""
    lags = []
    for attempt in range(3):
        doc, log = replay_laps(tmp_path / str(attempt), laps=2)
        w = doc["load_profile"]["workload"]
        assert w["trace"] == TRACE.name and len(w["trace_sha256"]) == 64
        errors = lap_errors_ms(log, laps=2)
        lag = doc["steps"][0]["loadgen"]["event_loop_lag_us"]
        lags.append(lag)
        if lag["p99"] <= 5000:  # a measurement the host spoiled (the process not run on time) is not judged
            for e in errors:
                assert np.median(np.abs(e)) <= 1.0, (np.round(e, 2), lag)
            p99s = [float(np.percentile(np.abs(e), 99)) for e in errors]
            # within 5 ms, plus what the load process's own measured lag explains (a full-suite run: lag p99
            # 3.4 ms, error p99 5.4 ms on the better lap; the median check above is what a mis-timed generator fails)
            assert min(p99s) <= 5.0 + lag["p99"] / 1000, (p99s, lag)
            return
    pytest.skip(f"the host kept the load process from running on time in 3 tries (event-loop lag µs: {lags})")


def test_cancelled_requests_are_counted_and_the_server_sees_them_go(tmp_path):
    with reference_server.running(free_port(), "--ttft-ms", "60", "--itl-ms", "10") as url:
        doc = loadtest(url, tmp_path, "--api", "openai", "--isl", "8", "--osl", "8", "--cancel-after-ms", "30",
                       "--cancel-fraction", "0.5", "--concurrency", "4", *SHORT)  # fmt: skip
        log = server_log(url)
    g = doc["steps"][0]["generative"]
    assert doc["load_profile"]["workload"]["cancel_after_ms"] == 30
    assert g["cancelled"] > 0 and abs(g["cancelled"] - g["requests"] - g["truncated_requests"]) <= 2, g
    assert doc["steps"][0]["errors"]["connection"] == 0
    assert sum(e["cancelled"] for e in log) >= g["cancelled"] // 2


def test_embeddings_endpoint(tmp_path):
    with reference_server.running(free_port(), "--ttft-ms", "20") as url:
        doc = loadtest(
            url, tmp_path, "--api", "openai-embeddings", "--isl", "16", "--concurrency", "2", *SHORT
        )
        log = server_log(url)
    g = doc["steps"][0]["generative"]
    assert doc["load_profile"]["workload"]["api"] == "openai-embeddings"
    assert g["input_tokens"]["min"] == g["input_tokens"]["max"] == 16 and g["output_tokens"]["total"] == 0
    assert abs(g["e2e_us"]["p50"] / 1000 - 20) <= 5 and 0 <= g["e2e_us"]["p50"] - g["ttft_us"]["p50"] <= 1000
    assert {e["path"] for e in log} == {"/v1/embeddings"}


TTFT_MS, ITL_MS, OSL = 40, 10, 5  # a slot serves one answer for 40 + 4 x 10 = 80 ms


def search_slots(out: Path, slots: int) -> dict:
    with reference_server.running(free_port(), "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS),
                                  "--slots", str(slots)) as url:  # fmt: skip
        return loadtest(url, out, "--api", "openai", "--isl", "8", "--osl", str(OSL),
                        "--search", "concurrency", "--search-max-concurrency", "32", "--search-between", "3",
                        "--search-refinements", "6", "--slo-ttft-p99-ms", "80", "--slo-tpot-p99-ms", "30",
                        "--warmup", "0.3", "--duration", "0.7", "--max-duration", "0.7",
                        "--target", "cpu-local", "--precision", "fp32")  # fmt: skip


@pytest.mark.parametrize("slots", [4, 16])
def test_search_finds_the_servers_slots(tmp_path, slots):
    """Up to N in flight no request waits (TTFT 40 ms); above N one in N+1 waits a whole answer (TTFT about
    120 ms), which the p99 sees: the objective 80 ms is met exactly up to concurrency N. The report prices
    the answer's step.

    The objective leaves 40 ms above an unqueued TTFT: a load process the shared host stalls longer than
    half of that (its event-loop lag, in each step) can miss it at a concurrency below N. Such a search is
    run again (three tries, else skipped with the lags); one whose load process ran on time must answer N
    within one refinement step (the issue's bound): at N + 1 closed-loop users that have fallen out of step,
    the one waiting request waits for the next slot to free, a fraction of an answer, so N + 1 can meet the
    objective too (seen at N = 16); the step above the answer must then miss it."""
    lags: list[list[int]] = []
    for attempt in range(3):
        res = tmp_path / f"res{attempt}"
        doc = search_slots(res, slots)
        s = doc["search"]
        found = s["answer"].get("concurrency") if s["answer"] else None
        if found in (slots, slots + 1) and s["above"] == {"concurrency": found + 1}:
            break
        lags.append([x["loadgen"]["event_loop_lag_us"]["max"] for x in doc["steps"]])
        assert max(lags[-1]) > 20_000, (s, lags[-1])
    else:
        pytest.skip(f"the host stalled the load process in 3 tries (event-loop lag max µs per step: {lags})")
    assert [x["phase"] for x in s["steps"][:2]] == ["synchronous", "saturation"]
    assert {x["index"] for x in s["steps"]} == {x["index"] for x in doc["steps"]} and s["complete"]
    assert doc["load_profile"]["search"]["mode"] == "concurrency"
    answer = next(x for x in doc["steps"] if x["index"] == s["answer_step"])
    assert answer["offered"] == {"concurrency": found}
    done = subprocess.run([*ACCELBENCH, "report", str(res), "--out", str(tmp_path / "rep")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    row = next(csv.DictReader(io.StringIO((tmp_path / "rep" / "generative.csv").read_text())))
    assert float(row["capacity_concurrency"]) == found, row
    assert row["reason"].startswith("the SLO-capacity search's answer: concurrency")
    assert f"concurrency {found} met" in (tmp_path / "rep" / "report.md").read_text()
    tps = answer["generative"]["output_tokens_per_s"]["value"]
    assert float(row["usd_per_million_output_tokens"]) == pytest.approx(
        CPU_LOCAL_USD_PER_HOUR / (tps * 3600) * 1e6
    )


def test_rate_search_brackets_below_the_servers_capacity(tmp_path):
    """4 slots of 80 ms serve at most 50 requests/s: the rate search's answer lies below that, between the
    closed-loop synchronous and saturation steps' throughputs, with the rates it measured kept as steps."""
    with reference_server.running(free_port(), "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS),
                                  "--slots", "4") as url:  # fmt: skip
        doc = loadtest(url, tmp_path, "--api", "openai", "--isl", "8", "--osl", str(OSL), "--search", "rate",
                       "--search-max-concurrency", "16", "--search-between", "3", "--search-refinements", "1",
                       "--slo-ttft-p99-ms", "150", "--warmup", "0.3", "--duration", "1", "--max-duration", "1")  # fmt: skip
    s = doc["search"]
    steps = {x["index"]: x for x in doc["steps"]}
    assert [x["phase"] for x in s["steps"]] == ["synchronous", "saturation", "between", "between", "between",
                                                "refinement"]  # fmt: skip
    assert [steps[x["index"]]["offered"] for x in s["steps"][:2]] == [{"concurrency": 1}, {"concurrency": 16}]
    sync, sat = steps[0]["throughput_rps"], steps[1]["throughput_rps"]
    assert sync < sat <= 50 * 1.1
    if s["answer"] is not None:
        assert 0 < s["answer"]["rate_rps"] < 50 and s["answer_step"] in steps
        assert s["above"] is None or s["above"]["rate_rps"] > s["answer"]["rate_rps"]
