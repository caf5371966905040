"""One helper starts and ends child process groups; the load stage's modules import each other one way."""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from accelbench.processes import end_group, end_member, start_group

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
        if path.name != "processes.py":
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
