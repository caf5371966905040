"""The Locust side of a sweep, run as a child process: ``python -m accelbench.loadtests.runner CONFIG``.

Locust (through gevent) monkey-patches the standard library, so it never runs in the caller's process.
The child is a local runner (1 process) or a master that starts N worker processes (``--worker``); it
drives every process's Agent through custom messages (warm-up, measure, pause) and writes one JSON line
per event on its stdout (``events.to_wire``): ``StepProgress`` per measured window, ``StepMeasured`` per
finished (or aborted) step, ``StepsDone`` when the planned steps are measured. Then it reads more steps from
its stdin (the sweep's retries: the same load processes, and the same workers on other hosts, measure them)
until the caller closes it.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import dataclasses  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

import gevent  # noqa: E402
import numpy as np  # noqa: E402
from gevent.socket import wait_read  # noqa: E402

from accelbench.loadtests import genstats, histogram, samples, users  # noqa: E402
from accelbench.loadtests.edge import ChildConfig  # noqa: E402
from accelbench.loadtests.events import (  # noqa: E402
    LoadDone,
    LoadFailed,
    MeasuredStep,
    ProcessShare,
    StepMeasured,
    StepProgress,
    StepsDone,
    WireEvent,
)
from accelbench.loadtests.process_side import (  # noqa: E402
    ProcessSide,
    events_writer,
    load_payloads,
    make_agent,
    one_line,
    user_class,
)
from accelbench.loadtests.profiles import StepPlan  # noqa: E402
from accelbench.loadtests.statistics import warmup_cut  # noqa: E402
from accelbench.processes import end_member, start_member  # noqa: E402

users.init_grpc_gevent()
SAMPLE_MARGIN = 1.05  # no point judging before the floor plus a typical warm-up cut

from locust.env import Environment  # noqa: E402
from locust.rpc import Message  # noqa: E402
from locust.runners import LocalRunner, MasterRunner  # noqa: E402

from accelbench.loadtests.jsonwire import TritonJson  # noqa: E402

if TYPE_CHECKING:
    from accelbench.loadtests.metrics_poll import PollerProcess

Emit = Callable[[WireEvent], None]
Dead = Callable[[], str | None]  # why a load process is gone, or None


class Controller:
    """Runs the step plan from the master (or local) side and reports each step."""

    def __init__(
        self,
        runner: LocalRunner | MasterRunner,
        cfg: ChildConfig,
        n_procs: int,
        emit: Emit,
        dead: Dead | None = None,
    ) -> None:
        self.runner, self.cfg, self.n_procs, self.emit = runner, cfg, n_procs, emit
        self.profile = cfg.profile
        self._dead = dead
        self.token = 0
        self.drained: dict[int, list[users.Totals]] = {}  # by token
        self.windows: dict[int, dict[int, list[users.Window]]] = {}  # by token, then window
        # requests to wait for: the judged percentile's sample floor after the warm-up cut
        self.floor = cfg.sample_floor
        self.enough = int(self.floor * SAMPLE_MARGIN + 0.999)
        runner.register_message("ab_drained", self._on_drained)
        runner.register_message("ab_window", self._on_window)
        self.stats = _StatsProbe(cfg)
        self.poller = _engine_poller(cfg)  # its own process, polling during the measured windows

    def _on_drained(self, environment: Environment, msg: Message, **_kw: Any) -> None:
        self.drained.setdefault(msg.data["token"], []).append(msg.data)

    def _on_window(self, environment: Environment, msg: Message, **_kw: Any) -> None:
        self.windows.setdefault(msg.data["token"], {}).setdefault(msg.data["k"], []).append(msg.data)

    def _send(self, phase: str, **data: Any) -> int:
        self.token += 1
        self.runner.send_message("ab_phase", {"phase": phase, "token": self.token, **data})
        return self.token

    def _pause(self) -> list[users.Totals]:
        token = self._send("pause")
        deadline = time.monotonic() + self.profile.timeout_s + 15
        while len(self.drained.get(token, [])) < self.n_procs and time.monotonic() < deadline:
            if self.dead_worker():
                break
            gevent.sleep(0.01)
        gevent.sleep(0.05)  # the server updates its statistics just after it answers
        return self.drained.pop(token, [])

    def dead_worker(self) -> str | None:
        """Why a load process is gone, if one is: its counts would be missing from the merge."""
        return self._dead() if self._dead is not None else None

    def _spawn_users(self, count: int) -> None:
        self.runner.start(count, spawn_rate=100 * self.n_procs)  # Locust warns above 100/s per process
        deadline = time.monotonic() + 15
        while self.runner.user_count != count and time.monotonic() < deadline:
            gevent.sleep(0.05)

    def run(self, more: Callable[[], list[StepPlan]] = list) -> None:
        """Measure the planned steps, then each batch ``more`` gives (the caller's retries, on the same load
        processes and workers) until it gives none; a step cut short ends the run."""
        plans = list(self.cfg.steps)
        while plans:
            for plan in plans:
                step = self.run_step(plan)
                self.emit(StepMeasured(step))
                if step.aborted:
                    return
            self.emit(StepsDone())
            plans = more()

    def run_step(self, plan: StepPlan) -> MeasuredStep:
        self._spawn_users(plan.concurrency if plan.concurrency is not None else self.n_procs)
        rate = None if plan.rate_rps is None else plan.rate_rps / self.n_procs
        self._send("warmup", step=plan.index, rate_rps=rate)
        gevent.sleep(self.profile.warmup_s)
        self._pause()
        before, aborted = self.stats.snapshot()
        if aborted:
            return MeasuredStep(plan.index, plan.offered, aborted=aborted)
        # the engine's counters read before the window opens (its users paused), so they cover all of it
        poller = self.poller.start() if self.poller is not None else None
        started_at = _utc_now()
        token = self._send("measure")
        t0 = time.monotonic()
        windows, aborted = self._watch(token, t0, plan)
        duration_s = round(time.monotonic() - t0, 3)
        engine_metrics = poller.stop() if poller is not None else None
        totals = self._pause()
        after, failure = self.stats.snapshot()
        aborted_by = None
        if len(totals) < self.n_procs:
            aborted_by = "loadgen"
            failure = self.dead_worker() or f"only {len(totals)} of {self.n_procs} load processes reported"
        if totals:
            # each process counted the requests it started between its own measure and pause messages;
            # their windows, not the master's, are what the counts divide by (messages can arrive late)
            duration_s = round(sum(t["window_s"] for t in totals) / len(totals), 3)
        server_stats, metrics = self.stats.deltas(before, after)
        return _combine(
            MeasuredStep(
                plan.index,
                plan.offered,
                aborted=aborted or failure,
                aborted_by=aborted_by,
                started_at=started_at,
                duration_s=duration_s,
                windows=tuple(windows),
                server_stats=server_stats,
                metrics=metrics,
                engine_metrics=engine_metrics,
            ),
            totals,
            self.n_procs,
        )

    def _enough(self, latencies: list[np.ndarray]) -> bool:
        """MSER-5 finds a steady state and the requests after its cut reach the sample floor (Hoad, Robinson
        & Davies 2010: when the truncation point lies beyond half the series, run longer)."""
        lat = np.concatenate(latencies) if latencies else np.zeros(0)
        if len(lat) < self.enough:
            return False
        cut = warmup_cut(lat)
        return cut.steady and len(lat) - cut.cut >= self.floor

    def _watch(self, token: int, t0: float, plan: StepPlan) -> tuple[list[tuple[float, float]], str | None]:
        """Measure at least ``duration_s``, then until the sample floor is reached, at most
        ``max_duration_s``; the windows seen, and why the step was cut short (None: it was not)."""
        minimum = self.profile.duration_s or 0.0
        maximum = max(self.profile.max_duration_s, minimum)
        if plan.max_duration_s is not None:  # a search step's share of its time budget
            maximum = min(maximum, plan.max_duration_s)
            minimum = min(minimum, maximum)
        seen: list[tuple[float, float]] = []
        latencies: list[np.ndarray] = []
        while True:
            gevent.sleep(0.05)
            elapsed = time.monotonic() - t0
            got = self.windows.get(token, {})
            while len(got.get(len(seen) + 1, [])) >= self.n_procs:
                parts = got[len(seen) + 1]
                merged = histogram.merge(p["histogram"] for p in parts)
                rps = sum(p["requests"] for p in parts) / self.profile.window_s
                p99 = merged.get_value_at_percentile(99.0) if merged.get_total_count() else 0
                latencies.append(samples.merge(p.get("samples") for p in parts)[1])
                seen.append((rps, float(p99)))
                self.emit(StepProgress(plan.index, plan.offered, round(elapsed, 1), rps, p99))
                if merged.get_total_count() == 0 and any(p["errors"]["connection"] for p in parts):
                    return seen, "the server stopped answering (connection errors, no successes)"
            if self.dead_worker():
                return seen, None
            if elapsed >= maximum or (elapsed >= minimum and self._enough(latencies)):
                return seen, None


def _combine(step: MeasuredStep, totals: list[users.Totals], n_procs: int) -> MeasuredStep:
    """``step`` with the processes' counts added and their histograms merged exactly."""
    merged = histogram.merge(t["histogram"] for t in totals)
    errors = dict.fromkeys(users.ERROR_KINDS, 0)
    for t in totals:
        for kind, n in t["errors"].items():
            errors[kind] += n
    last_errors = [t["last_error"] for t in totals if t["last_error"]]
    return dataclasses.replace(
        step,
        requests=sum(t["requests"] for t in totals),
        inferences=sum(t["inferences"] for t in totals),
        successes=merged.get_total_count(),
        errors=errors,
        drops=sum(t["drops"] for t in totals),
        histogram=histogram.encode(merged) if merged.get_total_count() else None,
        loadgen=tuple(
            ProcessShare(
                cpu_s=round(t["cpu_s"], 4),
                wall_s=round(t["wall_s"], 4),
                requests=t["requests"],
                index=t.get("process_index"),
                host=t.get("host"),
                pid=t.get("pid"),
            )
            for t in sorted(totals, key=lambda t: t.get("process_index") or 0)
        ),
        processes_reported=len(totals),
        processes_expected=n_procs,
        last_error=last_errors[0] if last_errors else None,
        loop_lag_us=_lag_summary(totals),
        samples=samples.merge_encoded(t.get("samples") for t in totals),
        generative=genstats.combine(t.get("generative") for t in totals),
    )


