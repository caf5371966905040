"""The campaign and job API on a real server, on SQLite and on a real PostgreSQL: submit, claim races, leases
that expire and requeue, release, failure reasons, partial documents and idempotent result pushes."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from service_fixtures import create_token

from accelbench.cli import main
from accelbench.client.agent import CLAIM_WAIT_S

DATA = Path(__file__).parent / "data" / "reports"
SPEC = """
name = "api"
[[models]]
uri = "builtin:identity"
precisions = ["fp32"]
[[targets]]
id = "cpu-local"
mode = "local"
[[targets]]
id = "c7i.large"
mode = "local"
[[targets]]
id = "l4"
mode = "project"
"""
LEASE_S = 3.0  # short, but long enough for the next call to arrive on a loaded machine
ONE_JOB = SPEC.replace('id = "c7i.large"\nmode = "local"', 'id = "c7i.large"\nmode = "project"')


@pytest.fixture(scope="module")
def api(live_server):
    runner = create_token(live_server.db_url, "runner", "agents")
    read = create_token(live_server.db_url, "read", "reader")
    other = create_token(live_server.db_url, "runner", "other-host")
    with httpx.Client(base_url=live_server.base_url + "/api/v1", timeout=60) as client:
        yield client, {"admin": live_server.token, "runner": runner, "read": read, "other": other}


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _submit(client, tokens, spec=SPEC, **extra) -> dict:
    r = client.post("/campaigns", json={"spec": spec, **extra}, headers=_h(tokens["admin"]))
    assert r.status_code == 201, r.text
    return r.json()


SECRETS: dict[int, str] = {}  # runner id → runner secret (each server's ids are its own; names are unique)


def _runner(client, tokens, name: str, target: str = "cpu-local", labels=None, token: str = "runner") -> int:
    body = {"name": name, "target": target, "labels": labels or {}, "probe": {}, "version": "test"}
    r = client.post("/runners", json=body, headers=_h(tokens[token]))
    assert r.status_code == 200, r.text
    if r.json()["secret"]:
        SECRETS[r.json()["id"]] = r.json()["secret"]
    return r.json()["id"]


def _claim(client, tokens, runner_id: int, wait_s: float = 0.0, ack: bool = True):
    """Claim; with ``ack`` the first heartbeat follows at once, as an agent's does (an unacknowledged claim is
    withdrawn after a heartbeat interval: test_lost_answers.py)."""
    body = {"runner_id": runner_id, "runner_secret": SECRETS.get(runner_id, ""), "wait_s": wait_s}
    r = client.post("/jobs/claim", json=body, headers=_h(tokens["runner"]))
    assert r.status_code in (200, 204), r.text
    job = r.json() if r.status_code == 200 else None
    if job is not None and ack:
        assert _call(client, tokens, job, runner_id, "heartbeat").status_code == 200
    return job


def _ids(job, runner_id) -> dict:
    """What proves a job call comes from the runner holding the job: its ids and both secrets."""
    return {"runner_id": runner_id, "attempt": job["attempt"], "runner_secret": SECRETS.get(runner_id, ""),
            "lease_secret": job.get("lease_secret", "")}  # fmt: skip


def _call(client, tokens, job, runner_id, what, **extra):
    body = {**_ids(job, runner_id), **extra}
    return client.post(f"/jobs/{job['id']}/{what}", json=body, headers=_h(tokens["runner"]))


def _error(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, r.text
    assert set(r.json()) == {"error"} and r.text.count("\n") <= 1
    return r.json()["error"]


def _drain(client, tokens, target: str) -> None:
    """Finish every queued job of ``target`` (tests share one server per module)."""
    rid = _runner(client, tokens, f"drain-{target}", target)
    while (job := _claim(client, tokens, rid)) is not None:
        assert _call(client, tokens, job, rid, "done").status_code == 200


def test_submit_makes_one_job_per_measured_target(api):
    client, tokens = api
    campaign = _submit(client, tokens)
    assert [j["target"] for j in campaign["jobs"]] == ["cpu-local", "c7i.large"]
    assert campaign["projected"] == ["l4"] and campaign["status"] == "queued"
    assert all(j["status"] == "queued" and j["attempts"] == 0 for j in campaign["jobs"])
    got = client.get(f"/campaigns/{campaign['id']}", headers=_h(tokens["read"])).json()
    assert got["jobs"] == campaign["jobs"]
    _drain(client, tokens, "cpu-local")
    _drain(client, tokens, "c7i.large")


@pytest.mark.parametrize(
    "spec,message",
    [("name = [", "field spec: not valid TOML"),
     (SPEC.replace('"c7i.large"', '"c7i.huge"'), "targets[1].id"),
     (SPEC.replace('mode = "local"', 'mode = "project"'), "no measured target")],
)  # fmt: skip
def test_a_bad_spec_is_422_with_one_line(api, spec, message):
    client, tokens = api
    r = client.post("/campaigns", json={"spec": spec}, headers=_h(tokens["admin"]))
    assert message in _error(r, 422)


def test_scopes(api):
    client, tokens = api
    assert "may not admin" in _error(
        client.post("/campaigns", json={"spec": SPEC}, headers=_h(tokens["runner"])), 403
    )
    _error(client.post("/campaigns", json={"spec": SPEC}), 401)
    body = {"name": "x", "target": "cpu-local"}
    assert "may not runner" in _error(client.post("/runners", json=body, headers=_h(tokens["read"])), 403)
    _error(client.post("/jobs/claim", json={"runner_id": 999999}, headers=_h(tokens["runner"])), 403)


JOB_ROUTES = ("heartbeat", "documents", "results", "done", "fail", "release")


def _job_route(client, token, job_id, what, ids, doc):
    """One job call with ``ids`` (runner_id, attempt, secrets) and the body the route needs."""
    if what == "documents":
        return client.put(f"/jobs/{job_id}/documents", json={**ids, "document": doc}, headers=_h(token))
    body = {**ids, "result": doc} if what == "results" else {**ids, "reason": "x"}
    return client.post(f"/jobs/{job_id}/{what}", json=body, headers=_h(token))


def test_another_runner_cannot_act_on_a_runners_job(api):
    """Runner B (its own token, its own runner secret) is refused 403 on every job route of runner A's job,
    whether it names itself, names A without A's secret, or drops the lease secret; A's name cannot be taken
    over; A's own calls still work and the history credits A."""
    client, tokens = api
    _drain(client, tokens, "cpu-local")
    campaign = _submit(client, tokens, ONE_JOB)
    a = _runner(client, tokens, "owner-a")
    b = _runner(client, tokens, "intruder-b", token="other")
    job = _claim(client, tokens, a)
    assert job["lease_secret"].startswith("abl_") and SECRETS[a].startswith("abr_")
    doc = json.loads(sorted((DATA / "cpu-local").glob("*.json"))[0].read_text())
    forged = [
        {**_ids(job, b), "attempt": job["attempt"]},  # B as itself: it never held the job
        {**_ids(job, a), "runner_secret": SECRETS[b]},  # B naming A, with its own secret
        {**_ids(job, a), "runner_secret": ""},  # A's id, no secret
        {**_ids(job, a), "lease_secret": ""},  # A's runner secret but no lease secret
        {**_ids(job, a), "lease_secret": "abl_" + "x" * 43},
    ]
    for ids in forged:
        for what in JOB_ROUTES:
            r = _job_route(client, tokens["other"], job["id"], what, ids, doc)
            _error(r, 403)
    b_claims_a = {"runner_id": a, "runner_secret": SECRETS[b], "wait_s": 0}
    _error(client.post("/jobs/claim", json=b_claims_a, headers=_h(tokens["other"])), 403)
    takeover = {"name": "owner-a", "target": "cpu-local", "labels": {"x": "y"}, "probe": {}, "version": "t"}
    assert "belongs to another runner" in _error(client.post("/runners", json=takeover,
                                                             headers=_h(tokens["other"])), 409)  # fmt: skip
    listed = {r["name"]: r for r in client.get("/runners", headers=_h(tokens["admin"])).json()["runners"]}
    assert listed["owner-a"]["labels"] == {}
    for what in ("heartbeat", "documents", "results"):
        assert _job_route(client, tokens["runner"], job["id"], what, _ids(job, a), doc).status_code < 300
    assert _call(client, tokens, job, a, "done").status_code == 200
    got = client.get(f"/campaigns/{campaign['id']}", headers=_h(tokens["admin"])).json()
    assert got["jobs"][0]["history"][-1]["runner"] == "owner-a" and got["jobs"][0]["status"] == "done"


