"""Locust master and workers on different hosts: the gevent side (imported only inside runner processes).

The master (``accelbench loadtest --master-bind HOST:PORT --expect-workers N``) listens, waits for N worker
processes, then sends each the load configuration (model, protocol, load target, expected outputs, the
request payloads themselves) in an ``ab_config`` message; each worker builds its request pool locally and
answers ``ab_ready``. From then on the master drives the workers exactly like its own local worker
processes (runner.Controller), and merges their encoded histograms exactly. A worker's load target is only
what the master sends, which is only what the user gave the master.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import socket
import time
from collections.abc import Callable
from typing import Any, NoReturn

import gevent
from locust import __version__ as locust_version
from locust import runners as locust_runners
from locust.env import Environment
from locust.exception import RPCError
from locust.rpc import Message

from accelbench.loadtests import process_side as side
from accelbench.loadtests import users
from accelbench.loadtests.distributed import MASTER_SILENCE_S
from accelbench.loadtests.edge import ChildConfig, LoadConfig
from accelbench.loadtests.events import (
    LoadDone,
    LoadFailed,
    WireEvent,
    WorkerConfigured,
    WorkerConnected,
    WorkerInfo,
    WorkersJoined,
    WorkersWaiting,
)

# bump when the ab_config message (edge.LoadConfig.to_wire) changes; a worker refuses another version
CONFIG_VERSION = 4
CONFIGURE_TIMEOUT_S = 60.0


def start_master(
    env: Environment, cfg: ChildConfig, emit: Callable[[WireEvent], None]
) -> tuple[locust_runners.MasterRunner, Callable[[], str | None]] | tuple[None, None]:
    """Bind, wait for ``expect_workers`` workers, configure them; (runner, dead-check) or (None, None)."""
    if cfg.bind is None:
        raise ValueError("a master for workers elsewhere needs the configuration's bind")
    host, port, n = cfg.bind.host, cfg.bind.port, cfg.bind.expect_workers
    where, timeout_s = f"{host}:{port}", cfg.bind.timeout_s
    try:
        runner = env.create_master_runner(host, port)
    except (RPCError, OSError) as err:
        emit(LoadFailed(f"cannot listen for workers on {where}: {side.one_line(err)}"))
        return None, None
    emit(WorkersWaiting(where, n, timeout_s))
    deadline = time.monotonic() + timeout_s
    while len(runner.clients.ready) < n and time.monotonic() < deadline:
        gevent.sleep(0.1)
    gevent.sleep(0.3)  # a worker connecting in the same instant as the N-th would otherwise go unnoticed
    ready = [c.id for c in runner.clients.ready]
    if len(ready) != n:
        got = f"only {len(ready)} of {n}" if len(ready) < n else f"{len(ready)} (expected {n})"
        hint = "; start them with: accelbench loadtest-worker --master HOST:PORT" if len(ready) < n else ""
        return _fail(runner, emit, f"{got} workers connected to {where} within {timeout_s:g} s{hint}")
    infos = _configure(runner, cfg, ready)
    if isinstance(infos, str):
        return _fail(runner, emit, infos)
    emit(WorkersJoined(where, tuple(infos.values())))
    return runner, lambda: _dead(runner, infos, where)


def _fail(
    runner: locust_runners.Runner, emit: Callable[[WireEvent], None], message: str
) -> tuple[None, None]:
    emit(LoadFailed(message))
    runner.quit()
    return None, None


def _configure(
    runner: locust_runners.MasterRunner, cfg: ChildConfig, client_ids: list[str]
) -> dict[str, WorkerInfo] | str:
    """Send each worker the configuration; each one's WorkerInfo (its ready answer) by client id, or why one refused."""
    answers: dict[str, WorkerInfo] = {}
    refusals: list[str] = []
    runner.register_message(
        "ab_ready", lambda environment, msg, **_kw: answers.__setitem__(msg.node_id, WorkerInfo(**msg.data))
    )
    runner.register_message(
        "ab_refused", lambda environment, msg, **_kw: refusals.append(msg.data["message"])
    )
    with open(cfg.payloads_file, "rb") as handle:
        payloads = handle.read()
    for index, client_id in enumerate(client_ids):
        load = dataclasses.replace(cfg.load, process_index=index).to_wire()
        data = {"config_version": CONFIG_VERSION, "load": load, "payloads_npz": payloads}
        runner.send_message("ab_config", data, client_id=client_id)
    deadline = time.monotonic() + CONFIGURE_TIMEOUT_S
    while len(answers) < len(client_ids) and not refusals and time.monotonic() < deadline:
        gevent.sleep(0.05)
    if refusals:
        return f"a worker refused the configuration: {refusals[0]}"
    if len(answers) < len(client_ids):
        return f"only {len(answers)} of {len(client_ids)} workers confirmed the configuration"
    return {cid: answers[cid] for cid in client_ids}


