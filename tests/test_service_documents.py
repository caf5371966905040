"""Documents that cannot break a page, on a real server over SQLite and PostgreSQL: numbers outside the float
range, NaN/Infinity, negative durations, batch 0 and strings longer than their column are refused at parse time
(the same on both databases); a model name with mathtext in it and a number at the edge of the float range
are stored and every page still answers 200; an admin hides a result and it is gone from every page and
report until unhidden (recorded who, when, why)."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from service_fixtures import create_token

from accelbench.cli import main
from accelbench.service.validate import MEASURE_MAX

pytestmark = pytest.mark.slow
DATA = Path(__file__).parent / "data" / "reports" / "cpu-local"
BASE = json.loads((DATA / "minilm-l6__cpu-local__fp32__closed-http-b1.json").read_text())
HTTP = httpx.Client(timeout=300)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _doc(model: str | None = None) -> dict:
    doc = copy.deepcopy(BASE)
    doc["run_id"] = f"{doc['run_id']}-{uuid.uuid4().hex[:8]}"
    if model:
        doc["model"] = model
    return doc


def _raw(doc: dict) -> str:
    return json.dumps(doc)


def _push(server, body: str | bytes) -> httpx.Response:
    return HTTP.post(server.base_url + "/api/v1/results", content=body, headers=_auth(server.token))


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error"} and response.text.count("\n") <= 1
    return response.json()["error"]


def _with(path: str, value_text: str) -> str:
    """A document whose field at ``path`` (dotted, with list indices) is the raw JSON ``value_text``."""
    doc = _doc()
    *parents, leaf = path.split(".")
    node = doc
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    marker = f"__MARK_{uuid.uuid4().hex}__"
    node[int(leaf) if leaf.isdigit() else leaf] = marker
    return _raw(doc).replace(f'"{marker}"', value_text)


@pytest.mark.parametrize(
    "path,value,status,message",
    [("steps.0.latency_us.p99", "9" * 5000, 400, "digit"),  # Python's int digit limit: ValueError → 400
     ("steps.0.latency_us.p99", "9" * 4001, 422, "within ±1e+18"),  # parses; no measurement is that big
     ("steps.0.latency_us.p99", "1e999", 422, "finite"),  # json makes it inf
     ("steps.0.latency_us.p99", "NaN", 400, "NaN"),
     ("steps.0.throughput_rps", "Infinity", 400, "Infinity"),
     ("steps.0.throughput_rps", "-Infinity", 400, "Infinity"),
     ("steps.0.duration_s", "-5", 422, "negative"),
     ("steps.0.requests", "-1", 422, "greater than or equal to 0"),
     ("load_profile.duration_s", "-1.5", 422, "negative"),
     ("batch_size", "0", 422, "batch_size"),
     ("precision", json.dumps("f" * 21), 422, "precision"),
     ("origin", json.dumps("o" * 61), 422, "origin"),
     ("model", json.dumps("m" * 201), 422, "model"),
     ("target", json.dumps("t" * 101), 422, "target"),
     ("run_id", json.dumps("r" * 301), 422, "run_id")],
)  # fmt: skip
def test_numbers_and_strings_a_page_cannot_take_are_refused(live_server, path, value, status, message):
    body = _with(path, value)
    assert message in _error(_push(live_server, body), status)
    wrapped = json.dumps({"result": "__DOC__"}).replace('"__DOC__"', body)  # the envelope: the same rule
    assert message in _error(_push(live_server, wrapped), status)


def test_deep_json_is_400_not_a_crash(live_server):
    deep = "[" * 100_000 + "]" * 100_000
    assert "nests" in _error(_push(live_server, deep), 400)
    assert "nests" in _error(_push(live_server, '{"a":' * 200 + "1" + "}" * 200), 400)
    assert HTTP.get(live_server.base_url + "/api/v1/health").status_code == 200


def test_an_absurd_but_valid_number_and_a_mathtext_name_leave_every_page_answering(live_server):
    huge = _doc("absurd-model")
    for step in huge["steps"]:  # at the bound a number may reach (issue 40: 1.7e308 is now refused)
        step["latency_us"] = {k: MEASURE_MAX for k in step["latency_us"]}
        step["throughput_rps"] = MEASURE_MAX
    assert _push(live_server, _raw(huge)).status_code == 201
    mathtext = "m$\\frac{x$-^_{"
    assert _push(live_server, _raw(_doc(mathtext))).status_code == 201
    auth = _auth(live_server.token)
    dash = HTTP.get(live_server.base_url + "/", headers=auth)
    assert dash.status_code == 200 and "absurd-model" in dash.text
    for model in ("absurd-model", mathtext):
        for path in ("/report", "/report.html", "/api/v1/report"):
            r = HTTP.get(live_server.base_url + path, params={"model": model}, headers=auth)
            assert r.status_code in (200, 422), (path, model, r.text[:300])
            if r.status_code == 422:
                assert r.text.count("\n") <= 1
        hist = HTTP.get(live_server.base_url + "/history", headers=auth,
                        params={"model": model, "target": "cpu-local", "precision": "fp32"})  # fmt: skip
        assert hist.status_code == 200, hist.text[:300]
    page = HTTP.get(live_server.base_url + "/report", params={"model": mathtext}, headers=auth)
    assert page.status_code == 200 and "<svg" in page.text  # the plots drew the name as text
    absurd = HTTP.get(
        live_server.base_url + "/api/v1/results", params={"model": "absurd-model"}, headers=auth
    )
    hide = HTTP.post(live_server.base_url + f"/api/v1/results/{absurd.json()['results'][0]['id']}/hide",
                     json={"reason": "absurd latency"}, headers=auth)  # fmt: skip
    assert hide.status_code == 200 and hide.json()["hidden"]
    dash = HTTP.get(live_server.base_url + "/", headers=auth)
    assert dash.status_code == 200 and "absurd-model" not in dash.text
    gone = HTTP.get(live_server.base_url + "/report", params={"model": "absurd-model"}, headers=auth)
    assert gone.status_code == 404


def test_an_admin_hides_a_result_from_every_page_and_report_and_unhides_it(live_server, tmp_path):
    model = f"hide-me-{uuid.uuid4().hex[:6]}"  # one result: hidden, the model has nothing to show
    rid = _push(live_server, _raw(_doc(model))).json()["id"]
    ids = [None, rid]
    auth = _auth(live_server.token)
    reader = create_token(live_server.db_url, "read", "hide-reader")
    url = live_server.base_url

    def visible() -> dict[str, bool]:
        listing = HTTP.get(url + "/api/v1/results", params={"model": model}, headers=auth).json()
        hist = HTTP.get(url + "/api/v1/history", headers=auth,
                        params={"model": model, "target": "cpu-local", "precision": "fp32"})  # fmt: skip
        return {
            "listing": rid in [r["id"] for r in listing["results"]],
            "report": HTTP.get(url + "/api/v1/report", params={"model": model}, headers=auth).status_code
            == 200,
            "page": HTTP.get(url + "/report", params={"model": model}, headers=auth).status_code == 200,
            "file": HTTP.get(url + "/report.html", params={"model": model}, headers=auth).status_code == 200,
            "all": model in HTTP.get(url + "/api/v1/report", headers=auth).text,
            "dashboard": model in HTTP.get(url + "/", headers=auth).text,
            "result": HTTP.get(url + f"/api/v1/results/{rid}", headers=auth).status_code == 200,
            "result page": HTTP.get(url + f"/results/{rid}", headers=auth).status_code == 200,
            "history": hist.status_code == 200 and rid in [r["id"] for r in hist.json()["runs"]],
        }

    assert all(visible().values()), visible()
    refused = HTTP.post(url + f"/api/v1/results/{ids[1]}/hide", json={"reason": "x"}, headers=_auth(reader))
    _error(refused, 403)
    _error(HTTP.post(url + f"/api/v1/results/{ids[1]}/hide", json={"reason": " "}, headers=auth), 422)
    hide = ["result", "hide", ids[1], "--reason", "host was thermal throttling", "--server", url,
            "--token", live_server.token]  # fmt: skip
    result = CliRunner().invoke(main, hide)
    assert result.exit_code == 0 and "hidden" in result.output, result.output
    assert not any(visible().values()), visible()
    assert HTTP.get(url + "/", headers=auth).status_code == 200
    unhide = CliRunner().invoke(
        main, ["result", "unhide", ids[1], "--server", url, "--token", live_server.token]
    )
    assert unhide.exit_code == 0 and "shown" in unhide.output, unhide.output
    assert all(visible().values()), visible()
    log = HTTP.post(url + f"/api/v1/results/{ids[1]}/hide", json={"reason": "again"}, headers=auth).json()
    assert [e["action"] for e in log["log"]] == ["hide", "unhide", "hide"]
    assert log["log"][0]["reason"] == "host was thermal throttling" and log["log"][0]["by"] == "test"
    missing = CliRunner().invoke(main, ["result", "hide", "0" * 64, "--reason", "r", "--server", url,
                                        "--token", live_server.token])  # fmt: skip
    assert missing.exit_code != 0 and missing.output.count("\n") == 1, missing.output
