"""The batch push route and the report page built off the request path, on a real server over SQLite and
PostgreSQL: a batch is stored in one transaction, each document once, an invalid item refuses the batch
naming it; after a push the report page answers at once with the previous build marked as being updated,
and the background build brings it up to date."""

from __future__ import annotations

import copy
import json
import time
import uuid
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow
DATA = Path(__file__).parent / "data" / "reports" / "cpu-local"
BASE = json.loads((DATA / "minilm-l6__cpu-local__fp32__closed-http-b1.json").read_text())
HTTP = httpx.Client(timeout=300)


def _doc(model: str) -> dict:
    doc = copy.deepcopy(BASE)
    doc["run_id"], doc["model"] = f"{doc['run_id']}-{uuid.uuid4().hex[:8]}", model
    return doc


def test_a_batch_is_stored_once_per_document_and_a_bad_item_is_named(live_server):
    auth = {"Authorization": f"Bearer {live_server.token}"}
    url = live_server.base_url + "/api/v1/results/batch"
    docs = [_doc("batch-model") for _ in range(3)]
    first = HTTP.post(url, json={"results": [{"result": d, "source": "x.json"} for d in docs]}, headers=auth)
    assert first.status_code == 200 and first.json()["created"] == 3 and first.json()["existing"] == 0
    again = HTTP.post(url, json={"results": [docs[0], {"result": docs[1]}, docs[2], docs[2]]}, headers=auth)
    assert again.json()["created"] == 0 and again.json()["existing"] == 4
    assert again.json()["ids"][:3] == first.json()["ids"]
    bad = [_doc("batch-model"), {**_doc("batch-model"), "batch_size": 0}]
    r = HTTP.post(url, json={"results": bad}, headers=auth)
    assert r.status_code == 422 and r.json()["error"].startswith("results[1]: "), r.text
    listing = HTTP.get(
        live_server.base_url + "/api/v1/results", params={"model": "batch-model"}, headers=auth
    )
    assert listing.json()["total"] == 3  # the refused batch stored nothing
    for body in ({"results": []}, {"results": "x"}, {"other": []}):
        assert HTTP.post(url, json=body, headers=auth).status_code == 422


def test_after_a_push_the_report_page_answers_at_once_and_catches_up(live_server):
    auth = {"Authorization": f"Bearer {live_server.token}"}
    model = f"paged-{uuid.uuid4().hex[:6]}"
    for _ in range(2):
        assert (
            HTTP.post(live_server.base_url + "/api/v1/results", json=_doc(model), headers=auth).status_code
            == 201
        )
    page = HTTP.get(live_server.base_url + "/report", params={"model": model}, headers=auth)
    assert page.status_code == 200  # the first view of a query nobody built yet waits for it
    assert (
        HTTP.post(live_server.base_url + "/api/v1/results", json=_doc(model), headers=auth).status_code == 201
    )
    deadline, fresh = time.monotonic() + 240, None
    while time.monotonic() < deadline:
        page = HTTP.get(live_server.base_url + "/report", params={"model": model}, headers=auth)
        assert page.status_code == 200
        if "Newer results are being added" not in page.text:
            fresh = page
            break
        time.sleep(0.5)
    assert fresh is not None, "the background build never caught up"
    exact = HTTP.get(live_server.base_url + "/api/v1/report", params={"model": model}, headers=auth)
    assert exact.status_code == 200  # the JSON report is always built for exactly what is stored