def test_a_runner_re_registers_with_its_secret_or_its_own_token(api):
    client, tokens = api
    first = client.post(
        "/runners", json={"name": "restarts", "target": "cpu-local"}, headers=_h(tokens["runner"])
    )
    secret = first.json()["secret"]
    again = client.post("/runners", json={"name": "restarts", "target": "cpu-local", "secret": secret},
                        headers=_h(tokens["other"]))  # fmt: skip
    assert again.status_code == 200 and again.json() == {**first.json(), "secret": None}
    lost = client.post(
        "/runners", json={"name": "restarts", "target": "cpu-local"}, headers=_h(tokens["runner"])
    )
    assert lost.status_code == 200 and lost.json()["secret"] not in (
        None,
        secret,
    )  # rotated: the old one is dead
    body = {"runner_id": first.json()["id"], "runner_secret": secret, "wait_s": 0}
    why = _error(client.post("/jobs/claim", json=body, headers=_h(tokens["runner"])), 403)
    assert "another agent registered as 'restarts'" in why and "--name" in why  # two agents, one name


def test_lease_expiry_requeues_then_expires_after_the_last_attempt(api):
    client, tokens = api
    campaign = _submit(client, tokens, ONE_JOB, lease_s=LEASE_S, max_attempts=2)
    first, second = _runner(client, tokens, "lease-a"), _runner(client, tokens, "lease-b")
    job = _claim(client, tokens, first)
    assert job["id"] == campaign["jobs"][0]["id"] and job["attempt"] == 1
    assert _claim(client, tokens, second) is None  # held by the first runner
    time.sleep(LEASE_S + 0.5)
    again = _claim(client, tokens, second)  # the lease ran out: requeued, taken by the other runner
    assert again["id"] == job["id"] and again["attempt"] == 2
    assert "no longer held" in _error(_call(client, tokens, job, first, "heartbeat"), 409)
    assert _call(client, tokens, again, second, "heartbeat").status_code == 200
    time.sleep(LEASE_S + 0.5)
    got = client.get(f"/campaigns/{campaign['id']}", headers=_h(tokens["read"])).json()
    (state,) = got["jobs"]
    assert state["status"] == "expired" and state["reason"] == "lease expired on each of 2 attempts"
    assert got["status"] == "failed"
    assert _claim(client, tokens, first) is None


