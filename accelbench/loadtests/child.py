"""The caller's side of a Locust child process (``python -m accelbench.loadtests.runner``): start it in its
own process group, read the JSON events it writes one per line on its stdout, hand it further steps on its
stdin (the sweep's retries, measured by the same load processes and workers), and read its log's last line.

Used by the sweep (one child: a local runner or a master with its workers) and by ``loadtest-worker``
(several children); neither imports Locust or gevent.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from accelbench.loadtests.events import LoadTimedOut, WireEvent, parse_line
from accelbench.loadtests.profiles import StepPlan
from accelbench.processes import end_group, start_group

__all__ = ["EventStream", "end_group", "last_line", "send_steps", "start_runner"]


def start_runner(args: Sequence[str], log: IO[str], steps_on_stdin: bool = False) -> subprocess.Popen[str]:
    """The runner module in its own process group; events on a text pipe, everything else in ``log``. With
    ``steps_on_stdin`` the child reads further steps from a pipe (``send_steps``) after its planned ones."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return start_group(
        [sys.executable, "-m", "accelbench.loadtests.runner", *args],
        stdin=subprocess.PIPE if steps_on_stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=env,
    )


def send_steps(child: subprocess.Popen[str], steps: list[StepPlan]) -> None:
    """Hand a child started with ``steps_on_stdin`` more steps to measure, or (none) let it finish."""
    if child.stdin is None:
        raise ValueError("the child was started without steps_on_stdin")
    with contextlib.suppress(OSError):  # a child that died is noticed by the steps it never measured
        if steps:
            child.stdin.write(json.dumps({"steps": [s.to_wire() for s in steps]}) + "\n")
            child.stdin.flush()
        else:
            child.stdin.close()


class EventStream:
    """A child's events in order, read on a thread; ``LoadTimedOut`` once it runs past its time budget (a
    child can hang, see runner), which ``extend`` lengthens while the child measures more steps."""

    def __init__(self, child: subprocess.Popen[str], budget_s: float) -> None:
        self.budget_s = budget_s
        self._deadline = time.monotonic() + budget_s
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(child,), daemon=True).start()

    def _pump(self, child: subprocess.Popen[str]) -> None:
        with contextlib.suppress(OSError, ValueError):  # the pipe is closed when the group is ended
            for line in child.stdout or ():
                self._lines.put(line)
        self._lines.put(None)

    def extend(self, seconds: float) -> None:
        self.budget_s += seconds
        self._deadline += seconds

    def __iter__(self) -> Iterator[WireEvent | LoadTimedOut]:
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, self._deadline - time.monotonic()))
            except queue.Empty:
                yield LoadTimedOut(self.budget_s)
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
