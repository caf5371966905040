"""The supervisor that ends our children when we die without ending them, and what an earlier instance left.

A process that starts child groups (``processes.start_group``) also starts one supervisor, ``python -m
accelbench.watchdog``, holding the read end of a pipe whose write end only we hold. When we die, however
(SIGKILL, the OOM killer, a crash), the kernel closes that end; the supervisor reads EOF and SIGKILLs every
group we had not ended and every descendant it saw under them (python-backend stubs, Locust workers, also
those that left the group or were re-parented), each matched by pid *and* start time, so a reused pid is
never hit. The children's own death signal (``processes.die_with_parent``) has usually got there first;
the supervisor is for what a death signal cannot reach (grandchildren, platforms without one).

It also keeps a pid file, ``.accelbench-children.PID``, in the work or results folder the command names
(``processes.record_children_in``): the owner and every process it watches, with start times; removed once
nothing is left. A file still there means the owner and its supervisor were both killed; the next ``run``,
``agent`` or ``serve`` on that folder ends what it lists (:func:`end_leftovers`) and says so in one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PID_FILE_PREFIX = ".accelbench-children."  # not *.json: the report reads every .json under a results folder
TICK_S = 0.5  # how often the supervisor looks for new descendants (a stub appears seconds after its server)
START_TOLERANCE_S = 0.05  # start times are read from /proc in clock ticks; two readers agree to the tick
KILL_WAIT_S = 5.0


@dataclass(frozen=True)
class Proc:
    pid: int
    start: float  # psutil create_time: with the pid, the identity of one process
    cmd: str


def start_time(pid: int) -> float | None:
    """The process's start time, or None when there is no such (live, non-zombie) process."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def alive(pid: int, start: float) -> bool:
    """True when ``pid`` is still the process that started at ``start`` (not a reused number)."""
    now = start_time(pid)
    return now is not None and abs(now - start) <= START_TOLERANCE_S


def describe(pid: int) -> str:
    import psutil

    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        argv = proc.cmdline()
        return " ".join(argv)[:200] if argv else proc.name()
    return "?"


def kill_all(procs: list[Proc], groups: list[int], wait_s: float = KILL_WAIT_S) -> list[Proc]:
    """SIGKILL the live ones among ``procs`` and the groups in ``groups`` led by one of them, waiting up to
    ``wait_s`` for them to go; returns the processes that were alive (and are now gone or going)."""
    import psutil

    live = [p for p in procs if alive(p.pid, p.start)]
    live_pids = {p.pid for p in live}
    for pgid in groups:
        # a group is ours while one of our live processes is in it (its number cannot be reused until then)
        if any(_pgid(pid) == pgid for pid in live_pids):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
    for p in live:
        with contextlib.suppress(psutil.Error):
            psutil.Process(p.pid).kill()
    # not psutil.wait_procs: a killed process that is not our child stays a zombie until its new parent
    # reaps it, and a zombie is gone for our purpose
    deadline = time.monotonic() + wait_s
    while wait_s and any(alive(p.pid, p.start) for p in live) and time.monotonic() < deadline:
        time.sleep(0.05)
    return live


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


# ---- the pid file --------------------------------------------------------------------------------------


def pid_file(folder: Path, pid: int) -> Path:
    return Path(folder) / f"{PID_FILE_PREFIX}{pid}"


def write_pid_file(path: Path, owner: Proc, roots: dict[int, Proc], seen: dict[int, set[Proc]]) -> None:
    from accelbench.util import atomic_write_text

    procs = {p for p in roots.values()} | {p for family in seen.values() for p in family}
    body = {
        "owner": vars(owner),
        "groups": sorted(roots),
        "processes": [vars(p) for p in sorted(procs, key=lambda p: (p.pid, p.start))],
    }
    with contextlib.suppress(OSError):  # a folder that went away: the supervisor's own job goes on
        atomic_write_text(path, json.dumps(body, indent=1, sort_keys=True) + "\n")


@dataclass(frozen=True)
class Leftovers:
    owner: Proc
    ended: list[Proc]


