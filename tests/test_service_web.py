"""The pages without a browser: who gets in (token cookie, --public-read), what the result page shows, and
that a browser gets the login form, not a JSON line, when it has no token."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from service_fixtures import running_server

pytestmark = pytest.mark.slow  # every test here talks to a real accelbench server
DATA = Path(__file__).parent / "data" / "reports"
HTTP = httpx.Client(timeout=300)
HTML = {"Accept": "text/html"}


def test_a_browser_without_a_token_gets_the_login_form_and_a_bad_token_is_refused(live_server):
    page = HTTP.get(live_server.base_url + "/", headers=HTML)
    assert page.status_code == 303 and page.headers["location"] == "/login"
    assert HTTP.get(live_server.base_url + "/").status_code == 401  # an API client keeps the JSON line
    login = httpx.Client(timeout=300)  # its own cookie jar: the cookie is for 127.0.0.1, any port
    refused = login.post(live_server.base_url + "/login", data={"token": "abk_wrong"})
    assert refused.status_code == 401 and "unknown, revoked" in refused.text
    ok = login.post(live_server.base_url + "/login", data={"token": live_server.token})
    assert ok.status_code == 303 and "accelbench_session=abs_" in ok.headers["set-cookie"]
    assert "HttpOnly" in ok.headers["set-cookie"] and live_server.token not in ok.headers["set-cookie"]
    assert login.get(live_server.base_url + "/", headers=HTML).status_code == 200  # the cookie lets it in
    login.close()


def test_the_result_page_shows_steps_verdicts_and_provenance(live_server):
    raw = (DATA / "cpu-local" / "resnet50__cpu-local__fp32__closed-http-b1.json").read_bytes()
    auth = {"Authorization": f"Bearer {live_server.token}"}
    stored = HTTP.post(live_server.base_url + "/api/v1/results", content=raw, headers=auth).json()
    page = HTTP.get(live_server.base_url + f"/results/{stored['id']}", headers=auth)
    doc = json.loads(raw)
    assert page.status_code == 200
    for text in (doc["run_id"], doc["provenance"]["host"]["hostname"], doc["provenance"]["command"], "VALID",
                 stored["id"], "history of resnet50 on cpu-local at fp32"):  # fmt: skip
        assert text in page.text, text
    assert page.text.count('<tr class="verdict-') >= len(doc["steps"])
    dashboard = HTTP.get(live_server.base_url + "/", headers=auth)
    assert dashboard.status_code == 200 and f"/results/{stored['id']}" in dashboard.text
    assert "/report?model=resnet50" in dashboard.text
    missing = HTTP.get(live_server.base_url + "/results/" + "f" * 64, headers={**auth, **HTML})
    assert missing.status_code == 404 and "no result with id" in missing.text


def test_a_result_without_target_is_shown_but_not_priced_and_hides_nothing(live_server):
    """What `loadtest --url` records for a model accelbench did not build, without --target: stored and
    shown; its model's row on the dashboard says why it has no cost; other models keep theirs."""
    auth = {"Authorization": f"Bearer {live_server.token}"}
    for name in (
        "resnet50__cpu-local__fp32__closed-http-b1.json",
        "resnet50__cpu-local__int8__closed-http-b1.json",
    ):
        HTTP.post(live_server.base_url + "/api/v1/results", content=(DATA / "cpu-local" / name).read_bytes(),
                  headers=auth)  # fmt: skip
    doc = json.loads((DATA / "cpu-local" / "resnet50__cpu-local__fp32__closed-http-b1.json").read_text())
    doc.update(model="their-model", variant="their-model", run_id="their-model__closed-http-b1", target=None,
               precision=None)  # fmt: skip
    stored = HTTP.post(live_server.base_url + "/api/v1/results", json=doc, headers=auth)
    assert stored.status_code == 201, stored.text
    assert HTTP.get(live_server.base_url + f"/results/{stored.json()['id']}", headers=auth).status_code == 200
    dashboard = HTTP.get(live_server.base_url + "/", headers=auth)
    assert dashboard.status_code == 200
    assert "not priced: no result document names the target and precision" in dashboard.text
    assert "None" not in dashboard.text
    report = HTTP.get(live_server.base_url + "/api/v1/report", params={"model": "resnet50"}, headers=auth)
    assert report.status_code == 200 and any(r["target"] == "cpu-local" for r in report.json())
    refused = HTTP.get(live_server.base_url + "/api/v1/report", params={"model": "their-model"}, headers=auth)
    assert refused.status_code == 422 and "--target ID" in refused.json()["error"]


def test_public_read_opens_reading_but_not_pushing(tmp_path):
    with running_server(f"sqlite:///{tmp_path / 'r.db'}", tmp_path, "--public-read") as server:
        raw = (DATA / "cpu-local" / "resnet50__cpu-local__fp32__closed-http-b1.json").read_bytes()
        assert HTTP.post(server.base_url + "/api/v1/results", content=raw).status_code == 401
        auth = {"Authorization": f"Bearer {server.token}"}
        assert HTTP.post(server.base_url + "/api/v1/results", content=raw, headers=auth).status_code == 201
        listing = HTTP.get(server.base_url + "/api/v1/results")
        assert listing.status_code == 200 and listing.json()["total"] == 1, listing.text
        assert HTTP.get(server.base_url + "/", headers=HTML).status_code == 200
        assert HTTP.get(server.base_url + "/api/v1/report").status_code == 200
        bad = HTTP.get(server.base_url + "/api/v1/results", headers={"Authorization": "Bearer abk_nope"})
        assert bad.status_code == 401  # a wrong token is still wrong, public or not