def _lag_summary(totals: list[users.Totals]) -> dict[str, float | int | None]:
    lag = histogram.merge(t.get("loop_lag") for t in totals)
    summary = histogram.summary_us(lag)
    return {k: summary[k] for k in ("p50", "p99", "max")}


class _StatsProbe:
    """Triton's per-model statistics and metrics around a measured window."""

    def __init__(self, cfg: ChildConfig) -> None:
        self.http_url, self.metrics_url, self.model = cfg.http_url, cfg.metrics_url, cfg.load.model
        workload = cfg.load.workload
        if workload is not None and workload.api.startswith("openai"):
            self.http_url = self.metrics_url = None  # not a Triton: no per-model statistics to read

    def snapshot(self) -> tuple[TritonJson | None, str | None]:
        if not self.http_url:
            return None, None
        # the serving stage, imported only when a server is probed
        from accelbench.serving.metrics import scrape_metrics
        from accelbench.serving.stats import stats_snapshot

        try:
            snap: TritonJson = {"stats": stats_snapshot(self.http_url, self.model), "metrics": None}
        except Exception as err:  # any failure here means the server is gone or broken
            return None, f"the server stopped answering ({one_line(err)})"
        if self.metrics_url:
            try:
                snap["metrics"] = scrape_metrics(self.metrics_url)
            except Exception:  # metrics are optional; their absence is recorded as null
                snap["metrics"] = None
        return snap, None

    def deltas(
        self, before: TritonJson | None, after: TritonJson | None
    ) -> tuple[TritonJson | None, TritonJson | None]:
        if not before or not after:
            return None, None
        from accelbench.serving.metrics import metrics_delta
        from accelbench.serving.stats import stats_delta

        metrics = None
        if before["metrics"] and after["metrics"]:
            metrics = metrics_delta(before["metrics"], after["metrics"], self.model)
        return stats_delta(before["stats"], after["stats"]), metrics