def end_leftovers(folder: str | os.PathLike) -> list[Leftovers]:
    """End what earlier instances that died on ``folder`` left running; pid files of live owners are
    theirs and stay. Returns one entry per dead owner whose file was found (``ended`` may be empty)."""
    found: list[Leftovers] = []
    for path in sorted(Path(folder).glob(PID_FILE_PREFIX + "*")):
        try:
            data = json.loads(path.read_text())
            owner = Proc(**data["owner"])
            procs = [Proc(**p) for p in data.get("processes", [])]
            groups = [int(g) for g in data.get("groups", [])]
        except (OSError, ValueError, TypeError, KeyError):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        if alive(owner.pid, owner.start):
            continue  # another instance on the same folder, still running: its children are its own
        found.append(Leftovers(owner, kill_all(procs, groups)))
        with contextlib.suppress(OSError):
            path.unlink()
    return found


def leftovers_line(found: list[Leftovers]) -> str | None:
    """One line for what :func:`end_leftovers` ended; None when nothing was left running."""
    ended = [(o.owner, p) for o in found for p in o.ended]
    if not ended:
        return None
    owners = sorted({o.pid for o, _ in ended})
    names = ", ".join(f"{Path(p.cmd.split(' ')[0]).name or p.cmd} (pid {p.pid})" for _, p in ended[:6])
    more = f" and {len(ended) - 6} more" if len(ended) > 6 else ""
    whose = ", ".join(str(pid) for pid in owners)
    plural = "es" if len(ended) > 1 else ""
    return f"ended {len(ended)} process{plural} left running by an earlier accelbench (pid {whose}) that was killed: {names}{more}"


# ---- the supervisor --------------------------------------------------------------------------------------


class Watch:
    """What the supervisor watches: the groups we started, their descendants as last seen, the pid file."""

    def __init__(self) -> None:
        self.owner: Proc | None = None
        self.file: Path | None = None
        self.roots: dict[int, Proc] = {}
        self.seen: dict[int, set[Proc]] = {}

    def apply(self, msg: dict[str, Any]) -> None:
        if "owner" in msg:
            self.owner = Proc(**msg["owner"])
        if "file" in msg:
            self.file = Path(msg["file"])
        if "add" in msg:
            root = Proc(int(msg["add"]), float(msg["start"]), str(msg.get("cmd", "")))
            self.roots[root.pid] = root
            self.seen[root.pid] = set()
            self.refresh()
        if "end" in msg:
            pid = int(msg["end"])
            self.roots.pop(pid, None)
            family = self.seen.pop(pid, set())
            kill_all(list(family), [], wait_s=0)  # the group is ended; a descendant that left it goes too
        self.write()

    def refresh(self) -> bool:
        """Note every descendant of a live root; True when one was new."""
        import psutil

        changed = False
        for pid, root in self.roots.items():
            if not alive(pid, root.start):
                continue
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(pid).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        proc = Proc(child.pid, child.create_time(), " ".join(child.cmdline())[:200])
                        if proc not in self.seen[pid]:
                            self.seen[pid].add(proc)
                            changed = True
        return changed

    def write(self) -> None:
        if self.file is None or self.owner is None:
            return
        if self.roots:
            write_pid_file(self.file, self.owner, self.roots, self.seen)
        else:
            with contextlib.suppress(OSError):
                self.file.unlink()

    def end_all(self) -> None:
        """The owner is gone: everything still alive that it started goes."""
        if not self.roots:
            return  # a clean exit: everything was ended already
        self.refresh()
        procs = [*self.roots.values(), *(p for family in self.seen.values() for p in family)]
        kill_all(procs, list(self.roots), wait_s=0)  # SIGKILL is certain; nobody waits for our answer
        self.roots.clear()
        self.seen.clear()
        self.write()


def main() -> int:
    # we sit in a session of our own; a terminal's Ctrl-C or hang-up is the owner's business, not ours
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    watch = Watch()
    pending = b""
    fd = sys.stdin.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], TICK_S)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break  # the owner closed the pipe: it exited, cleanly or not
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    watch.apply(json.loads(line))
        if watch.refresh():
            watch.write()
    watch.end_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