def test_release_does_not_count_and_fail_keeps_its_reason(api):
    client, tokens = api
    campaign = _submit(client, tokens, ONE_JOB, max_attempts=1)
    rid = _runner(client, tokens, "release")
    job = _claim(client, tokens, rid)
    assert _call(client, tokens, job, rid, "release").json()["status"] == "queued"
    job = _claim(client, tokens, rid)
    assert job["attempt"] == 1  # the released attempt did not count against max_attempts = 1
    assert "needs its one-line reason" in _error(_call(client, tokens, job, rid, "fail"), 422)
    r = _call(client, tokens, job, rid, "fail", reason="TensorRT is not installed\n(pip install tensorrt)")
    assert r.json()["status"] == "failed"
    got = client.get(f"/campaigns/{campaign['id']}", headers=_h(tokens["read"])).json()
    assert got["jobs"][0]["reason"] == "TensorRT is not installed (pip install tensorrt)"
    assert got["jobs"][0]["history"][-1]["outcome"] == "fail"
    assert "is failed and no longer held" in _error(_call(client, tokens, job, rid, "done"), 409)


def test_partial_documents_come_back_with_the_next_claim_and_results_are_stored_once(api):
    client, tokens = api
    _submit(client, tokens, ONE_JOB, lease_s=LEASE_S)
    rid = _runner(client, tokens, "partial")
    job = _claim(client, tokens, rid)
    doc = json.loads(sorted((DATA / "cpu-local").glob("*.json"))[0].read_text())
    partial = {**doc, "steps": doc["steps"][:1], "complete": False}
    body = {**_ids(job, rid), "document": partial}
    assert (
        client.put(f"/jobs/{job['id']}/documents", json=body, headers=_h(tokens["runner"])).json()["steps"]
        == 1
    )
    time.sleep(LEASE_S + 0.5)
    again = _claim(client, tokens, rid)
    assert again["id"] == job["id"] and again["documents"] == [partial]
    push = {**_ids(again, rid), "result": doc, "source": "x.json"}
    first = client.post(f"/jobs/{job['id']}/results", json=push, headers=_h(tokens["runner"]))
    second = client.post(f"/jobs/{job['id']}/results", json=push, headers=_h(tokens["runner"]))
    assert first.status_code in (200, 201) and second.status_code == 200
    assert first.json()["id"] == second.json()["id"]
    assert _call(client, tokens, again, rid, "done").status_code == 200
    assert _call(client, tokens, again, rid, "done").json()["status"] == "done"  # a retried call: same answer
    got = client.get(f"/campaigns/{again['campaign_id']}", headers=_h(tokens["read"])).json()
    assert got["results"] == [first.json()["id"]] and got["status"] == "done"
    stale = {**push, **_ids(job, rid)}
    assert "no longer held" in _error(client.post(f"/jobs/{job['id']}/results", json=stale,
                                                  headers=_h(tokens["runner"])), 409)  # fmt: skip


