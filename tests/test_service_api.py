"""The results service's JSON API on a real server, on SQLite and on a real PostgreSQL: ingest is idempotent,
tokens and scopes are enforced, and every bad input gets its status and a one-line JSON error, never a 500."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from service_fixtures import create_token

DATA = Path(__file__).parent / "data" / "reports"
HTTP = httpx.Client(timeout=300)  # a report renders plots: slow on a loaded 2-core machine
RESULTS = sorted((DATA / "cpu-local").glob("*.json"))


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _one_line_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.text.count("\n") <= 1 and response.text.strip(), response.text
    body = response.json()
    assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"]
    return body["error"]


@pytest.fixture(scope="module")
def tokens(live_server) -> dict[str, str]:
    return {
        scope: create_token(live_server.db_url, scope, f"t-{scope}") for scope in ("push", "read", "runner")
    }


def test_health_names_the_database(live_server):
    body = HTTP.get(live_server.base_url + "/api/v1/health").json()
    assert body["status"] == "ok" and body["database"] in live_server.db_url


def test_the_same_document_twice_is_stored_once_201_then_200(live_server, tokens):
    raw = RESULTS[0].read_bytes()
    first = HTTP.post(live_server.base_url + "/api/v1/results", content=raw, headers=_auth(tokens["push"]))
    assert first.status_code in (201, 200)  # 200 if an earlier test in this module already pushed it
    again = HTTP.post(live_server.base_url + "/api/v1/results", content=raw, headers=_auth(tokens["push"]))
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    # reformatted and wrapped in the envelope: the same content hash, still stored once
    wrapped = {"result": json.loads(raw), "source": RESULTS[0].name}
    third = HTTP.post(
        live_server.base_url + "/api/v1/results", json=wrapped, headers=_auth(live_server.token)
    )
    assert third.status_code == 200 and third.json()["id"] == first.json()["id"]
    listing = HTTP.get(live_server.base_url + "/api/v1/results",
                        headers=_auth(tokens["read"])).json()  # fmt: skip
    assert sum(1 for r in listing["results"] if r["id"] == first.json()["id"]) == 1


def test_a_new_document_is_201_and_reads_back_verbatim_with_its_columns(live_server, tokens):
    import sqlalchemy as sa

    doc = json.loads(RESULTS[1].read_text())
    doc["run_id"] += "-new"
    text = json.dumps(doc, indent=3) + "\n"  # an unusual layout: kept byte for byte
    created = HTTP.post(
        live_server.base_url + "/api/v1/results", content=text, headers=_auth(tokens["runner"])
    )
    assert created.status_code == 201, created.text
    one = HTTP.get(live_server.base_url + created.json()["url"], headers=_auth(tokens["read"])).json()
    assert one["document"] == doc and one["provenance"] == doc["provenance"]
    assert (one["model"], one["target"], one["precision"], one["host"]) == (
        doc["model"], doc["target"], doc["precision"], doc["provenance"]["host"]["hostname"])  # fmt: skip
    assert one["accelbench_version"] == doc["provenance"]["packages"]["accelbench"]
    engine = sa.create_engine(live_server.db_url)
    try:
        with engine.connect() as conn:
            stored = conn.execute(sa.text("SELECT d.document FROM result_documents d JOIN results r "
                                          "ON r.id = d.result_id WHERE r.content_hash = :h"),
                                  {"h": one["id"]}).scalar_one()  # fmt: skip
    finally:
        engine.dispose()
    assert stored == text
    filtered = HTTP.get(live_server.base_url + "/api/v1/results", params={"model": doc["model"], "precision":
                         doc["precision"]}, headers=_auth(tokens["read"])).json()  # fmt: skip
    assert filtered["total"] >= 1 and {r["model"] for r in filtered["results"]} == {doc["model"]}


def test_tokens_and_scopes_are_enforced(live_server, tokens):
    url = live_server.base_url + "/api/v1/results"
    raw = RESULTS[0].read_bytes()
    assert "missing API token" in _one_line_error(HTTP.post(url, content=raw), 401)
    assert "invalid" in _one_line_error(HTTP.post(url, content=raw, headers=_auth("abk_nope")), 401)
    assert "may not push" in _one_line_error(HTTP.post(url, content=raw, headers=_auth(tokens["read"])), 403)
    assert "may not read" in _one_line_error(HTTP.get(url, headers=_auth(tokens["push"])), 403)
    _one_line_error(HTTP.get(url), 401)
    _one_line_error(HTTP.get(url, headers={"Authorization": "Basic dXNlcjpwdw=="}), 401)


def test_a_revoked_token_is_refused(live_server):
    import subprocess

    from service_fixtures import ACCELBENCH

    token = create_token(live_server.db_url, "read", "to-revoke")
    url = live_server.base_url + "/api/v1/results"
    assert HTTP.get(url, headers=_auth(token)).status_code == 200
    proc = subprocess.run([ACCELBENCH, "token", "revoke", "--db", live_server.db_url, "--name", "to-revoke"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    _one_line_error(HTTP.get(url, headers=_auth(token)), 401)


def _doc(**changes) -> dict:
    doc = json.loads(RESULTS[0].read_text())
    for key, value in changes.items():
        if value is None:
            doc.pop(key)
        else:
            doc[key] = value
    return doc


def _bad_step() -> dict:
    doc = _doc()
    doc["steps"][1]["latency_us"]["p99"] = "slow"
    return doc


BAD_BODIES = [
    (b"{not json", 400, "not valid JSON"),
    (b"\xff\xfe", 400, "UTF-8"),
    (b"[1, 2]", 422, "JSON object"),
    (json.dumps(_doc(schema="accelbench.result/2")).encode(), 422, "field 'schema'"),
    (json.dumps(_doc(steps=None)).encode(), 422, "field 'steps'"),
    (json.dumps(_bad_step()).encode(), 422, "field 'steps[1].latency_us.p99'"),
    (json.dumps({"result": {"schema": "accelbench.result/1"}}).encode(), 422, "result: field 'run_id'"),
    (json.dumps({"result": _doc(), "extra": 1}).encode(), 422, "field 'extra'"),
    (json.dumps({"result": _doc(), "variant": {"schema": "x"}}).encode(), 422, "variant: field 'schema'"),
    (json.dumps({"result": _doc(), "source": "../../etc/passwd"}).encode(), 422, "field 'source'"),
    # not objects: once taken for file paths by the loader (a 500)
    (json.dumps({"result": 5}).encode(), 422, "result: not an accelbench.result/1 document"),
    (json.dumps({"result": _doc(), "variant": []}).encode(), 422, "variant: not an accelbench.variant/1"),
]


@pytest.mark.parametrize(("body", "status", "names"), BAD_BODIES)
def test_bad_documents_get_their_status_and_name_the_field(live_server, body, status, names):
    response = HTTP.post(
        live_server.base_url + "/api/v1/results", content=body, headers=_auth(live_server.token)
    )
    assert names in _one_line_error(response, status)


def test_a_body_over_the_limit_is_413_declared_or_streamed(live_server):
    url, big = live_server.base_url + "/api/v1/results", b" " * (9 * 1024 * 1024)
    assert "limit" in _one_line_error(HTTP.post(url, content=big, headers=_auth(live_server.token)), 413)

    def chunks():  # no Content-Length: the server must count what arrives
        for _ in range(9):
            yield b" " * (1024 * 1024)

    _one_line_error(HTTP.post(url, content=chunks(), headers=_auth(live_server.token)), 413)


def test_bad_queries_and_unknown_things_are_one_line_errors(live_server):
    get = lambda path, **params: HTTP.get(live_server.base_url + path, params=params,  # noqa: E731
                                           headers=_auth(live_server.token))  # fmt: skip
    HTTP.post(live_server.base_url + "/api/v1/results", content=RESULTS[0].read_bytes(),
               headers=_auth(live_server.token))  # fmt: skip
    assert "no-such-model" in _one_line_error(get("/api/v1/report", model="no-such-model"), 404)
    # FastAPI's request errors are worded by the documents' one formatter (documents.describe_error)
    assert _one_line_error(get("/api/v1/report", slo_p99_ms="-1"), 422).startswith("field 'slo_p99_ms': ")
    assert "slo_p99_ms" in _one_line_error(get("/api/v1/report", slo_p99_ms="nan"), 422)
    _one_line_error(get("/api/v1/report", baseline="no-such-target"), 422)
    assert "price" in _one_line_error(get("/api/v1/report", price="l4"), 422)
    _one_line_error(get("/api/v1/report", percentile="42"), 422)
    _one_line_error(get("/api/v1/results", limit="0"), 422)
    _one_line_error(get("/api/v1/results/" + "0" * 64), 404)
    _one_line_error(get("/api/v1/history", model="minilm-l6", target="cpu-local"), 422)
    _one_line_error(get("/api/v1/history", model="minilm-l6", target="nowhere", precision="fp32"), 404)
    _one_line_error(get("/api/v1/nothing-here"), 404)
    _one_line_error(HTTP.delete(live_server.base_url + "/api/v1/results"), 405)


def test_openapi_describes_the_result_document_it_ingests(live_server):
    """POST /results documents the real body: the result document's JSON Schema (the same one as
    docs/schema/result.schema.json, its definitions as components), or the {result, variant, source} form."""
    import jsonschema_rs

    from accelbench.documents import ResultDocument

    spec = HTTP.get(live_server.base_url + "/openapi.json").json()
    body = spec["paths"]["/api/v1/results"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    refs = [alt.get("$ref") or alt["properties"]["result"]["$ref"] for alt in body["oneOf"]]
    assert refs == ["#/components/schemas/ResultDocument"] * 2
    components = spec["components"]["schemas"]
    mine = ResultDocument.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
    assert {k: v for k, v in mine.items() if k != "$defs"} == components["ResultDocument"]
    # a committed result validates against the served schema, and a broken one does not
    validator = jsonschema_rs.validator_for(
        {**components["ResultDocument"], "components": {"schemas": components}}
    )
    doc = json.loads(RESULTS[0].read_text())
    assert validator.is_valid(doc)
    assert not validator.is_valid({**doc, "steps": [{"index": "first"}]})


def test_nul_characters_are_refused_in_one_line_on_both_databases(live_server):
    """PostgreSQL cannot hold NUL in text or jsonb (psycopg DataError: a 500 before), SQLite can: both refuse
    it the same way. Six characters that merely spell \\u0000 are ordinary text and are stored."""
    auth = {"Authorization": f"Bearer {live_server.token}"}
    for path in ("/api/v1/history?model=a%00b&target=cpu-local&precision=fp32", "/api/v1/results?target=%00",
                 "/api/v1/results/%00"):  # fmt: skip
        answer = HTTP.get(live_server.base_url + path, headers=auth)
        assert answer.status_code == 422 and "NUL character" in answer.json()["error"], (path, answer.text)
    doc = json.loads(RESULTS[0].read_text())
    doc["provenance"]["command"] = "accelbench loadtest \u0000"
    refused = HTTP.post(live_server.base_url + "/api/v1/results", content=json.dumps(doc), headers=auth)
    assert refused.status_code == 422 and "NUL character" in refused.json()["error"], refused.text
    doc["provenance"]["command"] = "accelbench loadtest \\u0000 (spelt out)"
    stored = HTTP.post(live_server.base_url + "/api/v1/results", content=json.dumps(doc), headers=auth)
    assert stored.status_code == 201, stored.text
    shown = HTTP.get(live_server.base_url + stored.json()["url"], headers=auth).json()
    assert shown["document"]["provenance"]["command"] == "accelbench loadtest \\u0000 (spelt out)"


def test_job_routes_refuse_out_of_range_ids_and_nul_in_one_line(live_server):
    """Found by schemathesis once the job bodies were described: a job id beyond the integer column and a
    partial document holding NUL were 500s on PostgreSQL."""
    auth = {"Authorization": f"Bearer {live_server.token}"}
    doc = json.loads(RESULTS[0].read_text())
    body = {"runner_id": 1, "attempt": 1, "document": doc}
    for method, path in (("PUT", "documents"), ("POST", "results")):
        payload = body if method == "PUT" else {"runner_id": 1, "attempt": 1, "result": doc}
        far = HTTP.request(
            method, live_server.base_url + f"/api/v1/jobs/{2**40}/{path}", json=payload, headers=auth
        )
        assert far.status_code == 422 and "job_id" in far.json()["error"], far.text
    doc["provenance"]["command"] = "x\u0000"
    nul = HTTP.put(live_server.base_url + "/api/v1/jobs/1/documents", json=body, headers=auth)
    assert nul.status_code == 422 and "NUL character" in nul.json()["error"], nul.text
