"""Locust users that call Triton (HTTP or gRPC) and record each latency exactly.

Imported only inside Locust processes: it imports gevent and Locust, which monkey-patch the standard
library. One ``Agent`` per process holds the phase (idle / warm-up / measure), the exact histograms and the
error counts; the runner drives it through Locust's custom messages, so the same code serves a local runner
and a master with worker processes. Without a runner driving it (``locust -f``), it measures all the time.
"""

from __future__ import annotations

import random
import socket
import time
from array import array
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypedDict, TypeVar

import gevent
import gevent.event
import gevent.pool
import numpy as np
import psutil
from locust import User, constant, task
from locust.env import Environment
from locust.user.task import LOCUST_STATE_STOPPING

from accelbench.loadtests import histogram, samples, wire
from accelbench.loadtests.clients import GrpcClient, HttpClient
from accelbench.loadtests.edge import LoadConfig
from accelbench.loadtests.genstats import LOOP_LATE_US
from accelbench.loadtests.jsonwire import RecordWire
from accelbench.loadtests.profiles import LoadProfile
from accelbench.loadtests.wire import WrongOutput


def init_grpc_gevent() -> None:
    """Let grpc cooperate with gevent. Without it, all users silently share one request at a time
    (FIELD-NOTES); it must run before any channel exists."""
    import grpc.experimental.gevent as grpc_gevent

    grpc_gevent.init_gevent()


LAG_PERIOD_S = 0.05  # its lateness shows starvation as a 5 ms timer did, at a tenth of the wake-ups (CPU)
LATE_US = LOOP_LATE_US  # a loop later than this may have merged a stream's gaps
ERROR_KINDS = ("connection", "timeout", "server", "wrong_output")
CHECK_EVERY = 100  # default: a full output check on every 100th answer (and on every failed lean check)


def classify(exc: BaseException) -> str:
    """One of ERROR_KINDS for a failed call."""
    if isinstance(exc, WrongOutput):
        return "wrong_output"
    if isinstance(exc, (TimeoutError, socket.timeout, gevent.Timeout)):
        return "timeout"
    code = getattr(exc, "code", None)
    status = str(code() if callable(code) else getattr(exc, "status_code", "") or "")
    text = f"{status} {exc}".lower()
    if "deadline" in text or "timed out" in text or "timeout" in text:
        return "timeout"
    if isinstance(exc, (ConnectionError, OSError)) or "unavailable" in text or "connect" in text:
        return "connection"
    return "server"


Request = TypeVar("Request")  # what a load process sends: request bytes, or (bytes, ISL, OSL) when generative
Request_co = TypeVar("Request_co", covariant=True)


class RequestSource(Protocol[Request_co]):
    """Where a load process takes its next request from (``RequestPool``, ``genagent.GenRequestPool``)."""

    def next(self) -> Request_co: ...


class RequestPool:
    """Requests encoded once per payload (whole HTTP requests, or serialized gRPC messages), rotated."""

    def __init__(
        self,
        protocol: str,
        payloads: list[dict[str, np.ndarray]],
        output_names: list[str],
        model: str,
        url: str,
    ) -> None:
        host = url.split("://", 1)[-1].rstrip("/")
        if protocol == "http":
            self.requests = [wire.http_request(host, model, p, output_names) for p in payloads]
        else:
            self.requests = [wire.grpc_request(model, p, output_names) for p in payloads]
        self.position = 0

    def next(self) -> bytes:
        req = self.requests[self.position]
        self.position = (self.position + 1) % len(self.requests)
        return req


def make_client(protocol: str, url: str, concurrency: int, timeout_s: float) -> GrpcClient | HttpClient:

    host = url.split("://", 1)[-1].rstrip("/")
    if protocol == "grpc":
        return GrpcClient(host, timeout_s)
    return HttpClient(host, timeout_s)


class Client(Protocol):
    """What a user holds: clients.py's HttpClient / GrpcClient, streams.py's SseClient / GrpcStreamClient."""

    def close(self) -> None: ...


def close_client(client: Client) -> None:
    """Close once. An open gRPC channel keeps Locust from exiting (FIELD-NOTES), and a second close at
    garbage collection or interpreter exit blocked forever in grpc's Channel._close under gevent (seen
    with py-spy), so later closes become no-ops."""
    try:
        client.close()
    finally:
        client.close = lambda: None  # type: ignore[method-assign]  # on purpose: the instance's own, a no-op


def fire_request(environment: Environment, **fields: Any) -> None:
    """Report one call through Locust's ``events.request`` (its hook is untyped; ``fields`` are its keywords)."""
    fire: Callable[..., None] = environment.events.request.fire
    fire(**fields)


