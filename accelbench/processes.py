"""Child processes that must not outlive us: start one in its own process group, end the whole group.

Every stage that runs children (the tritonserver, the Locust child of a sweep, ``loadtest-worker``
processes, the Locust master's own worker processes) starts and ends them here, so Ctrl-C, a hang and a
crash all end the same way: a polite signal, a grace period, then SIGKILL for everything left in the group
(python-backend stubs or Locust workers that outlived their parent included).

When we die without ending them (SIGKILL, the OOM killer), two things still end them: each child is started
with ``PR_SET_PDEATHSIG`` = SIGKILL (Linux; :func:`die_with_parent`), and a supervisor process
(``accelbench/watchdog.py``) that notices our end of a pipe close kills every group and descendant we left.
``record_children_in`` also keeps a pid file, so the next instance on the same folder can end what both missed.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel send ``sig`` to the child when the thread that forked it ends
    (Linux ``PR_SET_PDEATHSIG``; None elsewhere, where the supervisor alone covers it).

    The signal follows the forking *thread*, not the process: :func:`start_group` forks from one thread
    that lives as long as the process. A parent that died between fork and prctl is caught by the
    ``getppid`` check (the child has been re-parented by then)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: after fork only the call remains
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


class _Spawner(threading.Thread):
    """Forks every group leader from one daemon thread that lives as long as the process: a death signal
    set in a child fires when the thread that forked it ends, and the thread that starts a server (a job's
    worker thread, a test's) may end long before the server should."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="accelbench-spawner")
        self.jobs: queue.Queue = queue.Queue()

    def run(self) -> None:
        while True:
            cmd, kw, future = self.jobs.get()
            try:
                future.set_result(subprocess.Popen(cmd, **kw))
            except BaseException as err:  # noqa: BLE001 - handed to the caller, who raises it
                future.set_exception(err)

    def popen(self, cmd: list[str], kw: dict[str, Any]) -> subprocess.Popen:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.jobs.put((cmd, kw, future))
        return future.result()


class _Supervisor:
    """Our side of the watchdog: started with the first group, told of each group started and ended."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.file: Path | None = None
        self.spawner: _Spawner | None = None

    def popen(self, cmd: list[str], kw: dict[str, Any]) -> subprocess.Popen:
        with self.lock:
            if self.spawner is None or not self.spawner.is_alive():
                self.spawner = _Spawner()
                self.spawner.start()
            spawner = self.spawner
        return spawner.popen(cmd, kw)

    def send(self, msg: dict[str, Any]) -> None:
        with self.lock:
            if self.proc is None:
                self.proc = self._start()
            if self.proc.stdin is None:
                return
            try:
                self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
                self.proc.stdin.flush()
            except (OSError, ValueError):  # the supervisor died: the death signals still hold
                with contextlib.suppress(OSError, ValueError):
                    self.proc.stdin.close()

    def _start(self) -> subprocess.Popen:
        from accelbench.watchdog import Proc, start_time

        # no death signal for it: it has to outlive us to do its work, and exits when it reads EOF
        proc = subprocess.Popen(
            [sys.executable, "-m", "accelbench.watchdog"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        owner = Proc(os.getpid(), start_time(os.getpid()) or 0.0, " ".join(sys.argv)[:200])
        first: dict[str, Any] = {"owner": vars(owner)}
        if self.file is not None:
            first["file"] = str(self.file)
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.write(json.dumps(first).encode() + b"\n")
            proc.stdin.flush()
        return proc

    def record_in(self, path: Path) -> None:
        with self.lock:
            self.file = path
            started = self.proc is not None
        if started:
            self.send({"file": str(path)})

    def close(self) -> None:
        """At a clean exit: EOF now, so the supervisor is gone with us rather than a moment after."""
        with self.lock:
            proc, self.proc = self.proc, None
        if proc is not None:
            close_streams_of(proc)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=KILL_WAIT_S)

    def forget(self) -> None:
        """In a forked child: the parent's supervisor and spawner are not ours."""
        _Supervisor.__init__(self)


KILL_WAIT_S = 10.0
_SUPERVISOR = _Supervisor()
atexit.register(_SUPERVISOR.close)
os.register_at_fork(after_in_child=_SUPERVISOR.forget)


def record_children_in(folder: str | os.PathLike) -> str | None:
    """Keep this process's pid file in ``folder`` (``run``: its results folder; ``agent``: its work folder;
    ``serve``: the repository), after ending what an earlier instance killed there left running.

    Returns the one line that says what was ended, or None when nothing was."""
    from accelbench.watchdog import end_leftovers, leftovers_line, pid_file

    folder = Path(folder)
    line = leftovers_line(end_leftovers(folder)) if folder.is_dir() else None
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
    _SUPERVISOR.record_in(pid_file(folder, os.getpid()).resolve())
    return line


def start_group(cmd: Sequence[str], **popen_kw: Any) -> subprocess.Popen:
    """``Popen`` in a new session: the child leads its own process group, which :func:`end_group` ends.

    A terminal's Ctrl-C then reaches only us, and we decide how the child stops. The child dies with us
    (:func:`die_with_parent`) and the supervisor watches its group and descendants until it is ended."""
    from accelbench.watchdog import start_time

    popen_kw.setdefault("preexec_fn", die_with_parent())
    proc = _SUPERVISOR.popen(list(cmd), {**popen_kw, "start_new_session": True})
    _SUPERVISOR.send({"add": proc.pid, "start": start_time(proc.pid) or 0.0, "cmd": " ".join(cmd)[:200]})
    return proc


def start_member(cmd: Sequence[str], **popen_kw: Any) -> subprocess.Popen:
    """``Popen`` in our own group (a Locust master's worker), dying with us; ended with :func:`end_member`.

    Forked from the calling thread: the Locust child runs everything on its main thread (gevent)."""
    popen_kw.setdefault("preexec_fn", die_with_parent())
    return subprocess.Popen(list(cmd), **popen_kw)


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to a process group; a group that is already gone is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def end_group(
    proc: subprocess.Popen,
    *,
    first: int | None = signal.SIGTERM,
    grace_s: float = 5.0,
    kill_wait_s: float = 10.0,
    close_streams: bool = True,
) -> None:
    """End ``proc``'s group: ``first`` (None: just wait), ``grace_s`` to exit, then SIGKILL to the group.

    The SIGKILL is in ``finally`` and goes to the group even when the leader exited by itself: a second
    Ctrl-C during the grace period still ends everything, and members that outlived the leader go too.
    Call it once per child: a later killpg could reach a group that reused the number."""
    try:
        if proc.poll() is None:
            if first is not None:
                signal_group(proc.pid, first)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace_s)
    finally:
        signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=kill_wait_s)
        _SUPERVISOR.send({"end": proc.pid})
        if close_streams:
            close_streams_of(proc)


def end_member(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """A child that shares our group (a Locust master's worker): wait for it to exit, else SIGKILL it.

    ``Popen.kill`` checks that the child is not yet reaped, so it never hits a reused pid."""
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def close_streams_of(proc: subprocess.Popen) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.close()
