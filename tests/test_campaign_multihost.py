"""Three hosts on one machine: the server and two agents in separate network namespaces (``ip netns`` + veth,
each host its own 10.77.x address), a campaign with two CPU targets completes; on SQLite and on PostgreSQL
(the database runs on the server's host, reachable only there). Traffic stays inside the namespaces."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import netns_harness
import pytest
from campaign_helpers import ACCELBENCH, end_agents, spec_text, start_agent, start_server_on, stop_server

pytestmark = pytest.mark.slow
PG_BIN = netns_harness.PG_BIN
PORT = 8080  # each namespace has its own ports: nothing else listens on the server host's 8080


def _on(hosts, name: str, cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    done = hosts.run(name, cmd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd}: {done.stderr[-2000:]}"
    return done


def _get(hosts, name: str, url: str, token: str = "") -> str | None:
    """GET ``url`` from host ``name`` (an HTTP client in that namespace); None when it does not answer."""
    code = ("import httpx,sys; h={'Authorization': 'Bearer '+sys.argv[2]} if sys.argv[2] else {};"
            "r=httpx.get(sys.argv[1], headers=h, timeout=5); print(r.text) if r.status_code == 200 else sys.exit(1)")  # fmt: skip
    done = hosts.run(
        name, [sys.executable, "-c", code, url, token], capture_output=True, text=True, timeout=60
    )
    return done.stdout if done.returncode == 0 else None


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_server_and_two_agents_on_three_hosts_complete_a_campaign(kind, tmp_path):
    netns_harness.require()
    if kind == "postgresql" and not PG_BIN:
        if os.environ.get("ACCELBENCH_REQUIRE_POSTGRES"):
            pytest.fail("ACCELBENCH_REQUIRE_POSTGRES is set but PostgreSQL's binaries are missing")
        pytest.skip("PostgreSQL server binaries missing (apt-get install -y postgresql)")
    base = Path(tempfile.mkdtemp(prefix="accelbench-netns-"))
    hosts = netns_harness.Hosts(["server", "agent1", "agent2"], third_octet=1 if kind == "sqlite" else 2)
    server = None
    agents: list[subprocess.Popen] = []
    stop_pg: list[str] | None = None
    try:
        db = f"sqlite:///{base / 'results.db'}"
        if kind == "postgresql":
            db, stop_pg = hosts.start_postgres("server", base)
        admin = _on(
            hosts, "server", [ACCELBENCH, "token", "create", "--db", db, "--scope", "admin", "--name", "a"]
        ).stdout.strip()
        runner = _on(
            hosts, "server", [ACCELBENCH, "token", "create", "--db", db, "--scope", "runner", "--name", "r"]
        ).stdout.strip()
        address = hosts.address("server")
        url = f"http://{address}:{PORT}"
        server = start_server_on(
            db, PORT, base / "server.log", host=address, prefix=hosts.command("server", [])
        )
        deadline = time.monotonic() + 90
        while _get(hosts, "agent1", url + "/api/v1/health") is None:
            assert server.poll() is None and time.monotonic() < deadline, (base / "server.log").read_text()[
                -2000:
            ]
            time.sleep(0.5)
        assert _get(hosts, "agent2", url + "/api/v1/health") is not None  # the second host reaches it too
        assert hosts.address("agent1") != hosts.address("agent2")
        spec = base / "spec.toml"
        spec.write_text(spec_text("hosts", ["cpu-local", "c7i.large"], ["l4"]))
        for i, target in enumerate(("cpu-local", "c7i.large"), start=1):
            agents.append(start_agent(url, runner, target, base / f"agent{i}", f"agent{i}", "--once", "--quiet",
                                      prefix=hosts.command(f"agent{i}", [])))  # fmt: skip
        submitted = hosts.run("agent1", [ACCELBENCH, "submit", str(spec), "--server", url, "--token", admin, "--wait"],
                              capture_output=True, text=True, timeout=900)  # fmt: skip
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        assert "cpu-local: done" in submitted.stdout and "c7i.large: done" in submitted.stdout
        for agent in agents:
            assert agent.wait(timeout=120) == 0
        runners = _get(hosts, "agent2", url + "/api/v1/runners", admin)
        assert runners is not None and '"agent1"' in runners and '"agent2"' in runners
        # the agents' hosts have no route to the host's own loopback servers: only the link
        assert _get(hosts, "agent1", f"http://127.0.0.1:{PORT}/api/v1/health") is None
    finally:
        end_agents(agents)
        if server is not None:
            stop_server(server)
        if stop_pg:
            hosts.run("server", stop_pg, capture_output=True)
        hosts.close()
        shutil.rmtree(base, ignore_errors=True)
    assert not any(ns.startswith(hosts.tag) for ns in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                                      text=True).stdout.split())  # fmt: skip