class Window(TypedDict):
    """One process's counts over one progress window (the ``ab_window`` message, plus ``k`` and ``token``)."""

    step: int
    histogram: str  # histogram.encode
    requests: int
    errors: dict[str, int]  # ERROR_KINDS -> count
    samples: str  # samples.encode: (completion µs, latency µs) of the window's requests


class _GenerativeTotals(TypedDict, total=False):
    generative: RecordWire  # genagent: the step's genstats.Record, encoded


class Totals(_GenerativeTotals):
    """One process's totals of a step (the ``ab_drained`` message, plus ``token``): runner._combine merges them."""

    step: int
    process_index: int
    host: str
    pid: int
    histogram: str
    requests: int
    inferences: int
    errors: dict[str, int]
    drops: int
    full_checks: int
    stuck_in_flight: int
    cpu_s: float
    wall_s: float
    window_s: float
    last_error: str
    loop_lag: str
    samples: str


class Agent(Generic[Request]):
    """Per-process measurement state, sending what ``pool`` gives, as ``config`` says (its profile: protocol,
    batch size, timeout, max in flight, seed, check_every: a full output check on every Nth answer).
    ``rate_rps``: this process's share of an open loop's rate, set at each warm-up."""

    def __init__(self, config: LoadConfig, pool: RequestSource[Request], free_running: bool = True) -> None:
        self.config = config
        self.profile = profile = config.profile
        self.pool = pool
        self.rate_rps: float | None = None
        self.running = gevent.event.Event()
        self.measuring = free_running
        self.epoch = 0
        self.step = -1
        self.in_flight = 0
        self.environment: Environment | None = None
        self.process = psutil.Process()
        self._lag_watch: gevent.Greenlet | None = None
        self.beat_ns = 0  # when the loop-lag timer last started its period
        self.late_at_ns = -1  # when it last woke later than LATE_US
        self.specs = wire.output_specs(config.expected_outputs, profile.batch_size)
        self.check_every = max(1, profile.check_every or CHECK_EVERY)
        # the lean or full check of an answer: an HttpAnswer or a gRPC response's bytes, as the client returns
        self._check: Callable[[Any, bool], None]
        if profile.protocol == "http":
            self._check = wire.HttpChecker(self.specs)
        else:
            self._check = lambda answer, full: wire.check_grpc(answer, self.specs, full)
        self.answers = 0
        self._reset()
        if free_running:
            self.running.set()

    def _reset(self) -> None:
        self.hist = histogram.new_histogram()
        self.lag_hist = histogram.new_histogram()
        self.window_hist = histogram.new_histogram()
        self.requests = 0
        self.inferences = 0
        self.errors = dict.fromkeys(ERROR_KINDS, 0)
        self.window_errors = dict.fromkeys(ERROR_KINDS, 0)
        self.window_requests = 0
        self.drops = 0
        self.full_checks = 0
        self.last_error = ""
        # completion time (µs since the window opened) and latency of each success, in completion order
        self.done_us, self.latency_us = array("q"), array("q")
        self.window_from = 0  # where the samples not yet sent in a window start
        self.cpu0 = sum(self.process.cpu_times()[:2])
        self.wall0 = time.perf_counter()

    # -- phases (driven by runner.py through custom messages) -----------------------------------
    def warmup(self, step: int, rate_rps: float | None) -> None:
        self.step, self.measuring = step, False
        self.rate_rps = rate_rps
        self.epoch += 1
        self.running.set()

    def measure(self) -> None:
        self._reset()
        self.epoch += 1
        self.measuring = True
        self.running.set()
        self._lag_watch = gevent.spawn(self._watch_loop_lag)

    def _watch_loop_lag(self) -> None:
        """How late the event loop wakes a timer: a starved or busy load process shows it here first,
        even when its own CPU share looks low (other processes hold the cores)."""
        while True:
            t0 = time.perf_counter_ns()
            self.beat_ns = t0
            gevent.sleep(LAG_PERIOD_S)
            now = time.perf_counter_ns()
            lag_us = (now - t0) // 1000 - int(LAG_PERIOD_S * 1e6)
            histogram.record_us(self.lag_hist, lag_us)
            if lag_us > LATE_US:
                self.late_at_ns = now

    def loop_late_since(self, start_ns: int) -> bool:
        """Whether the loop-lag timer saw this process late by more than LATE_US since ``start_ns``, or is
        that overdue now (the loop has not got to it)."""
        now = time.perf_counter_ns()
        overdue = self.beat_ns and now - self.beat_ns > int(LAG_PERIOD_S * 1e9) + LATE_US * 1000
        return self.late_at_ns >= start_ns or bool(overdue)

    def pause(self, timeout_s: float) -> Totals:
        """Stop starting requests, wait for those in flight, and return this process's totals."""
        window_s = time.perf_counter() - self.wall0  # this process's own measured window, before the drain
        self.running.clear()
        if self._lag_watch is not None:
            self._lag_watch.kill()
            self._lag_watch = None
        deadline = time.monotonic() + timeout_s
        while self.in_flight and time.monotonic() < deadline:
            gevent.sleep(0.002)
        wall_s = time.perf_counter() - self.wall0
        cpu_s = sum(self.process.cpu_times()[:2]) - self.cpu0
        return {
            "step": self.step,
            # who measured: a merged step names every contributing process (several hosts when distributed)
            "process_index": self.config.process_index,
            "host": socket.gethostname(),
            "pid": self.process.pid,
            "histogram": histogram.encode(self.hist),
            "requests": self.requests,
            "inferences": self.inferences,
            "errors": dict(self.errors),
            "drops": self.drops,
            "full_checks": self.full_checks,
            "stuck_in_flight": self.in_flight,
            "cpu_s": cpu_s,
            "wall_s": wall_s,
            "window_s": window_s,
            "last_error": self.last_error,
            "loop_lag": histogram.encode(self.lag_hist),
            "samples": samples.encode(self.done_us, self.latency_us),
        }

    def take_window(self) -> Window:
        out: Window = {
            "step": self.step,
            "histogram": histogram.encode(self.window_hist),
            "requests": self.window_requests,
            "errors": dict(self.window_errors),
            # the window's samples, so the controller can judge steady state and the sample floor online
            "samples": samples.encode(self.done_us[self.window_from :], self.latency_us[self.window_from :]),
        }
        self.window_from = len(self.done_us)
        self.window_hist = histogram.new_histogram()
        self.window_requests = 0
        self.window_errors = dict.fromkeys(ERROR_KINDS, 0)
        return out

    # -- one request ----------------------------------------------------------------------------
    def issue(self, client: Any, request: Request, start_ns: int | None = None) -> BaseException | None:
        """Send one request; latency counts from ``start_ns`` (the intended send time in open loop) to the
        end of the exchange; the answer is checked after it.

        Returns the exception of a failed call (already counted and reported), else None."""
        epoch, counted = self.epoch, self.measuring
        self.in_flight += 1
        t0 = time.perf_counter_ns()
        # a request sent early (see OpenLoopUser) counts from its actual send, never less
        start_ns = t0 if start_ns is None else min(start_ns, t0)
        exc: BaseException | None = None
        answer: wire.HttpAnswer | bytes | None = None  # as the protocol's client returns it
        try:
            answer = client.exchange(request)
        except Exception as err:  # every failure is classified and counted, never raised into Locust
            exc = err
        latency_us = (time.perf_counter_ns() - start_ns) // 1000
        self.in_flight -= 1
        if exc is None:
            exc = self.check(answer)
        if counted and epoch == self.epoch:
            self._count(latency_us, exc)
        if self.environment is not None:
            fire_request(
                self.environment,
                request_type=f"triton-{self.profile.protocol}",
                name=self.config.model,
                response_time=latency_us / 1000.0,
                response_length=len(answer.body if isinstance(answer, wire.HttpAnswer) else answer or b""),
                response=None,
                context={},
                exception=exc,
            )
        return exc

    def check(self, answer: Any) -> BaseException | None:
        """The lean check on every answer, the full one on every ``check_every``-th and on every failure."""
        self.answers += 1
        full = self.answers % self.check_every == 0
        try:
            self._check(answer, full)
        except (WrongOutput, wire.ServerAnswer) as lean:
            if full or isinstance(lean, wire.ServerAnswer):
                self.full_checks += full
                return lean
            self.full_checks += 1
            try:
                self._check(answer, True)
            except (WrongOutput, wire.ServerAnswer) as detailed:
                return detailed
            return lean
        self.full_checks += full
        return None

    def _count(self, latency_us: int, exc: BaseException | None) -> None:
        self.requests += 1
        self.window_requests += 1
        if exc is None:
            self.inferences += self.profile.batch_size
            histogram.record_us(self.hist, latency_us)
            histogram.record_us(self.window_hist, latency_us)
            self.done_us.append(int((time.perf_counter() - self.wall0) * 1e6))
            self.latency_us.append(int(latency_us))
            return
        kind = classify(exc)
        self.errors[kind] += 1
        self.window_errors[kind] += 1
        self.last_error = f"{kind}: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"


