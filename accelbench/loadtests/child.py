"""The caller's side of a Locust child process (``python -m accelbench.loadtests.runner``): start it in its
own process group, read the JSON events it writes one per line on its stdout, and read its log's last line.

Used by the sweep (one child: a local runner or a master with its workers) and by ``loadtest-worker``
(several children); neither imports Locust or gevent.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from accelbench.loadtests.events import Event, LoadTimedOut, parse_line
from accelbench.processes import end_group, start_group

__all__ = ["end_group", "events", "last_line", "start_runner"]


def start_runner(args: Sequence[str], log: IO[str]) -> subprocess.Popen:
    """The runner module in its own process group; events on a text pipe, everything else in ``log``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return start_group(
        [sys.executable, "-m", "accelbench.loadtests.runner", *args],
        stdout=subprocess.PIPE, stderr=log, text=True, env=env,
    )  # fmt: skip


def events(child: subprocess.Popen, budget_s: float) -> Iterator[Event]:
    """The child's events; ``LoadTimedOut`` when it runs past ``budget_s`` (a child can hang, see runner)."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        with contextlib.suppress(OSError, ValueError):  # the pipe is closed when the group is ended
            for line in child.stdout:
                lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + budget_s
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            yield LoadTimedOut(budget_s)
            return
        if line is None:
            return
        event = parse_line(line)
        if event is not None:
            yield event


def last_line(path: Path) -> str:
    """The last non-blank line of a child's log: what it said before it died."""
    lines = [ln.strip() for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"
