"""Answers lost on the way back, on the real server (SQLite and PostgreSQL) behind a proxy that forwards each
request and drops or delays the answers of chosen routes (tests/lossy_proxy.py): a finished result whose
answer is lost is stored once although a second attempt delivers it again; a claim whose answer is lost is
handed back to the runner that retries it, and withdrawn within a heartbeat interval from one that never
does; heartbeats keep their schedule over a slow link (issue 50)."""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path

import httpx
import pytest
from campaign_helpers import spec_text
from lossy_proxy import LossyProxy
from service_fixtures import create_token

from accelbench.client.http import ServerClient, Unreachable
from accelbench.client.job import JobSink
from accelbench.documents import load_result
from accelbench.loadtests.events import Cancel, StepFinished

pytestmark = pytest.mark.slow
DOC = (
    Path(__file__).parent
    / "data"
    / "reports"
    / "cpu-local"
    / "resnet50__cpu-local__fp32__closed-http-b1.json"
)
ONE_JOB = spec_text("lost-answers", ["cpu-local"], [])


class Api:
    """The admin's and the runners' calls, straight to the server (no proxy)."""

    def __init__(self, server) -> None:
        self.url, self.admin = server.base_url, server.token
        self.runner = create_token(server.db_url, "runner", "lost-answers")
        self.http = httpx.Client(base_url=server.base_url + "/api/v1", timeout=60)
        self.secrets: dict[int, str] = {}

    def h(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.runner}"}

    def campaign(self, **extra) -> dict:
        r = self.http.post("/campaigns", json={"spec": ONE_JOB, **extra}, headers=self.h(self.admin))
        assert r.status_code == 201, r.text
        return r.json()

    def get(self, campaign_id: int) -> dict:
        return self.http.get(f"/campaigns/{campaign_id}", headers=self.h(self.admin)).json()

    def register(self, name: str) -> int:
        r = self.http.post("/runners", json={"name": name, "target": "cpu-local"}, headers=self.h())
        assert r.status_code == 200, r.text
        self.secrets[r.json()["id"]] = r.json()["secret"]
        return r.json()["id"]

    def claim_body(self, rid: int, wait_s: float = 0.0) -> dict:
        return {"runner_id": rid, "runner_secret": self.secrets[rid], "wait_s": wait_s}

    def claim(self, rid: int, wait_s: float = 0.0) -> dict | None:
        r = self.http.post("/jobs/claim", json=self.claim_body(rid, wait_s), headers=self.h())
        assert r.status_code in (200, 204), r.text
        return r.json() if r.status_code == 200 else None

    def ids(self, job: dict, rid: int) -> dict:
        return {"runner_id": rid, "runner_secret": self.secrets[rid], "attempt": job["attempt"],
                "lease_secret": job["lease_secret"]}  # fmt: skip

    def call(self, job: dict, rid: int, what: str, **extra) -> httpx.Response:
        return self.http.post(
            f"/jobs/{job['id']}/{what}", json={**self.ids(job, rid), **extra}, headers=self.h()
        )


@pytest.fixture(scope="module")
def api(live_server):
    api = Api(live_server)
    yield api
    api.http.close()


def _sink(api: Api, url: str, job: dict, rid: int) -> JobSink:
    client = ServerClient(url, api.runner, retry_s=0)
    return JobSink(client, job["id"], api.ids(job, rid), Cancel(), deque(), job["lease_s"] / 3)


