"""Child processes that must not outlive us: start one in its own process group, end the whole group.

Every stage that runs children (the tritonserver, the Locust child of a sweep, ``loadtest-worker``
processes, the Locust master's own worker processes) starts and ends them here, so Ctrl-C, a hang and a
crash all end the same way: a polite signal, a grace period, then SIGKILL for everything left in the group
(python-backend stubs or Locust workers that outlived their parent included).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Any


def start_group(cmd: Sequence[str], **popen_kw: Any) -> subprocess.Popen:
    """``Popen`` in a new session: the child leads its own process group, which :func:`end_group` ends.

    A terminal's Ctrl-C then reaches only us, and we decide how the child stops."""
    return subprocess.Popen(list(cmd), start_new_session=True, **popen_kw)


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