def _engine_poller(cfg: ChildConfig) -> PollerProcess | None:
    """A generative sweep's poller of the engine's /metrics (metrics_poll.py: its own process, off this
    event loop); None for a classic sweep, with ``--engine-metrics off``, or where the metrics' place is not
    known (Triton over gRPC alone)."""
    workload = cfg.load.workload
    if workload is None or workload.engine_metrics_s is None:
        return None
    from accelbench.loadtests.metrics_poll import PollerProcess
    from accelbench.serving.engine_metrics import metrics_url

    url = metrics_url(workload.api, cfg.load.url, cfg.metrics_url)
    return PollerProcess(url, cfg.load.model, workload.engine_metrics_s).launch() if url else None


def _utc_now() -> str:
    from accelbench.util import utc_now_iso

    return utc_now_iso()


def run_master(cfg: ChildConfig, config_path: str) -> None:
    emit = events_writer()
    n = cfg.profile.processes
    kind, url = cfg.profile.kind, cfg.load.url
    workers: list[subprocess.Popen[bytes]] = []
    runner: LocalRunner | MasterRunner | None
    dead: Dead | None
    if cfg.bind is not None:
        from accelbench.loadtests import remote

        env = Environment(user_classes=[user_class(kind)], host=url)
        runner, dead = remote.start_master(env, cfg, emit)
        if runner is None:
            return
    elif n == 1:
        agent = make_agent(cfg.load, load_payloads(cfg.payloads_file))
        env = Environment(user_classes=[user_class(kind, agent)], host=url)
        runner = env.create_local_runner()
        agent.environment = env
        ProcessSide(runner, agent)
        dead = None
    else:
        env = Environment(user_classes=[user_class(kind)], host=url)
        runner = env.create_master_runner("127.0.0.1", cfg.master_port)
        workers = [
            start_member(
                [sys.executable, "-m", "accelbench.loadtests.runner", config_path, "--worker", str(i)],
                stdin=subprocess.DEVNULL,  # the master's stdin carries the caller's steps, for it alone
            )
            for i in range(n)
        ]
        deadline = time.monotonic() + 60
        while len(runner.clients.ready) < n and time.monotonic() < deadline:
            if any(w.poll() is not None for w in workers):
                break
            gevent.sleep(0.1)
        if len(runner.clients.ready) < n:
            emit(LoadFailed(f"only {len(runner.clients.ready)} of {n} load processes started"))
            _finish(runner, workers)
            return

        def exited() -> str | None:
            for i, worker in enumerate(workers):
                if worker.poll() is not None:
                    return f"load process {i} exited with code {worker.returncode}"
            return None

        dead = exited

    controller = Controller(runner, cfg, n, emit, dead)
    try:
        controller.run(read_steps)
        emit(LoadDone())
    finally:
        if controller.poller is not None:
            controller.poller.close()
        _finish(runner, workers)