def test_a_finished_result_whose_answer_is_lost_is_stored_once_across_attempts(api, tmp_path):
    """The HIGH duplicate: A's result is stored but its answer and A's `done` are lost; the lease runs out and
    B, resuming the job, delivers the same run again. B resumes from the finished document, and the server
    answers B's result as the one it holds: one result linked to the job."""
    lease_s = 2.0
    campaign = api.campaign(lease_s=lease_s, max_attempts=2)
    a, b = api.register("dup-a"), api.register("dup-b")
    job = api.claim(a)
    assert job is not None and job["id"] == campaign["jobs"][0]["id"]
    finished = load_result(json.loads(DOC.read_text()))
    partial = finished.model_copy(deep=True)
    partial.complete = False  # the sweep as it stood after its last step
    path = tmp_path / DOC.name
    with LossyProxy(api.url) as proxy:
        proxy.drop("POST", r"/jobs/\d+/results$")
        sink = _sink(api, proxy.url, job, a)
        sink.client.call("POST", f"/jobs/{job['id']}/heartbeat", {**api.ids(job, a), "log_tail": ""})
        sink.step(StepFinished(step=partial.steps[-1], document=partial, path=path))
        sink.flush()
        sink.result(path, finished, None)  # stored on the server; the answer is lost
        assert proxy.dropped == 1 and len(sink.unsent) == 1
        stored = api.get(campaign["id"])["results"]
        assert len(stored) == 1
        sink.client.close()  # A's link is gone: its `done` never arrives
    time.sleep(lease_s + 0.5)
    again = api.claim(b)
    assert again is not None and again["id"] == job["id"] and again["attempt"] == 2
    (resume,) = again["documents"]
    assert resume["complete"] is True, "B resumes from the partial document, not the finished one"
    # what B sends for that run: the finished sweep, stamped again (created_at) as a resumed sweep did
    restamped = json.loads(DOC.read_text())
    restamped["provenance"]["created_at"] = "2030-01-01T00:00:00Z"
    restamped["provenance"]["server"]["url"] = "http://10.0.0.2:8000"
    second = api.call(again, b, "results", result=restamped, source=DOC.name)
    assert second.status_code == 200, second.text  # the same result, not a second one
    assert second.json()["id"] == stored[0]
    assert api.call(again, b, "done").status_code == 200
    got = api.get(campaign["id"])
    assert got["status"] == "done" and got["results"] == stored


def test_a_retried_claim_gets_back_the_job_whose_answer_was_lost(api):
    campaign = api.campaign(lease_s=3.0, max_attempts=1)
    rid = api.register("claim-retry")
    with LossyProxy(api.url) as proxy, ServerClient(proxy.url, api.runner, retry_s=10) as client:
        proxy.drop("POST", r"/jobs/claim$")
        job = client.call("POST", "/jobs/claim", api.claim_body(rid))  # the first answer is lost: retried
        assert proxy.dropped == 1
    assert job is not None, (
        "the retried claim found nothing: the job sits running for a runner that never saw it"
    )
    assert job["id"] == campaign["jobs"][0]["id"] and job["attempt"] == 1
    assert api.call(job, rid, "heartbeat").status_code == 200  # the fresh lease secret is the one that counts
    assert api.call(job, rid, "done").status_code == 200
    assert api.get(campaign["id"])["status"] == "done"


def test_a_claim_whose_runner_never_heard_of_it_goes_back_to_the_queue(api):
    """A's claim answer is lost and A never asks again (its link is down). Within one heartbeat interval
    (2 s of a 6 s lease) the job is queued again, the attempt not counted: B, long-polling, gets it as
    attempt 1 of 1, long before A's lease would have run out."""
    campaign = api.campaign(lease_s=6.0, max_attempts=1)
    a, b = api.register("never-heard"), api.register("heard")
    with LossyProxy(api.url) as proxy, ServerClient(proxy.url, api.runner, retry_s=0) as client:
        proxy.drop("POST", r"/jobs/claim$")
        with pytest.raises(Unreachable):
            client.call("POST", "/jobs/claim", api.claim_body(a))
    job = api.claim(b, wait_s=4.5)  # less than the lease: before this change the job sat running for A
    assert job is not None and job["id"] == campaign["jobs"][0]["id"] and job["attempt"] == 1
    history = api.get(campaign["id"])["jobs"][0]["history"]
    assert [(e["runner"], e["outcome"]) for e in history] == [("never-heard", "claim not acknowledged")]
    assert api.call(job, b, "heartbeat").status_code == 200
    assert api.call(job, b, "done").status_code == 200
    assert api.get(campaign["id"])["status"] == "done"


