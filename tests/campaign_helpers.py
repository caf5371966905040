"""Helpers for the campaign end-to-end tests: agents as real ``accelbench agent`` processes, a server restarted
on the same port, and waiting on a campaign through the API."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ACCELBENCH = str(Path(sys.executable).parent / "accelbench")
TINY_LOAD = """
[load]
levels = [1]
duration_s = 1
warmup_s = 0.5
window_s = 0.5
[slo]
latency_ms = 50
"""


def api_client(url: str) -> httpx.Client:
    """A client that opens a connection per request: the test pauses for longer than the server keeps an idle
    connection, and reusing one it just closed is a spurious reset."""
    return httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_keepalive_connections=0))


def spec_text(name: str, measured: list[str], projected: list[str], load: str = TINY_LOAD) -> str:
    targets = "".join(f'[[targets]]\nid = "{t}"\nmode = "local"\n' for t in measured)
    targets += "".join(f'[[targets]]\nid = "{t}"\nmode = "project"\n' for t in projected)
    return f'name = "{name}"\n[[models]]\nuri = "builtin:identity"\nprecisions = ["fp32"]\n{targets}{load}'


def start_agent(server: str, token: str, target: str, work: Path, name: str, *extra: str,
                prefix: list[str] | None = None) -> subprocess.Popen:  # fmt: skip
    """``accelbench agent`` in its own process group; its output goes to ``work/agent.log``."""
    work.mkdir(parents=True, exist_ok=True)
    cmd = [*(prefix or []), ACCELBENCH, "agent", "--server", server, "--target", target, "--work-dir", str(work),
           "--name", name, *extra]  # fmt: skip
    log = open(work / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it; closed when the test ends
    env = {**os.environ, "ACCELBENCH_TOKEN": token}
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def kill_tree(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the agent and every process under it (tritonserver and Locust run in groups of their
    own, so killing the agent's group alone would leave them): a host that vanished."""
    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for p in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=60)
    psutil.wait_procs([p for p in family if p.is_running()], timeout=30)


def end_agents(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            kill_tree(proc, signal.SIGKILL)


def start_server_on(db: str, port: int, log: Path, *extra: str, prefix: list[str] | None = None,
                    host: str = "127.0.0.1") -> subprocess.Popen:  # fmt: skip
    out = open(log, "ab")  # noqa: SIM115 - the child keeps it
    cmd = [*(prefix or []), ACCELBENCH, "server", "--db", db, "--host", host, "--port", str(port), *extra]
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/api/v1/health", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise AssertionError(f"server did not answer in {timeout_s} s: {log.read_text()[-2000:]}")


def stop_server(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def wait_campaign(api: httpx.Client, campaign_id: int, token: str, timeout_s: float, until: Any = None,
                  agents: list[subprocess.Popen] | None = None, logs: list[Path] | None = None) -> dict:  # fmt: skip
    """Poll the campaign until ``until(campaign)`` (default: finished); fail with the agents' logs on time-out."""
    until = until or (lambda c: c["status"] not in ("queued", "running"))
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(httpx.TransportError):
            campaign = api.get(
                f"/api/v1/campaigns/{campaign_id}", headers={"Authorization": f"Bearer {token}"}
            )
            if campaign.status_code == 200 and until(campaign.json()):
                return campaign.json()
        if time.monotonic() > deadline:
            tails = [p.read_text(errors="replace")[-1500:] for p in logs or [] if p.is_file()]
            raise AssertionError(f"campaign {campaign_id} not there in {timeout_s} s; agent logs: {tails}")
        time.sleep(0.5)


def job_documents(api: httpx.Client, job_id: int, token: str) -> list[dict]:
    """The job's pushed partial documents (a keep-alive connection reset is retried); [] while the server is down."""
    for _ in range(5):
        try:
            r = api.get(f"/api/v1/jobs/{job_id}/documents", headers={"Authorization": f"Bearer {token}"})
        except httpx.TransportError:
            time.sleep(0.5)
            continue
        return r.json()["documents"] if r.status_code == 200 else []
    return []
