"""Distributed Locust on loopback: a master (`accelbench loadtest --master-bind --expect-workers 2`) and two
separate `accelbench loadtest-worker` processes against the real local Triton serving builtin:identity."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from verdict_checks import check_verdict

from accelbench.serving import LocalTriton
from accelbench.serving.server import free_port

pytestmark = pytest.mark.slow
ACCELBENCH = str(Path(sys.executable).parent / "accelbench")
MODEL = "identity__cpu-local__fp32"


@pytest.fixture(scope="module")
def triton(identity_repo):
    with LocalTriton(identity_repo) as server:
        yield server


def _descendants(procs: list[subprocess.Popen], seen: set[int]) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            seen.update(c.pid for c in psutil.Process(proc.pid).children(recursive=True))


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_master_and_two_worker_processes_merge_exactly(triton, tmp_path):
    port = free_port()
    out = tmp_path / "out"
    master_cmd = [ACCELBENCH, "loadtest", "--url", triton.http_url, "--model", MODEL, "--card", "builtin:identity",
                  "--concurrency", "2,4", "--duration", "2", "--warmup", "0.5", "--out", str(out),
                  "--master-bind", f"127.0.0.1:{port}", "--expect-workers", "2", "--worker-timeout", "60"]  # fmt: skip
    master = subprocess.Popen(master_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker_cmd = [ACCELBENCH, "loadtest-worker", "--master", f"127.0.0.1:{port}", "--connect-timeout", "60"]
    workers = [subprocess.Popen(worker_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]  # fmt: skip
    procs, seen = [master, *workers], set()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        _descendants(procs, seen)
        time.sleep(0.2)
    outs = [p.communicate(timeout=30) for p in procs]
    assert master.returncode == 0, outs[0]
    for worker, (stdout, stderr) in zip(workers, outs[1:], strict=True):
        assert worker.returncode == 0, stderr[-2000:]
        assert f"model {MODEL}" in stdout and triton.http_url in stdout  # the target came from the master
    doc = json.loads((out / f"{MODEL}__closed-http-b1.json").read_text())
    assert doc["complete"] and [s["offered"] for s in doc["steps"]] == [
        {"concurrency": 2},
        {"concurrency": 4},
    ]
    for step in doc["steps"]:
        per = step["loadgen"]["per_process"]
        # both workers contributed (Locust hands each one user of two), each from its own process
        assert step["loadgen"]["processes"] == 2 and len({p["pid"] for p in per}) == 2
        assert [p["index"] for p in per] == [0, 1]
        assert all(p["requests"] > 0 for p in per), per
        assert sum(p["requests"] for p in per) == step["requests"]
        # the merged histograms count exactly the requests Triton counted as successes in the step
        assert step["requests"] == step["server_stats"]["success_count"] > 0
        assert sum(step["errors"].values()) == 0, step["last_error"]
        lat = step["latency_us"]
        assert 10 < lat["p50"] < 100_000 and lat["p50"] <= lat["p99"] <= lat["max"]  # µs, not 0/1 ms
        check_verdict(step)  # the verdict the rules give on the merged step's own statistics
    assert seen, "the workers' load processes were never seen"
    assert not [pid for pid in seen | {p.pid for p in procs} if _alive(pid)]


def test_a_retried_step_is_measured_again_by_the_same_workers(triton, tmp_path):
    """Workers started elsewhere cannot be asked back: the master keeps them while the sweep retries a step
    INVALID for drift, and the retry merges the same two worker processes' counts."""
    from accelbench.loadtests.api import loadtest
    from accelbench.loadtests.distributed import MasterBind
    from accelbench.loadtests.profiles import LoadProfile
    from accelbench.loadtests.verdict import Limits

    port = free_port()
    worker_cmd = [ACCELBENCH, "loadtest-worker", "--master", f"127.0.0.1:{port}", "--connect-timeout", "60"]
    workers = [subprocess.Popen(worker_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]  # fmt: skip
    # every trend counts as drift and nothing else makes a step INVALID: each step is measured twice
    limits = Limits(drift_p=1.01, drift_change=-1.0, max_loadgen_cpu=float("inf"), retries=1)
    profile = LoadProfile(kind="closed", levels=(2,), duration_s=2.0, warmup_s=0.5, max_duration_s=10.0,
                          processes=2)  # fmt: skip
    try:
        doc, _ = loadtest(model=MODEL, profile=profile, out_dir=tmp_path, url=triton.http_url,
                          card_uri="builtin:identity", limits=limits,
                          master_bind=MasterBind("127.0.0.1", port, 2, timeout_s=30.0))  # fmt: skip
        outs = [w.communicate(timeout=60) for w in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert doc.complete
    (step,) = doc.steps
    assert step.attempt == 2 and step.verdict == "INVALID"
    assert step.reasons and all(r.startswith("drift: ") for r in step.reasons), step.reasons
    (first,) = step.earlier_attempts or []
    assert first.reasons and all(r.startswith("drift: ") for r in first.reasons), first.reasons

    def pids(attempt) -> list[int]:
        return sorted(p["pid"] for p in attempt.loadgen.per_process)

    assert len(set(pids(step))) == 2 and pids(first) == pids(step)  # the same two worker processes
    assert (
        step.server_stats is not None and step.requests == step.server_stats.success_count > 0
    )  # the retry's counts merged exactly
    for worker, (_, stderr) in zip(workers, outs, strict=True):
        assert worker.returncode == 0, stderr[-2000:]


def test_master_without_workers_fails_in_its_timeout_with_one_line(triton, tmp_path):
    port = free_port()
    cmd = [ACCELBENCH, "loadtest", "--url", triton.http_url, "--model", MODEL, "--card", "builtin:identity",
           "--concurrency", "1", "--duration", "1", "--out", str(tmp_path),
           "--master-bind", f"127.0.0.1:{port}", "--expect-workers", "2", "--worker-timeout", "3"]  # fmt: skip
    t0 = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert run.returncode != 0
    assert time.monotonic() - t0 < 60
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert "only 0 of 2 workers connected" in lines[0] and f"127.0.0.1:{port}" in lines[0]


def test_worker_without_master_fails_with_one_line(tmp_path):
    port = free_port()
    cmd = [ACCELBENCH, "loadtest-worker", "--master", f"127.0.0.1:{port}", "--connect-timeout", "5"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "no accelbench master answered" in lines[0], run.stderr


def test_a_worker_cut_off_from_its_master_says_the_master_keeps_only_its_finished_steps(triton, tmp_path):
    """The master stops (SIGSTOP: a cut link looks the same from the worker) mid-sweep; the worker gives up
    after --master-silence and its last line says what the master kept, exit 5 (before: exit 0, "results are
    on the master") (issue 50)."""
    import os
    import signal

    port = free_port()
    master_cmd = [ACCELBENCH, "loadtest", "--url", triton.http_url, "--model", MODEL, "--card", "builtin:identity",
                  "--concurrency", "1,1,1,1", "--duration", "3", "--warmup", "0.5", "--out", str(tmp_path),
                  "--master-bind", f"127.0.0.1:{port}", "--expect-workers", "1", "--worker-timeout", "60"]  # fmt: skip
    master = subprocess.Popen(
        master_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    out = tmp_path / "worker.out"
    with open(out, "w") as sink:
        worker = subprocess.Popen([ACCELBENCH, "loadtest-worker", "--master", f"127.0.0.1:{port}", "--master-silence",
                                   "2"], stdout=sink, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while "index 0" not in out.read_text() and time.monotonic() < deadline and worker.poll() is None:
            time.sleep(0.2)
        time.sleep(1.0)  # into the first step
        os.killpg(master.pid, signal.SIGSTOP)
        _, stderr = worker.communicate(timeout=60)
    finally:
        family = [master.pid]
        with contextlib.suppress(psutil.NoSuchProcess):
            family += [c.pid for c in psutil.Process(master.pid).children(recursive=True)]
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        master.wait(timeout=30)
    lines = stderr.strip().splitlines()
    assert worker.returncode == 5 and len(lines) == 1 and "Traceback" not in stderr, stderr
    assert "lost the master at 127.0.0.1" in lines[0] and "silent for 2 s" in lines[0]
    assert "cut short and not kept" in lines[0] and "results are on the master" not in stderr