def test_a_claim_acknowledged_late_over_a_slow_link_is_still_the_runners(api):
    """A link slower than a heartbeat interval: the claim's answer arrives after the offer could be withdrawn
    (0.5 s of a 1.5 s lease). No other runner took the job meanwhile, so the late first heartbeat takes it:
    a slow link never loses every claim it makes."""
    campaign = api.campaign(lease_s=1.5, max_attempts=1)
    rid = api.register("slow-claim")
    with LossyProxy(api.url) as proxy, ServerClient(proxy.url, api.runner, retry_s=0) as client:
        proxy.delay("POST", r"/jobs/claim$", 1.0)
        job = client.call("POST", "/jobs/claim", api.claim_body(rid))
    assert job is not None and job["attempt"] == 1
    assert api.call(job, rid, "heartbeat").status_code == 200
    state = api.get(campaign["id"])["jobs"][0]
    assert (state["status"], state["attempts"]) == ("running", 1)
    assert [e["outcome"] for e in state["history"]] == ["claim acknowledged late"]
    assert api.call(job, rid, "done").status_code == 200


# SQLite only: what this checks is the client's side (its schedule, its count), not the database's
@pytest.mark.parametrize("live_server", ["sqlite"], indirect=True)
def test_heartbeats_are_due_an_interval_after_the_send_not_after_a_slow_answer(api, live_server):
    """Each heartbeat's answer takes 1.3 s (a 3 s lease: a beat every second). Scheduled after the round trip
    the beats were 2.3 s apart, most of the lease; from the send, each follows the answer before it at once."""
    lease_s, delay_s = 3.0, 1.3
    campaign = api.campaign(lease_s=lease_s, max_attempts=1)
    rid = api.register("slow-link")
    job = api.claim(rid)
    assert job is not None
    with LossyProxy(api.url) as proxy:
        proxy.delay("POST", r"/heartbeat$", delay_s)
        sink = _sink(api, proxy.url, job, rid)
        sink.start()
        deadline = time.monotonic() + 30
        while sum(p.endswith("/heartbeat") for _, _, p in proxy.seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        sink.end()
        sink.client.close()
    beats = [t for t, _, p in proxy.seen if p.endswith("/heartbeat")]
    gaps = [round(b - a, 2) for a, b in zip(beats, beats[1:], strict=False)]
    assert sink.lost is None and len(beats) >= 3
    assert max(gaps) < delay_s + lease_s / 6, gaps  # after the round trip: delay_s + lease_s / 3
    assert api.call(job, rid, "done").status_code == 200
    assert api.get(campaign["id"])["status"] == "done"


def _distinct_results(folder: Path, tag: str) -> Path:
    """The recorded cpu-local results under run ids of their own (new to the server)."""
    folder.mkdir()
    for path in sorted(DOC.parent.glob("*.json")):
        doc = json.loads(path.read_text())
        doc["run_id"] = f"{doc['run_id']}-{tag}"
        (folder / path.name).write_text(json.dumps(doc))
    return folder


# SQLite only: what this checks is the client's side (its schedule, its count), not the database's
@pytest.mark.parametrize("live_server", ["sqlite"], indirect=True)
def test_a_push_whose_batch_answer_is_lost_is_retried_and_counts_what_the_server_holds(
    api, live_server, tmp_path
):
    from accelbench.client.push import push_paths
    from accelbench.errors import ServerError

    token = create_token(live_server.db_url, "push", "lossy-push")
    sent, cut = _distinct_results(tmp_path / "sent", "retried"), _distinct_results(tmp_path / "cut", "cut")
    with LossyProxy(api.url) as proxy:
        proxy.drop("POST", r"/results/batch$")  # stored, the answer lost: sent again, stored once
        count = push_paths([str(sent)], proxy.url, token, retry_s=10)
        assert proxy.dropped == 1
        assert (count.total, count.stored, count.resent) == (4, 4, 4)
        assert "the server holds 4 of 4" in count.line(proxy.url)
        proxy.drop("POST", r"/results/batch$", times=1000)  # every answer lost until it gives up
        with pytest.raises(ServerError) as lost:
            push_paths([str(cut)], proxy.url, token, retry_s=1)
    message = str(lost.value)
    assert "confirmed 0 of 4 stored; the answer for the next 4 was lost: they may be stored too" in message
    again = push_paths([str(cut)], live_server.base_url, token, retry_s=0)  # what the server holds now
    assert (again.created, again.existing, again.stored) == (0, 4, 4)