def test_twenty_agents_racing_for_fifty_jobs_never_double_claim(api):
    client, tokens = api
    _drain(client, tokens, "c7i.xlarge")
    race_spec = ONE_JOB.replace('"cpu-local"', '"c7i.xlarge"')
    for _ in range(50):
        _submit(client, tokens, race_spec)
    runners = [_runner(client, tokens, f"racer-{i}", "c7i.xlarge") for i in range(20)]
    claims: list[tuple[int, int]] = []
    errors: list[str] = []
    start = threading.Barrier(len(runners))

    def agent(rid: int) -> None:
        with httpx.Client(base_url=client.base_url, timeout=120) as mine:
            start.wait()
            try:
                while (job := _claim(mine, tokens, rid)) is not None:
                    claims.append((job["id"], rid))
                    r = _call(mine, tokens, job, rid, "done")
                    if r.status_code != 200:
                        errors.append(r.text)
            except Exception as err:  # noqa: BLE001 - reported below, not lost in a thread
                errors.append(repr(err))

    threads = [threading.Thread(target=agent, args=(rid,)) for rid in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[:3]
    job_ids = [j for j, _ in claims]
    assert len(job_ids) == 50 and len(set(job_ids)) == 50, (
        f"{len(job_ids)} claims of {len(set(job_ids))} jobs"
    )
    assert len({r for _, r in claims}) > 1  # the race really was between several runners


def test_submit_cli(api, live_server, tmp_path):
    _, tokens = api
    spec = tmp_path / "exp.toml"
    spec.write_text(ONE_JOB)
    args = ["submit", str(spec), "--server", live_server.base_url, "--token", tokens["admin"]]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "1 job(s) (cpu-local)" in result.output and "/campaigns/" in result.output
    bad = CliRunner().invoke(main, [*args[:4], "--token", tokens["read"]])
    assert bad.exit_code == 2 and "may not admin" in bad.output and bad.output.count("\n") == 1
    missing = CliRunner().invoke(
        main, ["submit", str(tmp_path / "no.toml"), "--server", live_server.base_url]
    )
    assert missing.exit_code == 2 and "spec file not found" in missing.output
    _drain(*api, "cpu-local")


def test_runners_page_shows_labels_probe_version_and_marks_offline(api, live_server):
    import sqlalchemy as sa

    from accelbench.hardware.probe import probe_host
    from accelbench.service.campaign_models import Runner
    from accelbench.service.db import make_engine

    client, tokens = api
    probe = probe_host(known_ids=["cpu-local"])
    body = {
        "name": "desk-orin",
        "target": "cpu-local",
        "labels": {"site": "desk"},
        "probe": probe,
        "version": "9.9",
    }
    assert client.post("/runners", json=body, headers=_h(tokens["runner"])).status_code == 200
    _runner(client, tokens, "gone-host")
    engine = make_engine(live_server.db_url)
    with engine.begin() as conn:  # a runner last heard from an hour ago
        old = sa.func.now() - sa.text("interval '1 hour'") if engine.dialect.name == "postgresql" else None
        when = old if old is not None else sa.text("datetime('now', '-1 hour')")
        conn.execute(sa.update(Runner).where(Runner.name == "gone-host").values(last_seen=when))
    engine.dispose()
    listed = {r["name"]: r for r in client.get("/runners", headers=_h(tokens["read"])).json()["runners"]}
    assert listed["desk-orin"]["online"] and not listed["gone-host"]["online"]
    assert listed["desk-orin"]["catalog_match"] == "cpu-local" and listed["desk-orin"]["labels"] == {
        "site": "desk"
    }
    page = httpx.get(live_server.base_url + "/runners", headers=_h(tokens["read"])).text
    row = page[page.index("desk-orin") - 200 : page.index("desk-orin") + 800]
    assert "online" in row and "site=desk" in row and "9.9" in row and "CPU: " in row
    gone = page[page.index("gone-host") - 200 : page.index("gone-host") + 300]
    assert 'class="offline"' in gone
    unknown = {**body, "name": "x", "target": "h900"}
    assert "field target" in _error(client.post("/runners", json=unknown, headers=_h(tokens["runner"])), 422)


def test_the_web_form_submits_a_campaign_and_a_bad_spec_shows_its_line(api, live_server):
    _, tokens = api
    form = {"spec": ONE_JOB, "lease_s": "60", "max_attempts": "2"}
    with httpx.Client(base_url=live_server.base_url, timeout=60) as browser:
        assert (
            browser.post("/login", data={"token": tokens["admin"]}).status_code == 303
        )  # the session cookie
        page = browser.get("/campaigns")
        assert page.status_code == 200 and '<form method="post" action="/campaigns">' in page.text
        made = browser.post("/campaigns", data=form)
        assert made.status_code == 303 and made.headers["location"].startswith("/campaigns/")
        shown = browser.get(made.headers["location"])
        assert shown.status_code == 200 and 'data-status="queued"' in shown.text and "cpu-local" in shown.text
        assert (
            '<meta http-equiv="refresh"' not in shown.text and "?live=1" in shown.text
        )  # reloads when asked
        live = browser.get(made.headers["location"] + "?live=1")
        assert '<meta http-equiv="refresh"' in live.text  # unfinished and asked: the page refreshes itself
        bad = browser.post("/campaigns", data={**form, "spec": "name = ["})
        assert bad.status_code == 422 and 'role="alert"' in bad.text and "not valid TOML" in bad.text
        assert "name = [" in bad.text  # the spec stays in the form to fix
    with httpx.Client(base_url=live_server.base_url, timeout=60) as reader:
        assert reader.post("/login", data={"token": tokens["read"]}).status_code == 303
        assert reader.post("/campaigns", data=form).status_code == 403
    _drain(*api, "cpu-local")


@pytest.mark.parametrize(
    "path,body,status",
    [("/jobs/claim", {"runner_id": 2**40}, 422), ("/jobs/0/heartbeat", {"runner_id": 1, "attempt": 1}, 422),
     ("/jobs/2147483647/done", {"runner_id": 1, "attempt": 1}, 403),
     ("/runners", {"name": "a\x00b", "target": "cpu-local"}, 422), ("/jobs/1/documents", None, 405)],
)  # fmt: skip
def test_bad_ids_and_nul_are_one_line_errors_never_500(api, path, body, status):
    client, tokens = api
    r = client.post(path, json=body, headers=_h(tokens["runner"]))
    _error(r, status)


@pytest.mark.parametrize(
    "args,message",
    [(["--token", "abk_wrong"], "invalid or revoked API token"),
     (["--target", "h900"], "h900"),
     (["--label", "zone"], "--label 'zone': write KEY=VALUE"),
     (["--server", "bench:8080"], "give the server's URL")],
)  # fmt: skip
def test_agent_bad_input_is_one_line(live_server, tmp_path, args, message):
    base = {"--server": live_server.base_url, "--target": "cpu-local", "--token": "abk_wrong"}
    given = dict(zip(args[::2], args[1::2], strict=True))
    argv = ["agent", "--work-dir", str(tmp_path)]
    for key, value in {**base, **given}.items():
        argv += [key, value]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.count("\n") == 1, result.output


def test_an_idle_agent_exits_after_idle_exit(api, live_server, tmp_path):
    _, tokens = api
    argv = ["agent", "--server", live_server.base_url, "--target", "t4", "--token", tokens["runner"], "--once",
            "--idle-exit", "0.5", "--work-dir", str(tmp_path), "--name", "idle"]  # fmt: skip
    began = time.monotonic()
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    assert "no t4 job for 0.5 s; exiting" in result.output and result.output.strip().endswith('{"idle": 1}')
    # its long poll asked for what was left of the 0.5 s, not the whole CLAIM_WAIT_S (it took 10 s before)
    assert time.monotonic() - began < CLAIM_WAIT_S * 0.8


def test_the_claims_long_poll_is_cut_to_what_is_left_of_idle_exit():
    from accelbench.client.agent import _claim_wait_s

    assert _claim_wait_s(None, 100.0) == CLAIM_WAIT_S  # no --idle-exit: the whole poll
    assert _claim_wait_s(3.0, 0.0) == 3.0 and _claim_wait_s(3.0, 2.25) == 0.75
    assert _claim_wait_s(3.0, 5.0) == 0.0  # past it: ask once more without waiting, then exit
    assert _claim_wait_s(1800.0, 0.0) == CLAIM_WAIT_S


def test_a_runner_behind_many_jobs_it_cannot_take_still_gets_its_job(api):
    """Labels are matched in SQL: 60 older jobs asking for a label this runner lacks do not starve it (the
    claim used to read the 50 oldest and filter in Python)."""
    client, tokens = api
    _drain(client, tokens, "c7i.2xlarge")
    spec = ONE_JOB.replace('"cpu-local"', '"c7i.2xlarge"')
    for _ in range(60):
        _submit(client, tokens, spec, labels={"gpu": "a100"})
    mine = _submit(client, tokens, spec, labels={"site": "lab"})
    rid = _runner(client, tokens, "starving", "c7i.2xlarge", labels={"site": "lab", "extra": "x"})
    job = _claim(client, tokens, rid)
    assert job is not None and job["id"] == mine["jobs"][0]["id"]
    assert _call(client, tokens, job, rid, "done").status_code == 200
    assert _claim(client, tokens, rid) is None  # the a100 jobs stay queued for a runner that offers it
    a100 = _runner(client, tokens, "has-a100", "c7i.2xlarge", labels={"gpu": "a100"})
    taken = _claim(client, tokens, a100)
    assert taken is not None and taken["labels"] == {"gpu": "a100"}
    _call(client, tokens, taken, a100, "done")
    _drain_labelled(client, tokens, a100)


def _drain_labelled(client, tokens, rid) -> None:
    while (job := _claim(client, tokens, rid)) is not None:
        assert _call(client, tokens, job, rid, "done").status_code == 200


def test_a_job_past_its_time_limit_is_revoked_although_heartbeats_continue(api):
    client, tokens = api
    _drain(client, tokens, "cpu-local")
    campaign = _submit(client, tokens, ONE_JOB, lease_s=60, time_limit_s=2.0, max_attempts=1)
    assert campaign["jobs"][0]["time_limit_s"] == 2.0
    rid = _runner(client, tokens, "wedged")
    job = _claim(client, tokens, rid)
    deadline = time.monotonic() + 30
    beats = 0
    while time.monotonic() < deadline:
        r = _call(client, tokens, job, rid, "heartbeat")
        if r.status_code != 200:
            break
        beats += 1
        time.sleep(0.5)
    assert beats >= 1 and "no longer held" in _error(r, 409)  # the agent is told to stop
    got = client.get(f"/campaigns/{campaign['id']}", headers=_h(tokens["read"])).json()["jobs"][0]
    assert got["status"] == "expired" and "time limit of 2 s passed" in got["reason"]
    assert got["history"][-1]["outcome"] == "time limit of 2 s passed"


def test_cancel_and_requeue(api, live_server):
    client, tokens = api
    _drain(client, tokens, "cpu-local")
    campaign = _submit(client, tokens, ONE_JOB, max_attempts=1)
    job_id = campaign["jobs"][0]["id"]
    rid = _runner(client, tokens, "cancelled-agent")
    job = _claim(client, tokens, rid)
    assert "may not admin" in _error(client.post(f"/jobs/{job_id}/cancel", headers=_h(tokens["runner"])), 403)
    args = ["--server", live_server.base_url, "--token", tokens["admin"]]
    cancel = CliRunner().invoke(main, ["job", "cancel", str(job_id), *args])
    assert cancel.exit_code == 0 and f"job {job_id} (cpu-local): cancelled" in cancel.output, cancel.output
    assert "no longer held" in _error(_call(client, tokens, job, rid, "heartbeat"), 409)  # told to stop
    got = client.get(f"/campaigns/{campaign['id']}", headers=_h(tokens["read"])).json()
    assert got["jobs"][0]["status"] == "cancelled" and got["status"] == "failed"
    again = CliRunner().invoke(main, ["job", "cancel", str(job_id), *args])
    assert again.exit_code == 2 and "cannot take 'cancel'" in again.output and again.output.count("\n") == 1
    requeue = CliRunner().invoke(main, ["job", "requeue", str(job_id), *args])
    assert requeue.exit_code == 0 and "queued" in requeue.output, requeue.output
    fresh = _claim(client, tokens, rid)
    assert fresh["id"] == job_id and fresh["attempt"] == 1
    assert "lease secret" in _error(_call(client, tokens, job, rid, "done"), 403)  # the old lease is dead
    assert _call(client, tokens, fresh, rid, "done").status_code == 200
    history = client.get(f"/campaigns/{campaign['id']}", headers=_h(tokens["read"])).json()["jobs"][0][
        "history"
    ]
    assert [h["outcome"] for h in history] == ["cancelled by test", "requeued by test", "done"]
    _error(client.post("/jobs/2147483647/requeue", headers=_h(tokens["admin"])), 404)


def test_default_runner_names_are_per_host_target_and_device(monkeypatch):
    from accelbench.client.agent import AgentConfig

    monkeypatch.delenv("NEURON_RT_VISIBLE_CORES", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    plain = AgentConfig(server="http://x", target="l4").runner_name
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    first = AgentConfig(server="http://x", target="l4").runner_name
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    second = AgentConfig(server="http://x", target="l4").runner_name
    assert len({plain, first, second}) == 3 and first.endswith("-l4-dev0") and second.endswith("-l4-dev1")
    assert AgentConfig(server="http://x", target="l4", name="mine").runner_name == "mine"
