"""Campaigns end to end with real agents (``accelbench agent`` processes: real quantize, tritonserver, Locust)
against a real server on SQLite: two CPU targets each served by its own agent and three projected targets end
as one campaign report, every result stored once; an agent stopped (SIGTERM) releases its job, one killed
(SIGKILL) loses it to lease expiry, the next resumes after the last pushed step, and a server restarted in the
middle loses nothing; an agent without the target's toolchain fails its job with one line."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from campaign_helpers import (
    ACCELBENCH,
    api_client,
    end_agents,
    job_documents,
    kill_tree,
    spec_text,
    start_agent,
    start_server_on,
    stop_server,
    wait_campaign,
    wait_healthy,
)
from markupsafe import escape
from service_fixtures import create_token, running_server

from accelbench.serving.server import free_port

pytestmark = pytest.mark.slow
PROJECTED = ["l4", "l40s", "inf2-xlarge"]
# 8 steps of about 2.5 s: room for a loaded host, where an agent's pushes (and the test's polls) lag behind its steps
# by several (in a clean-clone rehearsal B finished a sweep of 5 before the test saw its first step and killed it)
LEVELS = 8
RESUME_LOAD = f"""
[load]
levels = {list(range(1, LEVELS + 1))}
duration_s = 1.5
warmup_s = 0.5
window_s = 0.5
[slo]
latency_ms = 50
"""


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_two_cpu_targets_two_agents_three_projected_one_report(tmp_path):
    db = f"sqlite:///{tmp_path / 'results.db'}"
    with running_server(db, tmp_path, "--public-read") as server:
        runner = create_token(db, "runner", "agents")
        api = api_client(server.base_url)
        spec = spec_text("two-cpus", ["cpu-local", "c7i.large"], PROJECTED)
        campaign = api.post("/api/v1/campaigns", json={"spec": spec}, headers=_h(server.token)).json()
        assert [j["target"] for j in campaign["jobs"]] == ["cpu-local", "c7i.large"]
        agents = [start_agent(server.base_url, runner, "cpu-local", tmp_path / "host-a", "host-a", "--quiet"),
                  start_agent(server.base_url, runner, "c7i.large", tmp_path / "host-b", "host-b", "--once")]  # fmt: skip
        try:
            done = wait_campaign(api, campaign["id"], server.token, 600,
                                 logs=[tmp_path / "host-a" / "host-a.log", tmp_path / "host-b" / "host-b.log"])  # fmt: skip
            assert agents[1].wait(timeout=60) == 0  # --once: one job, then it exits
        finally:
            end_agents(agents)
        assert done["status"] == "done", done
        assert {j["target"]: (j["status"], j["runner"], j["attempts"]) for j in done["jobs"]} == {
            "cpu-local": ("done", "host-a", 1), "c7i.large": ("done", "host-b", 1)}  # fmt: skip
        stored = api.get("/api/v1/results", headers=_h(server.token)).json()
        assert stored["total"] == 2 and sorted(done["results"]) == sorted(r["id"] for r in stored["results"])
        assert sorted(r["target"] for r in stored["results"]) == ["c7i.large", "cpu-local"]
        report = api.get(f"/api/v1/campaigns/{campaign['id']}/report", headers=_h(server.token))
        assert report.status_code == 200, report.text
        rows = {(r["target"], r["status"]) for r in report.json()}
        assert rows == {("cpu-local", "measured"), ("c7i.large", "measured"), ("a100-sxm4-80gb", "projected"),
                        *((t, "projected") for t in PROJECTED)}, rows  # fmt: skip
        runners = api.get("/api/v1/runners", headers=_h(server.token)).json()["runners"]
        assert {r["name"]: r["catalog_match"] for r in runners} == {
            "host-a": "cpu-local",
            "host-b": "cpu-local",
        }
        # the page a reviewer opens (campaigns need a read token since --public-read opens results and reports
        # only; tests/test_service_pages.py drives the pages in Chromium): every job done, the report ranks all
        dom = api.get(f"/campaigns/{campaign['id']}", headers=_h(server.token)).text
        assert dom.count('data-status="done"') == 2 and 'id="campaign-status">done<' in dom
        page = api.get(f"/campaigns/{campaign['id']}/report", headers=_h(server.token)).text
        for target in ("cpu-local", "c7i.large", *PROJECTED):
            assert target in page


def test_stop_kill_and_server_restart_lose_no_step_and_duplicate_none(tmp_path):
    db = f"sqlite:///{tmp_path / 'results.db'}"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    admin = create_token(db, "admin", "admin")
    runner = create_token(db, "runner", "agents")
    server = start_server_on(db, port, log)
    agents: list[subprocess.Popen] = []
    api = api_client(url)
    try:
        wait_healthy(url, server, log)
        spec = spec_text("resume", ["cpu-local"], ["l4"], RESUME_LOAD)
        # 10 s: after the restart the server grants one lease period of grace, and an agent's retry backoff reaches
        # 5 s (client/http.py); with a 5 s lease a loaded machine once expired C's job too ("lease expired" twice)
        body = {"spec": spec, "lease_s": 10.0, "max_attempts": 3}
        campaign = api.post("/api/v1/campaigns", json=body, headers=_h(admin)).json()
        job_id = campaign["jobs"][0]["id"]
        logs = [tmp_path / n / f"{n}.log" for n in ("a", "b", "c")]

        def steps() -> list[dict]:
            docs = job_documents(api, job_id, admin)
            return docs[0]["steps"] if docs else []

        # A: SIGTERM after its first pushed step → the running step ends, the job is released
        agents.append(start_agent(url, runner, "cpu-local", tmp_path / "a", "a"))
        wait_campaign(api, campaign["id"], admin, 300, until=lambda _c: len(steps()) >= 1, logs=logs)
        agents[0].send_signal(signal.SIGTERM)
        assert agents[0].wait(timeout=120) == 0
        after_a = steps()
        state = api.get(f"/api/v1/campaigns/{campaign['id']}", headers=_h(admin)).json()["jobs"][0]
        # at least two steps left: one for B to push before it is killed, and one it must not reach
        assert state["status"] == "queued" and state["attempts"] == 0 and 1 <= len(after_a) <= LEVELS - 2, (
            state,
            len(after_a),
        )

        # B: SIGKILL (with its tritonserver and Locust) after one more step → the lease expires, requeued
        agents.append(start_agent(url, runner, "cpu-local", tmp_path / "b", "b"))
        wait_campaign(
            api, campaign["id"], admin, 300, until=lambda _c: len(steps()) > len(after_a), logs=logs
        )
        kill_tree(agents[1], signal.SIGKILL)
        after_b = steps()
        assert len(after_b) < LEVELS, "B finished the sweep before it could be killed: make the steps longer"

        # C takes it over; the server is killed and restarted on the same port while C works
        agents.append(start_agent(url, runner, "cpu-local", tmp_path / "c", "c"))
        wait_campaign(api, campaign["id"], admin, 120,
                      until=lambda c: c["jobs"][0]["runner"] == "c", logs=logs)  # fmt: skip
        stop_server(server, signal.SIGKILL)
        time.sleep(2)
        server = start_server_on(db, port, log)
        wait_healthy(url, server, log)
        done = wait_campaign(api, campaign["id"], admin, 600, logs=logs)
        (job,) = done["jobs"]
        assert done["status"] == "done" and job["status"] == "done" and job["runner"] == "c", job
        assert [h["outcome"] for h in job["history"]] == ["release", "lease expired", "done"], job["history"]
        assert job["attempts"] == 2  # B and C; A's released attempt does not count
        (result_id,) = done["results"]
        doc = api.get(f"/api/v1/results/{result_id}", headers=_h(admin)).json()["document"]
        assert [s["index"] for s in doc["steps"]] == list(range(LEVELS)) and doc["complete"]
        kept = {s["index"]: s for s in doc["steps"]}
        for (
            s
        ) in after_b:  # pushed steps were resumed, not redone; an INVALID one is measured again (--retries)
            if s["verdict"] != "INVALID":
                assert kept[s["index"]]["started_at"] == s["started_at"], s["index"]
            else:
                earlier = kept[s["index"]].get("earlier_attempts") or []
                assert s["started_at"] in [e.get("started_at") for e in earlier], s["index"]
        assert api.get("/api/v1/results", headers=_h(admin)).json()["total"] == 1
        c_log = (tmp_path / "c" / "c.log").read_text()
        assert f"({len(after_b)} step(s) already pushed)" in c_log
    finally:
        end_agents(agents)
        stop_server(server)


def test_an_agent_without_the_toolchain_fails_its_job_with_one_line(tmp_path):
    db = f"sqlite:///{tmp_path / 'results.db'}"
    with running_server(db, tmp_path, "--public-read") as server:
        runner = create_token(db, "runner", "agents")
        api = api_client(server.base_url)
        spec = spec_text("gpu", ["l4"], ["l40s"])
        campaign = api.post("/api/v1/campaigns", json={"spec": spec}, headers=_h(server.token)).json()
        agent = start_agent(server.base_url, runner, "l4", tmp_path / "cpu-host", "cpu-host", "--once")
        try:
            assert agent.wait(timeout=300) == 0
        finally:
            end_agents([agent])
        done = api.get(f"/api/v1/campaigns/{campaign['id']}", headers=_h(server.token)).json()
        (job,) = done["jobs"]
        assert job["status"] == "failed" and done["status"] == "failed"
        assert "tensorrt" in job["reason"].lower() and "\n" not in job["reason"], job["reason"]
        page = api.get(f"/campaigns/{campaign['id']}", headers=_h(server.token)).text
        assert 'data-status="failed"' in page and str(escape(job["reason"])) in page
        log = (tmp_path / "cpu-host" / "cpu-host.log").read_text()
        assert "failed: target l4" in log and json.loads(log.strip().splitlines()[-1]) == {"failed": 1}


CANCEL_LOAD = RESUME_LOAD  # 8 levels


def test_a_job_cancelled_on_the_server_stops_its_agent_after_the_running_step(tmp_path):
    """`accelbench job cancel` on a running job: the agent hears it at its next call (a heartbeat), the step
    running then finishes and no other starts, and the agent drops the job. The agent's line says how many
    steps it had recorded when told; the job's folder holds exactly those, or one more (the running one)."""
    db = f"sqlite:///{tmp_path / 'results.db'}"
    with running_server(db, tmp_path) as server:
        runner = create_token(db, "runner", "agents")
        api = api_client(server.base_url)
        spec = spec_text("cancel", ["cpu-local"], ["l4"], CANCEL_LOAD)
        body = {"spec": spec, "lease_s": 3.0}  # a heartbeat every second
        campaign = api.post("/api/v1/campaigns", json=body, headers=_h(server.token)).json()
        job_id = campaign["jobs"][0]["id"]
        work = tmp_path / "a"
        agent = start_agent(server.base_url, runner, "cpu-local", work, "a", "--once")
        try:
            wait_campaign(api, campaign["id"], server.token, 300, logs=[work / "a.log"],
                          until=lambda _c: any(d["steps"] for d in job_documents(api, job_id, server.token)))  # fmt: skip
            cancel = subprocess.run([ACCELBENCH, "job", "cancel", str(job_id), "--server", server.base_url],
                                    env={**os.environ, "ACCELBENCH_TOKEN": server.token}, capture_output=True,
                                    text=True, timeout=60)  # fmt: skip
            assert cancel.returncode == 0 and "cancelled" in cancel.stdout, cancel.stderr
            assert agent.wait(timeout=120) == 0
        finally:
            end_agents([agent])
        log = (work / "a.log").read_text()
        assert json.loads(log.strip().splitlines()[-1]) == {"lost": 1}, log[-2000:]
        told = re.search(r"\((\d+) step\(s\) recorded here when told, (\d+) in all\); dropped", log)
        assert told, log[-2000:]
        when_told, in_all = int(told[1]), int(told[2])
        assert 1 <= when_told <= in_all <= when_told + 1 and in_all < 8, (when_told, in_all)
        (result,) = (work / f"job-{job_id}" / "results").glob("*.json")
        local = json.loads(result.read_text())
        assert len(local["steps"]) == in_all and not local.get("complete")
        state = api.get(f"/api/v1/campaigns/{campaign['id']}", headers=_h(server.token)).json()["jobs"][0]
        assert state["status"] == "cancelled", state
