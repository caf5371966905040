"""The service shows generative models (issue 22): pushed llama-tiny documents give the report page the cost per
million tokens, the frontier plot and the interactivity/TTFT controls, byte-identical to `accelbench report`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from service_fixtures import ACCELBENCH

DATA = Path(__file__).parent / "data" / "llm" / "hand"
HTTP = httpx.Client(timeout=300)
pytestmark = pytest.mark.slow


def _cli(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([ACCELBENCH, *args], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc


def test_report_page_prices_tokens_with_the_generative_controls(live_server, tmp_path):
    _cli("push", str(DATA), "--server", live_server.base_url, "--token", live_server.token)
    auth = {"Authorization": f"Bearer {live_server.token}"}
    params = {
        "model": "llama-tiny",
        "min_tokens_per_user": "100",
        "slo_ttft_p99_ms": "500",
        "slo_tpot_p99_ms": "50",
    }
    page = HTTP.get(live_server.base_url + "/report", params={**params, "slo_p99_ms": "100"}, headers=auth)
    assert page.status_code == 200, page.text
    html = page.text
    assert "cost per million tokens at the objective" in html and 'id="plot-frontier"' in html
    assert 'name="min_tokens_per_user" value="100"' in html and 'name="slo_ttft_p99_ms" value="500"' in html
    assert "At <strong>100 tokens/s per user</strong>" in html
    # empty form fields mean "not set" (the workload's objectives), a bad number is a 422
    empty = HTTP.get(live_server.base_url + "/report", params={"model": "llama-tiny", "slo_ttft_p99_ms": "",
                                                               "min_tokens_per_user": ""}, headers=auth)  # fmt: skip
    assert empty.status_code == 200 and "TTFT p99 ≤ 2000 ms" in empty.text
    bad = HTTP.get(
        live_server.base_url + "/report", params={"model": "llama-tiny", "slo_ttft_p99_ms": "x"}, headers=auth
    )
    assert bad.status_code == 422
    # the stored documents give exactly what the CLI renders from the folder
    out = tmp_path / "rep"
    _cli("report", str(DATA), "--out", str(out), "--min-tokens-per-user", "100", "--slo-ttft-p99-ms", "500",
         "--slo-tpot-p99-ms", "50")  # fmt: skip
    got = HTTP.get(live_server.base_url + "/report.html", params=params, headers=auth)
    assert got.status_code == 200 and got.content == (out / "report.html").read_bytes()
    # the old spellings of the objectives are still taken (deprecated in the API's schema); both at once are not
    old = {"model": "llama-tiny", "min_tokens_per_user": "100", "slo_ttft_ms": "500", "slo_tpot_ms": "50"}
    assert HTTP.get(live_server.base_url + "/report.html", params=old, headers=auth).content == got.content
    both = HTTP.get(
        live_server.base_url + "/report.html", params={**params, "slo_ttft_ms": "400"}, headers=auth
    )
    assert both.status_code == 422 and "slo_ttft_ms" in both.text


def test_history_covers_ttft_tpot_and_tokens_per_s(live_server):
    _cli("push", str(DATA), "--server", live_server.base_url, "--token", live_server.token)
    auth = {"Authorization": f"Bearer {live_server.token}"}
    q = {"model": "llama-tiny", "target": "cpu-local", "precision": "fp32"}
    api = HTTP.get(live_server.base_url + "/api/v1/history", params=q, headers=auth)
    assert api.status_code == 200, api.text
    gen = [r["generative"] for r in api.json()["runs"]]
    assert len(gen) == 4 and {g["output_tokens_per_s"] for g in gen} == {152.0, 236.0, 301.0, 352.0}
    assert all(g["ttft_p99_ms"] and g["tpot_p99_ms"] and g["tokens_per_s_per_user"] for g in gen)
    page = HTTP.get(live_server.base_url + "/history", params=q, headers=auth)
    assert page.status_code == 200 and 'id="generative-runs"' in page.text and "TPOT p99 (ms)" in page.text
