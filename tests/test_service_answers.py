"""The service's answers are typed (accelbench/answers.py): /openapi.json describes every JSON answer by its
model and every refusal as ``{"error"}``, the models keep the bytes the routes sent before they were typed,
and the client refuses an answer that does not fit in one line. (schemathesis checks the live answers against
these schemas: tests/test_service_schemathesis.py.)"""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("fastapi")

from accelbench import answers
from accelbench.client.http import read_answer
from accelbench.errors import ServerError

# byte for byte what ``accelbench report --json`` prints (a list the report writer owns), not a service model
RAW_REPORTS = {("get", "/api/v1/report"), ("get", "/api/v1/campaigns/{campaign_id}/report")}


@pytest.fixture(scope="module")
def openapi(tmp_path_factory):
    from accelbench.service.app import create_app
    from accelbench.service.state import Settings

    app = create_app(Settings(db_url=f"sqlite:///{tmp_path_factory.mktemp('answers')}/results.db"))
    try:
        yield app.openapi()
    finally:
        app.state.service.reports.close()
        app.state.service.engine.dispose()


def _schema(response: dict) -> dict:
    return (response.get("content") or {}).get("application/json", {}).get("schema") or {}


def test_every_json_answer_is_described_by_its_model(openapi):
    untyped, errors = [], []
    operations = [
        (m, p, op) for p, ops in openapi["paths"].items() if p.startswith("/api/") for m, op in ops.items()
    ]
    assert len(operations) >= 26
    for method, path, op in operations:
        for status, response in op["responses"].items():
            ref = _schema(response).get("$ref", "")
            if status.startswith("2") and status != "204" and (method, path) not in RAW_REPORTS:
                if not ref.startswith("#/components/schemas/"):
                    untyped.append(f"{method.upper()} {path} {status}")
            elif status.startswith("4") and ref != "#/components/schemas/Error":
                errors.append(f"{method.upper()} {path} {status}: {ref or 'no schema'}")
    assert not untyped, "answers without a model:\n" + "\n".join(untyped)
    assert not errors, "refusals not described as {error}:\n" + "\n".join(errors)
    assert set(openapi["components"]["schemas"]["Error"]["properties"]) == {"error"}
    for method, path in RAW_REPORTS:  # described as what they are: the report's rows
        assert _schema(openapi["paths"][path][method]["responses"]["200"])["type"] == "array", path


def test_the_history_change_carries_every_field_of_the_compare_judgement():
    from accelbench.reports.compare import Judgement

    own = ["capacity_change", "latency_change"]
    assert list(answers.Change.model_fields) == own + [f.name for f in dataclasses.fields(Judgement)]


def test_numbers_keep_their_json_form():
    """An integer stays an integer (a plain float field would send 30.0 where the route sent 30)."""
    job = answers.Heartbeat(lease_until=None, time_limit_s=30)
    assert job.model_dump_json() == '{"lease_until":null,"time_limit_s":30}'
    assert (
        answers.Heartbeat(lease_until=None, time_limit_s=2.5)
        .model_dump_json()
        .endswith('"time_limit_s":2.5}')
    )


def test_an_answer_that_does_not_fit_is_one_server_error_line():
    with pytest.raises(ServerError) as caught:
        read_answer(answers.BatchStored, {"created": 1, "ids": []}, "http://127.0.0.1:1/api/v1/results/batch")
    message = str(caught.value)
    assert "\n" not in message and "BatchStored" in message and "existing" in message
    assert read_answer(
        answers.BatchStored, {"created": 1, "existing": 0, "ids": ["a"], "new": 1}, "x"
    ).ids == ["a"]