def read_steps(fd: int = 0) -> list[StepPlan]:
    """The next steps the caller sends on stdin (a JSON line ``{"steps": [...]}``; child.send_steps); none
    at EOF. The wait is cooperative: Locust keeps exchanging heartbeats with the workers meanwhile."""
    data = b""
    while not data.endswith(b"\n"):
        wait_read(fd)
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return []
        data += chunk
    return [StepPlan.from_wire(s) for s in json.loads(data)["steps"]]


def _finish(runner: LocalRunner | MasterRunner, workers: list[subprocess.Popen[bytes]]) -> None:
    runner.quit()  # the workers exit on the quit message; one that does not is killed
    for w in workers:
        end_member(w, grace_s=10)


def run_worker(cfg: ChildConfig, index: int) -> None:
    agent = make_agent(dataclasses.replace(cfg.load, process_index=index), load_payloads(cfg.payloads_file))
    env = Environment(user_classes=[user_class(cfg.profile.kind, agent)], host=cfg.load.url)
    runner = env.create_worker_runner("127.0.0.1", cfg.master_port)
    agent.environment = env
    ProcessSide(runner, agent)
    runner.greenlet.join()


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--connect":  # a worker for a master elsewhere: accelbench loadtest-worker
        from accelbench.loadtests import remote

        return remote.serve(argv[1], float(argv[2]), float(argv[3]))
    cfg = ChildConfig.read(argv[0])
    if len(argv) >= 3 and argv[1] == "--worker":
        run_worker(cfg, int(argv[2]))
    else:
        run_master(cfg, argv[0])
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except BaseException:  # the parent reads the log's last line; exit without finalisation either way
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter finalisation: grpc channels closed again by garbage collection under gevent can
    # block forever there, and everything worth keeping has been written and flushed.
    os._exit(code)
