"""Real Locust against the real local tritonserver serving builtin:identity: closed- and open-loop sweeps
with 2 load processes, exact counts against the server's statistics, resume, and a server killed mid-sweep."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from verdict_checks import check_verdict

from accelbench.documents import to_dict
from accelbench.loadtests.api import loadtest
from accelbench.loadtests.events import StepProgress
from accelbench.loadtests.profiles import LoadProfile
from accelbench.loadtests.verdict import Limits
from accelbench.serving import LocalTriton
from accelbench.serving.stats import stats_snapshot

pytestmark = pytest.mark.slow
ACCELBENCH = str(Path(sys.executable).parent / "accelbench")
MODEL = "identity__cpu-local__fp32"


@pytest.fixture(scope="module")
def repo(identity_repo) -> Path:
    return identity_repo


@pytest.fixture(scope="module")
def triton(repo):
    with LocalTriton(repo) as server:
        yield server


def sweep(triton, tmp_path, kind: str, levels, protocol: str = "http", processes: int = 2, batch: int = 1):
    profile = LoadProfile(kind=kind, protocol=protocol, levels=levels, duration_s=2.0, warmup_s=0.5,
                          processes=processes, batch_size=batch)  # fmt: skip
    doc, path = loadtest(model=MODEL, profile=profile, out_dir=tmp_path, url=triton.http_url,
                         grpc_url=triton.grpc_url, card_uri="builtin:identity")  # fmt: skip
    return to_dict(doc), path  # checked as it is on disk


def check_steps(doc: dict, n: int) -> None:
    assert doc["schema"] == "accelbench.result/1" and doc["complete"]
    assert [s["index"] for s in doc["steps"]] == list(range(n))
    for step in doc["steps"]:
        lat = step["latency_us"]
        check_verdict(step)
        stats = step["statistics"]
        assert stats["n"] >= 662 and stats["n"] + stats["truncated"]["requests"] == step["requests"]
        assert all("below the 662" not in r for r in step["reasons"]), step["reasons"]
        p99 = stats["latency_us"]["p99"]
        assert p99["low"] <= p99["value"] == lat["p99"] <= p99["high"] <= stats["upper_99_us"]
        # identity answers in well under 100 ms: µs values, not Locust's whole milliseconds (0 or 1)
        assert lat["p50"] > 10 and lat["p50"] < 100_000
        assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
        assert sum(step["errors"].values()) == 0, step["last_error"]
        # every request the merged histograms counted, the server counted as a success, and no other
        assert step["requests"] == step["server_stats"]["success_count"] > 0
        assert step["loadgen"]["processes"] == 2
        assert step["histogram"]


def test_closed_loop_sweep_two_processes(triton, tmp_path):
    doc, path = sweep(triton, tmp_path, "closed", (1, 4))
    check_steps(doc, 2)
    assert doc["steps"][1]["offered"] == {"concurrency": 4}
    assert json.loads(path.read_text())["steps"][0]["requests"] == doc["steps"][0]["requests"]
    # a rerun with the same manifest and profile measures nothing again
    again, _ = sweep(triton, tmp_path, "closed", (1, 4))
    assert [s["started_at"] for s in again["steps"]] == [s["started_at"] for s in doc["steps"]]


def test_open_loop_sweep_two_processes(triton, tmp_path):
    doc, _ = sweep(triton, tmp_path, "open", (100.0, 200.0))
    check_steps(doc, 2)
    for step, rate in zip(doc["steps"], (100.0, 200.0), strict=True):
        assert step["offered"] == {"rate_rps": rate}
        assert step["latency_from"] == "intended send time"
        # Poisson arrivals: roughly rate × duration (seeded, so not exact); at 100/s the step ran past its 2 s
        # minimum until it had p99's 662 requests
        assert 0.6 * rate * step["duration_s"] < step["requests"] < 1.4 * rate * step["duration_s"]
        assert step["duration_s"] >= 2.0 and (rate > 150 or step["duration_s"] > 6.0)


def test_grpc_closed_loop_one_process_batch_4(triton, tmp_path):
    doc, _ = sweep(triton, tmp_path, "closed", (2,), protocol="grpc", processes=1, batch=4)
    step = doc["steps"][0]
    assert step["requests"] == step["server_stats"]["success_count"] > 0
    assert sum(step["errors"].values()) == 0, step["last_error"]
    assert step["inferences"] == 4 * step["requests"] == step["server_stats"]["inference_count"]
    assert step["throughput_ips"] == pytest.approx(4 * step["throughput_rps"], rel=1e-3)
    assert 10 < step["latency_us"]["p50"] < 100_000


def _cmdline(proc) -> list[str]:
    """A process's command line; none for one that has exited meanwhile (gone, or a zombie not yet reaped by its
    parent: psutil raises for those, and an exited process is not left running)."""
    import psutil

    try:
        return proc.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return []


def test_a_cancel_during_a_step_stops_the_sweep_after_that_step_and_a_rerun_resumes(triton, tmp_path):
    """Cancel while step 0 runs: step 0 finishes and is recorded, step 1 never starts, the document is not
    complete and no load process is left; a rerun measures only the rest and keeps step 0 as it was."""
    import psutil

    from accelbench.loadtests.api import measure
    from accelbench.loadtests.events import Cancel, StepFinished
    from accelbench.loadtests.sweep import SweepOptions
    from accelbench.loadtests.verdict import Limits
    from accelbench.models.cards import load_card

    profile = LoadProfile(kind="closed", protocol="http", levels=(1, 2, 3), duration_s=1.0, warmup_s=0.3,
                          processes=1)  # fmt: skip
    cancel, seen = Cancel(), []

    def on_event(event) -> None:
        seen.append(event)
        if isinstance(event, StepProgress) and event.index == 0:
            cancel.request("test")  # mid step 0: its windows are arriving

    card = load_card("builtin:identity")
    # no retries: a rerun would otherwise measure step 0 again when this loaded machine made it drift
    limits = Limits(retries=0)
    options = SweepOptions(out_dir=tmp_path, on_event=on_event, cancel=cancel, limits=limits)
    doc, path = measure(triton, model=MODEL, profile=profile, options=options, card=card)
    assert [s.index for s in doc.steps] == [0] and not doc.complete and not doc.steps[0].aborted
    assert [e.step.index for e in seen if isinstance(e, StepFinished)] == [0]
    assert {e.index for e in seen if isinstance(e, StepProgress)} == {0}
    on_disk = json.loads(path.read_text())
    assert [s["index"] for s in on_disk["steps"]] == [0] and not on_disk.get("complete")
    runners = [p for p in psutil.Process().children(recursive=True)
               if "accelbench.loadtests.runner" in " ".join(_cmdline(p))]  # fmt: skip
    assert runners == []
    again, _ = measure(
        triton, model=MODEL, profile=profile, options=SweepOptions(tmp_path, limits=limits), card=card
    )
    assert [s.index for s in again.steps] == [0, 1, 2] and again.complete
    assert again.steps[0].started_at == doc.steps[0].started_at


def test_server_killed_mid_sweep(repo, tmp_path):
    """The server killed while a sweep runs: one clear line, the steps finished before are kept whole, and the
    step it cut short is recorded INVALID, aborted, as the last one. Which step that is depends on the host: the
    server is killed as soon as step 0 is on disk, and a loaded machine may write it steps late (a CI run's
    parent took over 2.5 s; five busy processes on two cores, over 10 s), so there are steps to spare."""
    out = tmp_path / "out"
    with LocalTriton(repo) as server:
        cmd = [ACCELBENCH, "loadtest", "--url", server.http_url, "--model", MODEL, "--card", "builtin:identity",
               "--concurrency", "1,2,3,4,5,6", "--duration", "2", "--warmup", "0.5", "--retries", "0",
               "--out", str(out)]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        result = out / f"{MODEL}__closed-http-b1.json"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _steps(result):
            time.sleep(0.1)
        os.kill(server.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode != 0
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelbench: error:"), stderr
    assert "did not finish" in lines[0] and "Traceback" not in stderr
    steps = json.loads(result.read_text())["steps"]
    seen = [(s["index"], s["verdict"], s["aborted"]) for s in steps]
    *finished, cut = steps
    assert 1 <= len(finished) <= 5 and [s["index"] for s in steps] == list(range(len(steps))), seen
    # the finished steps are kept whole (their verdicts are whatever the measurement earned on a shared machine)
    assert all(not s["aborted"] and s["requests"] > 0 for s in finished), seen
    assert cut["verdict"] == "INVALID" and cut["aborted"], seen
    assert any("did not finish" in r for r in cut["reasons"])


def _steps(path: Path) -> list:
    try:
        return json.loads(path.read_text())["steps"]
    except (OSError, ValueError):
        return []


def test_locust_cli_runs_the_same_users_with_exact_merged_latencies(triton):
    locust = str(Path(sys.executable).parent / "locust")
    cmd = [locust, "-f", "accelbench/loadtests/locustfile.py", "--headless", "-u", "2", "-r", "2", "-t", "3s",
           "--processes", "2", "--host", triton.http_url, "--triton-model", MODEL, "--only-summary"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-2000:]
    line = next(ln for ln in out.splitlines() if ln.startswith("accelbench exact latency"))
    exact = int(line.split("(µs, ")[1].split()[0])
    aggregated = next(ln for ln in out.splitlines() if ln.strip().startswith("Aggregated"))
    assert exact > 0 and exact == int(aggregated.split()[1])  # both workers' histograms merged


def test_wrong_outputs_are_classified_and_invalidate_the_step(triton, tmp_path):
    from accelbench.loadtests.sweep import Server, SweepOptions, run_sweep
    from accelbench.models.cards import load_card
    from accelbench.models.inputs import make_inputs

    card = load_card("builtin:identity")
    # every answer is wrong, so no latency sample counts towards the floor: capped, or the step runs 60 s
    profile = LoadProfile(kind="closed", protocol="http", levels=(1,), duration_s=1.0, warmup_s=0.2,
                          max_duration_s=2.0)  # fmt: skip
    doc, _ = run_sweep(
        server=Server(triton.http_url, triton.grpc_url, triton.metrics_url),
        model=MODEL,
        variant=MODEL,
        payloads=make_inputs(card, 1, 8, 0),
        expected_outputs=[{"name": "y", "dtype": "float16", "shape": [-1, 16]}],  # the model answers float32
        profile=profile,
        options=SweepOptions(tmp_path),
    )
    step = to_dict(doc)["steps"][0]
    assert step["errors"]["wrong_output"] == step["requests"] > 0
    assert step["verdict"] == "INVALID" and any("error rate" in r for r in step["reasons"])
    assert "dtype float32, expected float16" in step["last_error"]


def test_a_load_process_dying_mid_step_invalidates_it(triton, tmp_path):
    """A load process killed while a sweep runs: exit 5 (the load generator, not the server), one line, and the
    step it cut short recorded INVALID as the last one, the steps before it kept. It is killed once the server
    has answered the sweep's requests; which step that cuts depends on the host, so there are steps to spare."""
    import psutil

    out = tmp_path / "out"
    cmd = [ACCELBENCH, "loadtest", "--url", triton.http_url, "--model", MODEL, "--card", "builtin:identity",
           "--concurrency", "2,2,2,2", "--duration", "2", "--warmup", "0.5", "--processes", "2", "--retries", "0",
           "--out", str(out)]  # fmt: skip
    before = stats_snapshot(triton.http_url, MODEL)["inference_count"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, workers = time.monotonic() + 120, []
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            family = psutil.Process(proc.pid).children(recursive=True)
            workers = [p for p in family if "--worker" in _cmdline(p)]
        if len(workers) == 2 and stats_snapshot(triton.http_url, MODEL)["inference_count"] > before:
            break
        time.sleep(0.05)
    assert len(workers) == 2, f"{len(workers)} load processes seen; loadtest exit code {proc.poll()}"
    workers[1].kill()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 5, stderr  # MeasurementError: the load generator, not the server
    assert len(stderr.strip().splitlines()) == 1 and "load process 1 exited" in stderr
    steps = json.loads((out / f"{MODEL}__closed-http-b1.json").read_text())["steps"]
    seen = [(s["index"], s["verdict"], s["aborted"]) for s in steps]
    *finished, cut = steps
    assert len(finished) <= 3 and all(not s["aborted"] for s in finished), seen
    assert cut["verdict"] == "INVALID" and "load process 1 exited" in (cut["aborted"] or ""), seen


class Throttle:
    """Slows a running server down the way a cgroup's CPU quota does: from ``start()`` on, its whole process group
    is stopped for ``stop_s`` out of every ``stop_s + run_s`` (SIGSTOP/SIGCONT), for ``duration_s``. A slowdown
    of a known size that does not depend on what else the machine runs, unlike CPU hogs, which the scheduler may
    or may not put in the server's way (a CI run once measured no change at all under six of them)."""

    def __init__(self, pgid: int, *, stop_s: float = 0.03, run_s: float = 0.02, duration_s: float = 10.0):
        self.pgid, self.stop_s, self.run_s, self.duration_s = pgid, stop_s, run_s, duration_s
        self.cycles = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        end = time.monotonic() + self.duration_s
        while time.monotonic() < end and not self._done.is_set():
            os.killpg(self.pgid, signal.SIGSTOP)
            try:
                self._done.wait(self.stop_s)
            finally:
                os.killpg(self.pgid, signal.SIGCONT)
            self.cycles += 1
            self._done.wait(self.run_s)

    def close(self) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()


def test_a_server_slowed_halfway_through_a_step_is_drift(repo, tmp_path):
    """A server slowed down from the middle of a 16 s step to its end (stopped 60 % of the time, as by a CPU
    quota) must make the step INVALID "drift" with the size of the change (docs/statistics.md). Thirty batch
    means instead of the default twenty: a level shift at the middle is Mann–Kendall's hardest case (its p reaches
    only ~0.001 with twenty, perfectly separated), and this test is about catching the slowdown, not about the
    threshold. The step is then measured again (``retries=1``), and the drifting attempt is the one kept inside
    it."""
    profile = LoadProfile(kind="closed", protocol="http", levels=(2,), duration_s=16.0, max_duration_s=16.0,
                          warmup_s=1.0, processes=1)  # fmt: skip
    throttles: list[Throttle] = []
    with LocalTriton(repo) as server:
        assert server.pid is not None

        def on_event(event) -> None:
            if isinstance(event, StepProgress) and event.elapsed_s >= 7.5 and not throttles:
                throttles.append(Throttle(os.getpgid(server.pid), duration_s=10.0))
                throttles[0].start()

        try:
            doc, _ = loadtest(model=MODEL, profile=profile, out_dir=tmp_path, url=server.http_url,
                              card_uri="builtin:identity", on_event=on_event,
                              limits=Limits(drift_batches=30, retries=1))  # fmt: skip
        finally:
            for throttle in throttles:
                throttle.close()
    measured = to_dict(doc)["steps"][0]
    # the drifting step is measured once more (--retries 1; the slowdown is over by then) and kept inside it
    assert measured["attempt"] == 2 and len(measured["earlier_attempts"]) == 1, measured["reasons"]
    step = measured["earlier_attempts"][0]
    assert throttles and throttles[0].cycles > 50, "the slowdown never started"
    assert step["verdict"] == "INVALID", (step["reasons"], step["statistics"])
    assert step["reasons"] and all(r.startswith("drift: ") for r in step["reasons"]), step["reasons"]
    stats = step["statistics"]["drift"]
    assert stats["batches"] == 30
    # the slowdown shows as latency up or throughput down (closed loop: usually both), beyond 5 % at p < 0.01
    latency, throughput = stats["latency"], stats["throughput"]
    assert latency["drift"] or throughput["drift"], stats
    for trend, sign in ((latency, 1), (throughput, -1)):
        if trend["drift"]:
            assert sign * trend["change"] > 0.05 and trend["p"] < 0.01, stats
    assert step["statistics"]["truncated"]["seconds"] < 7.5  # the slowdown was not cut away as a warm-up