def _dead(runner: locust_runners.MasterRunner, infos: dict[str, WorkerInfo], where: str) -> str | None:
    """Why a worker of this run is gone (or an extra one joined): either breaks the merged counts."""
    for client_id, info in infos.items():
        node = runner.clients.get(client_id)
        label = f"worker {info.index} ({info.host} pid {info.pid})"
        if node is None:
            return f"{label} disconnected"
        if node.state == locust_runners.STATE_MISSING:
            return f"{label} stopped answering (no heartbeat)"
    extra = [c.id for c in runner.clients.all if c.id not in infos]
    if extra:
        # Locust would hand it users, which it cannot run unconfigured: the offered load would be wrong
        return f"{len(extra)} worker(s) not in this run connected to {where}"
    return None


def _message(kind: str, data: Any, node_id: str) -> Message:
    make: Callable[..., Message] = Message  # Locust's Message.__init__ is untyped
    return make(kind, data, node_id)


class _Worker(locust_runners.WorkerRunner):
    """Locust's worker with this run's own limits: how long it keeps trying to reach the master, and how long
    the master may stay silent before it gives up. Locust reads both from module constants (300 s, 60 s),
    which accelbench leaves alone."""

    def __init__(
        self, environment: Environment, host: str, port: int, connect_timeout_s: float, silence_s: float
    ) -> None:
        self.connect_tries = max(1, math.ceil(connect_timeout_s / locust_runners.CONNECT_TIMEOUT))
        self.silence_s = silence_s
        self.master_silent = False  # the run ended because the master went silent, not by its quit
        super().__init__(environment, host, port)

    def connect_to_master(self) -> None:
        while True:
            self.retry += 1
            self.client.send(_message("client_ready", locust_version, self.client_id))
            if self.connection_event.wait(timeout=locust_runners.CONNECT_TIMEOUT):
                self.connected = True
                return
            if self.retry > self.connect_tries:
                raise ConnectionError(f"no master answered {self.connect_tries} times")

    def heartbeat_timeout_checker(self) -> NoReturn:
        while True:
            gevent.sleep(1)
            last = self.last_heartbeat_timestamp
            if last and last < time.time() - self.silence_s:
                self.master_silent = True
                self.quit()
                raise gevent.GreenletExit  # this greenlet's normal end (Locust's checker never ends)


def serve(master: str, connect_timeout_s: float, silence_s: float = MASTER_SILENCE_S) -> int:
    """One worker process: connect, take the configuration, run the steps the master drives."""
    emit = side.events_writer()
    host, port = master.rsplit(":", 1)
    env = Environment(user_classes=[users.ClosedLoopUser, users.OpenLoopUser])
    try:
        runner = env.runner = _Worker(env, host, int(port), connect_timeout_s, silence_s)
    except ConnectionError:
        emit(LoadFailed(f"no accelbench master answered at {master} within {connect_timeout_s:g} s"))
        return 4
    emit(WorkerConnected(master))
    configured: list[WorkerInfo] = []

    def on_config(environment: Environment, msg: Message, **_kw: Any) -> None:
        data = msg.data
        try:
            if data.get("config_version") != CONFIG_VERSION:
                raise ValueError(
                    f"configuration version {data.get('config_version')}, this worker speaks "
                    f"{CONFIG_VERSION} (install the same accelbench on master and workers)"
                )
            load = LoadConfig.from_wire(data["load"])
            payloads = side.load_payloads(io.BytesIO(data["payloads_npz"]))
            agent = side.make_agent(load, payloads)
            env.user_classes = [users.bind(cls, agent) for cls in (users.ClosedLoopUser, users.OpenLoopUser)]
            agent.environment = env
            side.ProcessSide(runner, agent)
        except Exception as err:  # any bad configuration is refused with its reason, never half-run
            runner.send_message("ab_refused", {"message": side.one_line(err)})
            emit(LoadFailed(f"refused the master's configuration: {side.one_line(err)}"))
            return
        info = WorkerInfo(index=load.process_index, host=socket.gethostname(), pid=os.getpid())
        configured.append(info)
        runner.send_message("ab_ready", dataclasses.asdict(info))
        emit(
            WorkerConfigured(
                index=info.index,
                host=info.host,
                pid=info.pid,
                model=load.model,
                url=load.url,
                protocol=load.profile.protocol,
                kind=load.profile.kind,
            )
        )

    runner.register_message("ab_config", on_config)
    runner.greenlet.join()  # ends when the master sends quit, or after silence_s without it
    if not configured:
        emit(LoadFailed(f"the master at {master} ended before configuring this worker"))
        return 5
    if runner.master_silent:  # cut off, or the master died: this worker cannot know what it kept
        emit(
            LoadFailed(
                f"lost the master at {master} (silent for {silence_s:g} s): a step it was measuring is "
                "cut short and not kept (a rerun of the master measures it again); only the steps it finished "
                "before are in its result document, its own output says which"
            )
        )
        return 5
    emit(LoadDone(configured[-1]))
    return 0