# gevent's timers wake up to ~1 ms late (epoll waits in whole ms); waking this much early and counting
# latency from min(intended, actual send) keeps the harness's own lateness out of open-loop latencies.
SEND_LEAD_NS = 1_000_000


AnyUser = TypeVar("AnyUser", bound=User)


def bind(user_class: type[AnyUser], agent: Agent[Any]) -> type[AnyUser]:
    """``user_class`` for one run: its users take ``agent``, the process's measurement state. The same name,
    so a master's spawn messages (which name the class) find it."""
    return type(user_class.__name__, (user_class,), {"run_agent": agent, "__module__": user_class.__module__})


class _TritonUser(User):
    abstract = True
    wait_time = constant(0)
    run_agent: Agent[Any] | None = None  # set by ``bind``: no module global carries a run's state

    def on_start(self) -> None:
        agent = type(self).run_agent
        if agent is None:
            raise RuntimeError(f"{type(self).__name__} is not bound to an Agent (users.bind)")
        agent.environment = self.environment
        profile = agent.profile
        self.agent = agent
        own = getattr(agent, "make_client", None)  # the generative agent streams (genagent.py)
        self.client = (
            own(self._concurrency(profile))
            if own
            else make_client(
                profile.protocol, agent.config.url, self._concurrency(profile), profile.timeout_s
            )
        )
        self.pool = agent.pool

    def _concurrency(self, profile: LoadProfile) -> int:
        return 1

    def on_stop(self) -> None:
        close_client(self.client)


