"""Distributed load from the caller's side: the master's listen address, and worker processes started by
``accelbench loadtest-worker`` (no Locust or gevent in this process; see remote.py for the Locust side)."""

from __future__ import annotations

import contextlib
import ipaddress
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from accelbench.errors import BadInputError, MeasurementError
from accelbench.loadtests.events import Event, LoadFailed, WorkerEvent, parse_line

DEFAULT_WORKER_TIMEOUT_S = 120.0
# A worker whose master vanished (killed, host down, cut off) gives up after this long without its heartbeat
# (loadtest-worker --master-silence), instead of Locust's 60 s, so no worker lingers long after a failed run.
MASTER_SILENCE_S = 20.0


@dataclass(frozen=True)
class MasterBind:
    """Where the master listens for workers on other hosts, and how many worker processes it waits for."""

    host: str
    port: int
    expect_workers: int
    timeout_s: float = DEFAULT_WORKER_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.expect_workers < 1:
            raise BadInputError(f"--expect-workers must be >= 1, got {self.expect_workers}")
        if self.timeout_s <= 0:
            raise BadInputError(f"--worker-timeout must be positive, got {self.timeout_s}")


def parse_host_port(text: str, option: str) -> tuple[str, int]:
    """``"10.0.0.5:5557"`` → ("10.0.0.5", 5557), with one clear error for anything else."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")  # [::1]:5557
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInputError(f"{option} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:5557")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_host(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0].rpartition(":")[0].strip("[]") or rest


def check_reachable_target(bind: MasterBind, target_url: str) -> None:
    """Workers on other hosts send load to the very URL the master was given: a loopback one would load
    each worker's own machine, not the server under test."""
    if not is_loopback(bind.host) and is_loopback(url_host(target_url)):
        raise BadInputError(
            f"--master-bind {bind.host} accepts workers from other hosts, but the load target {target_url} is "
            "loopback; give --url with an address the workers can reach"
        )


def run_workers(
    master: str,
    processes: int,
    connect_timeout_s: float,
    on_event: Callable[[WorkerEvent], None] | None = None,
    master_silence_s: float = MASTER_SILENCE_S,
) -> list[Event | None]:
    """Run ``processes`` worker processes for the master at ``master`` until it ends the run.

    Returns each process's last event; raises MeasurementError (one line) if one could not take part."""
    host, port = parse_host_port(master, "--master")
    if processes < 1:
        raise BadInputError(f"--processes must be >= 1, got {processes}")
    from accelbench.loadtests.child import end_group, last_line, start_runner

    with tempfile.TemporaryDirectory(prefix="accelbench-worker-") as tmp:
        logs = [Path(tmp) / f"worker-{i}.log" for i in range(processes)]
        args = ["--connect", f"{host}:{port}", str(connect_timeout_s), str(master_silence_s)]
        children = []
        last: list[Event | None] = [None] * processes
        try:
            for log in logs:
                with open(log, "w") as err:
                    children.append(start_runner(args, err))
            lock = threading.Lock()

            def pump(i: int, child: subprocess.Popen[str]) -> None:
                with contextlib.suppress(OSError, ValueError):
                    for line in child.stdout or ():
                        event = parse_line(line)
                        if event is None:
                            continue
                        last[i] = event
                        if on_event:
                            with lock:
                                on_event(WorkerEvent(i, event))

            threads = [
                threading.Thread(target=pump, args=(i, c), daemon=True) for i, c in enumerate(children)
            ]
            for thread in threads:
                thread.start()
            for child, thread in zip(children, threads, strict=True):
                child.wait()
                thread.join(timeout=5)
        finally:
            for child in children:
                end_group(child)
        for i, (child, event) in enumerate(zip(children, last, strict=True)):
            if child.returncode != 0:
                why = event.message if isinstance(event, LoadFailed) else last_line(logs[i])
                raise MeasurementError(f"worker process {i} (exit {child.returncode}): {why}")
    return last
