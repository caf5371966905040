"""Nothing outlives its parent: an `accelbench serve`, `loadtest` (with Locust workers), `run` and `agent`
SIGKILLed in the middle of their work leave no process behind (checked by process group and by the
children's command lines) within a few seconds, and the next start on the same folder finds nothing to end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import psutil
import pytest
from campaign_helpers import api_client, end_agents, spec_text, start_agent, wait_campaign
from conftest import ACCELBENCH, IDENTITY_MODEL, SIGKILL_MARK
from service_fixtures import create_token, running_server

pytestmark = pytest.mark.slow
GONE_WITHIN_S = 10.0
# every process this pytest process starts inherits it (tests/conftest.py sets it): another session's process of the
# same command line, one whose owner has just exited (a supervisor in its last moment, handed to init), is not ours
MARK = SIGKILL_MARK
LEFT = "left running by an earlier accelbench"
LONG_LOAD = """
[load]
levels = [1, 2, 3, 4, 5, 6]
duration_s = 2
warmup_s = 0.5
window_s = 0.5
[slo]
latency_ms = 50
"""


def _live(proc: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    return False


def _family(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _wait_for(pid: int, ready, timeout_s: float = 240) -> list[psutil.Process]:
    """The process's family once ``ready(family)`` holds (each member's cmdline in a list)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            members = _family(pid)
            cmdlines = [" ".join(p.cmdline()) for p in members]
            if ready(cmdlines):
                return members
        time.sleep(0.2)
    raise AssertionError(f"pid {pid} never reached the state to kill it in")


def _pytest_tree() -> set[int]:
    """The processes this test run started and still parents: the test's own children (its own supervisor has
    the same command line as the killed one's) and, under pytest-xdist, every worker's (another worker's
    `accelbench serve` has a watchdog of the same command line). The killed process's children are not in it:
    with their parent gone the kernel hands them to init."""
    me = psutil.Process()
    root = me.parent() if os.environ.get("PYTEST_XDIST_WORKER") else me
    return {c.pid for c in (root or me).children(recursive=True)}


def _foreign(proc: psutil.Process) -> bool:
    """Started by another pytest-xdist worker (its MARK differs); one without the mark is a suspect."""
    mark = proc.environ().get(MARK)
    return mark is not None and mark != os.environ[MARK]


def _kill_and_check_gone(proc: subprocess.Popen, members: list[psutil.Process]) -> None:
    """SIGKILL the accelbench process alone (as the OOM killer does); every process it started, found by
    its process group and by its command line, must be gone within GONE_WITHIN_S."""
    groups = {os.getpgid(p.pid) for p in members[1:] if _live(p)}
    groups.discard(os.getpgid(os.getpid()))
    cmdlines = {" ".join(p.cmdline()) for p in members[1:] if _live(p)}
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + GONE_WITHIN_S
    while True:
        left = []
        ours = _pytest_tree()
        for p in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error):
                if not _live(p) or p.pid in ours:
                    continue
                if os.getpgid(p.pid) in groups or (
                    " ".join(p.info["cmdline"] or []) in cmdlines and not _foreign(p)
                ):
                    left.append((p.pid, " ".join(p.info["cmdline"] or [])[:120]))
        if not left:
            return
        if time.monotonic() > deadline:
            for pid, _ in left:  # a failing test must not leave them running either
                with contextlib.suppress(psutil.Error):
                    psutil.Process(pid).kill()
            raise AssertionError(f"left behind {GONE_WITHIN_S} s after SIGKILL: {left}")
        time.sleep(0.2)


def test_a_killed_serve_leaves_no_tritonserver_and_the_next_serve_finds_nothing(identity_repo):
    def serve() -> subprocess.Popen:
        return subprocess.Popen([ACCELBENCH, "serve", str(identity_repo)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip

    first = serve()
    try:
        for line in first.stdout:  # serving, its log quiet: a server still loading dies of SIGPIPE anyway
            if line.startswith("READY"):
                break
        members = _family(first.pid)
        assert any("triton_python_backend_stub" in " ".join(p.cmdline()) for p in members)
        _kill_and_check_gone(first, members)
    finally:
        end_agents([first])
    second = serve()
    try:
        for line in second.stdout:
            if line.startswith("READY"):
                break
        second.send_signal(signal.SIGINT)
        _, err = second.communicate(timeout=60)
    finally:
        end_agents([second])
    assert second.returncode == 0 and LEFT not in err, err
    assert not list(identity_repo.glob(".accelbench-children.*"))


def test_a_killed_loadtest_leaves_no_server_and_no_locust_worker(identity_repo, tmp_path):
    cmd = [ACCELBENCH, "loadtest", str(identity_repo), "--model", IDENTITY_MODEL, "--card", "builtin:identity",
           "--concurrency", "1,2,2,2", "--duration", "3", "--warmup", "0.5", "--processes", "2",
           "--out", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        members = _wait_for(proc.pid, lambda c: sum("--worker" in x for x in c) == 2)
        time.sleep(1.0)  # the workers are sending load
        members = _family(proc.pid)
        assert any("tritonserver" in " ".join(p.cmdline()) for p in members)
        _kill_and_check_gone(proc, members)
    finally:
        end_agents([proc])


def test_a_run_killed_mid_sweep_leaves_nothing_and_the_rerun_resumes_without_leftovers(tmp_path):
    spec = tmp_path / "spec.toml"
    out = tmp_path / "out"
    spec.write_text(spec_text("killed", ["cpu-local"], [], LONG_LOAD))
    run = [ACCELBENCH, "run", str(spec), "--out", str(out), "--quiet"]
    first = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(first.pid, lambda c: any("accelbench.loadtests.runner" in x for x in c)
                            and any("triton_python_backend_stub" in x for x in c))  # fmt: skip
        time.sleep(1.0)
        _kill_and_check_gone(first, _family(first.pid))
    finally:
        end_agents([first])
    rerun = subprocess.run(run, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0 and LEFT not in rerun.stderr, rerun.stderr[-2000:]
    assert not list(out.glob(".accelbench-children.*"))


def test_an_agent_killed_mid_job_leaves_nothing_and_the_next_agent_finds_nothing(tmp_path):
    db = f"sqlite:///{tmp_path / 'results.db'}"
    with running_server(db, tmp_path) as server:
        runner = create_token(db, "runner", "agents")
        api = api_client(server.base_url)
        spec = spec_text("killed-agent", ["cpu-local"], [], LONG_LOAD)
        headers = {"Authorization": f"Bearer {server.token}"}
        campaign = api.post("/api/v1/campaigns", json={"spec": spec}, headers=headers).json()
        work = tmp_path / "host"
        agent = start_agent(server.base_url, runner, "cpu-local", work, "a")
        try:
            members = _wait_for(agent.pid, lambda c: any("accelbench.loadtests.runner" in x for x in c))
            time.sleep(1.0)
            _kill_and_check_gone(agent, _family(agent.pid))
        finally:
            end_agents([agent])
        state = wait_campaign(api, campaign["id"], server.token, 10, until=lambda c: True)
        assert state["jobs"][0]["status"] == "running"  # leased by the dead agent, not finished by it
        again = start_agent(server.base_url, runner, "cpu-local", work, "b", "--idle-exit", "1")
        try:
            assert again.wait(timeout=120) == 0
        finally:
            end_agents([again])
        log = (work / "b.log").read_text()
        assert LEFT not in log and '"idle": 1' in log, log[-2000:]
        assert members and not list(work.glob(".accelbench-children.*"))