class ClosedLoopUser(_TritonUser):
    """One request in flight, no wait: N of these are a client with N outstanding requests.

    The task sends requests back to back for as long as the phase runs, instead of one request per task:
    Locust's task cycle (task choice, ``wait_time``, a ``gevent.sleep(0)`` round of the event loop) costs
    CPU on every request and sits in the closed loop's path between an answer and the next send. Each
    request is still reported through Locust's request event; stopping a user still kills its greenlet."""

    @task
    def infer(self) -> None:
        agent, client, pool = self.agent, self.client, self.pool
        running = agent.running
        while running.is_set() and self._state != LOCUST_STATE_STOPPING:
            exc = agent.issue(client, pool.next())
            if exc is not None and classify(exc) == "connection":
                gevent.sleep(0.01)  # a dead server refuses at once; do not spin a core on it
        if not running.is_set():
            running.wait(timeout=0.5)


class OpenLoopUser(_TritonUser):
    """A Poisson arrival scheduler: one per process, spawning a request greenlet at each intended time.

    Latency counts from the intended time, so a stalled server (or a late scheduler) cannot hide the
    queueing it causes (coordinated omission). Arrivals beyond ``max_in_flight`` are dropped and counted.
    """

    def _concurrency(self, profile: LoadProfile) -> int:
        return profile.max_in_flight

    def on_start(self) -> None:
        super().on_start()
        self.in_flight_group = gevent.pool.Group()

    @task
    def schedule(self) -> None:
        agent = self.agent
        if not agent.running.is_set():
            agent.running.wait(timeout=0.5)
            return
        rate = float(agent.rate_rps or 0)
        if rate <= 0:
            gevent.sleep(0.05)
            return
        seed, index = agent.profile.seed, agent.config.process_index
        rng = random.Random(f"{seed}/{index}/{agent.step}/{agent.epoch}")
        cap = agent.profile.max_in_flight
        next_ns = start_ns = time.perf_counter_ns()
        epoch = agent.epoch
        # a trace (genagent.GenRequestPool.replay) gives each request its own time, else Poisson gaps
        replay = getattr(self.pool, "replay", None) if getattr(self.pool, "arrivals", None) else None
        processes = agent.profile.processes
        trace = replay(rate * processes, index, processes) if replay else None
        while agent.running.is_set() and agent.epoch == epoch:
            request = None
            if trace is not None:
                at_s, request = next(trace)
                next_ns = start_ns + int(at_s * 1e9)
            else:
                next_ns += int(rng.expovariate(rate) * 1e9)
            delay_ns = next_ns - time.perf_counter_ns() - SEND_LEAD_NS
            if delay_ns > 0:
                gevent.sleep(delay_ns / 1e9)
            if not agent.running.is_set() or agent.epoch != epoch:
                break
            if agent.in_flight >= cap:
                if agent.measuring:
                    agent.drops += 1
                continue
            self.in_flight_group.spawn(agent.issue, self.client, request or self.pool.next(), next_ns)

    def on_stop(self) -> None:
        self.in_flight_group.join(timeout=self.agent.profile.timeout_s)
        self.in_flight_group.kill()
        super().on_stop()
