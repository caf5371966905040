"""One helper starts and ends child process groups; the load stage's modules import each other one way."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from conftest import ACCELBENCH

from accelbench.processes import end_group, end_member, start_group

LEFT = "left running by an earlier accelbench"

PACKAGE = Path(__file__).resolve().parent.parent / "accelbench"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_no_import_cycles_between_sweep_and_distributed_or_runner_and_remote():
    loadtests = PACKAGE / "loadtests"
    assert not any("loadtests.sweep" in n for n in _imports(loadtests / "distributed.py"))
    assert not any("loadtests.runner" in n for n in _imports(loadtests / "remote.py"))
    # and no module other than processes.py signals process groups itself
    for path in PACKAGE.rglob("*.py"):
        if path.name not in ("processes.py", "watchdog.py"):
            text = path.read_text()
            assert "os.killpg(" not in text and "start_new_session=" not in text, path


def test_end_group_also_ends_a_member_that_outlived_its_leader():
    # the leader starts a grandchild that ignores SIGTERM, then exits: only the group SIGKILL ends it
    code = (
        "import subprocess, sys, time;"
        "p = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)']);"
        "print(p.pid, flush=True); time.sleep(60)"
    )
    leader = start_group([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    member = int(leader.stdout.readline())
    end_group(leader, first=signal.SIGTERM, grace_s=2)
    assert leader.returncode is not None
    deadline = time.monotonic() + 5
    while psutil.pid_exists(member) and psutil.Process(member).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the member outlived end_group"
        time.sleep(0.05)


def test_end_member_kills_a_child_that_does_not_exit():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    t0 = time.monotonic()
    end_member(child, grace_s=0.5)
    assert child.returncode == -signal.SIGKILL and time.monotonic() - t0 < 10


def _dead_owner() -> dict:
    """A pid file's owner that has exited (its pid with its start time)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = psutil.Process(proc.pid).create_time()
    proc.wait()
    return {"pid": proc.pid, "start": start, "cmd": "accelbench run"}


def _write_pid_file(folder: Path, owner: dict, procs: list[tuple[int, float]]) -> Path:
    path = folder / f".accelbench-children.{owner['pid']}"
    body = {"owner": owner, "groups": [pid for pid, _ in procs],
            "processes": [{"pid": pid, "start": start, "cmd": "tritonserver --model-repository=x"}
                          for pid, start in procs]}  # fmt: skip
    path.write_text(json.dumps(body))
    return path


def test_serve_ends_what_a_killed_instance_left_and_spares_a_reused_pid(tmp_path):
    """Both the owner and its supervisor were killed (a pid file is left): the next start ends what it lists,
    in one line, and a process whose pid matches but whose start time does not is someone else's."""
    repo = tmp_path / "repo"
    repo.mkdir()
    left = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        start = psutil.Process(left.pid).create_time()
        stranger_start = psutil.Process(stranger.pid).create_time()
        stale = _write_pid_file(
            repo, _dead_owner(), [(left.pid, start), (stranger.pid, stranger_start - 100)]
        )
        result = subprocess.run([ACCELBENCH, "serve", str(repo)], capture_output=True, text=True, timeout=60)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and "no models" in lines[-1], result.stderr
        assert len(lines) == 2 and LEFT in lines[0] and f"(pid {left.pid})" in lines[0], lines
        assert left.wait(timeout=10) == -signal.SIGKILL
        assert stranger.poll() is None and not stale.exists()
    finally:
        for proc in (left, stranger):
            proc.kill()
            proc.wait()


OWNER = """
import subprocess, sys, threading, time
from accelbench.processes import start_group
def start():  # from a thread that ends at once: the child must not die with it
    inner = "import subprocess, time; subprocess.Popen(['sleep', '60'], start_new_session=True); time.sleep(60)"
    print(start_group([sys.executable, '-c', inner]).pid, flush=True)
thread = threading.Thread(target=start)
thread.start()
thread.join()
time.sleep(60)
"""


def test_a_killed_owner_takes_its_child_and_a_grandchild_in_another_session_with_it():
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    try:
        child = psutil.Process(int(owner.stdout.readline()))
        deadline = time.monotonic() + 20
        while not child.children() and time.monotonic() < deadline:
            time.sleep(0.05)
        (grandchild,) = child.children()
        time.sleep(1.0)  # the supervisor has seen the grandchild (it looks twice a second)
        assert child.is_running() and os.getsid(grandchild.pid) != os.getsid(child.pid)
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 10
        while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in (child, grandchild)):
            assert time.monotonic() < deadline, "the child or its grandchild outlived the SIGKILLed owner"
            time.sleep(0.05)
    finally:
        owner.kill()
        owner.wait()
