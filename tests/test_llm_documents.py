"""A generative result document (recorded from `accelbench loadtest --api openai` against the reference
server) loads with its token metrics, the report renders over it without crashing, and the results
server ingests it and shows its token metrics on the result page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from accelbench.documents import load_result

DOC = Path(__file__).parent / "data" / "llm" / "reference__closed-openai-chat-i32-o16.json"


def test_the_generative_document_loads_with_its_token_metrics():
    doc = load_result(DOC)
    assert doc.task == "text-generation" and doc.load_profile.workload.api == "openai-chat"
    for step in doc.steps:
        g = step.generative
        assert g.ttft_us.p50 and g.itl_us.p50 is not None and g.tpot_us.p50 and g.e2e_us.p50
        assert g.output_tokens.mean == g.output_tokens.asked == 16
        assert g.output_tokens_per_s.low <= g.output_tokens_per_s.value <= g.output_tokens_per_s.high
        assert set(g.intervals) == {"ttft_us", "itl_us", "tpot_us", "e2e_us"}
        assert g.goodput.ttft_ms == 100 and g.client_cpu_us_per_token > 0
        # the classic fields keep their meaning: e2e percentiles, completed requests/s
        assert step.latency_us.p50 == pytest.approx(g.e2e_us.p50, rel=0.05)


@pytest.mark.slow
def test_the_report_renders_over_generative_documents(tmp_path):
    done = subprocess.run([sys.executable, "-m", "accelbench.cli", "report", str(DOC.parent), "--out",
                           str(tmp_path / "report")], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report" / "report.html").is_file()


@pytest.mark.slow
def test_the_server_ingests_it_and_shows_token_metrics(live_server):
    auth = {"Authorization": f"Bearer {live_server.token}"}
    http = httpx.Client(timeout=300)
    stored = http.post(live_server.base_url + "/api/v1/results", content=DOC.read_bytes(), headers=auth)
    assert stored.status_code in (200, 201), stored.text
    page = http.get(live_server.base_url + f"/results/{stored.json()['id']}", headers=auth)
    assert page.status_code == 200
    doc = json.loads(DOC.read_text())
    assert "Token metrics" in page.text and "openai-chat: ISL 32" in page.text
    g = doc["steps"][1]["generative"]
    from accelbench.reports.formatting import latency_ms, with_interval

    assert f"{latency_ms(g['ttft_us']['p50'])} / {latency_ms(g['ttft_us']['p99'])}" in page.text
    t = g["output_tokens_per_s"]
    assert with_interval(t["value"], t.get("low"), t.get("high")) in page.text
