"""What a reviewer reads, in a real browser (headless Chromium through Playwright): the dashboard, results
list, report, result, history, campaign and runners pages over the committed H200 results, a perf_analyzer
import, CPU results and a result whose steps were measured again. Each page: no dict or JSON repr, no number
with more than four significant figures, an axe-core pass with no serious or critical violation, and a
full-page screenshot in the artefacts folder the test prints (ACCELBENCH_ARTEFACTS, or a temporary folder)."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from campaign_helpers import spec_text
from service_fixtures import ACCELBENCH, running_server
from test_service_browser import ARGS, CHROMIUM, import_l4

from accelbench.reports.formatting import significant_figures

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "reports"
H200 = ROOT / "bench" / "results" / "h200" / "2026-11-30" / "results"


def _axe_js() -> Path | None:
    for candidate in (os.environ.get("ACCELBENCH_AXE_JS"), "/tmp/pages-axe/node_modules/axe-core/axe.min.js",
                      "/usr/lib/node_modules/axe-core/axe.min.js", "/usr/local/lib/node_modules/axe-core/axe.min.js",
                      "/usr/share/nodejs/axe-core/axe.min.js"):  # fmt: skip
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


AXE = _axe_js()
# CI installs both (.ci/run) and sets ACCELBENCH_REQUIRE_BROWSER: there a missing one fails, it never skips
REQUIRED = bool(os.environ.get("ACCELBENCH_REQUIRE_BROWSER"))
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None and not REQUIRED, reason="chromium is not installed (apt-get install -y chromium)"
    ),
    pytest.mark.skipif(
        AXE is None and not REQUIRED,
        reason="axe-core is not installed (npm install axe-core; or ACCELBENCH_AXE_JS)",
    ),
]


@pytest.fixture(autouse=True)
def _browser_and_axe_present():
    if CHROMIUM is None or AXE is None:
        pytest.fail("ACCELBENCH_REQUIRE_BROWSER is set but chromium or axe-core is missing (see .ci/run)")


# a number as a token of its own: not part of a word, a hash, a version (2.11.0), a date or a time, a URL
NUMBER = re.compile(r"(?<![\w.:/\-#])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\w.:/\-]|\.\d)")
REPR = re.compile(r"""\{\s*['"][\w ]+['"]\s*:|\[\s*\{|': |": \{""")


def too_precise(text: str) -> list[str]:
    return [m.group(1) for m in NUMBER.finditer(text) if significant_figures(m.group(1)) > 4]


def test_the_number_check_catches_what_it_must_and_spares_what_it_must():
    assert too_precise("throughput 1238.0234171603388 req/s") == ["1238.0234171603388"]
    assert too_precise("12,345 requests") == ["12,345"]
    assert too_precise("58.1 [55.0, 61.2] req/s, 12,350 and 140.4 GiB") == []
    assert too_precise("torch 2.11.0, 2026-11-30 00:21 UTC, http://127.0.0.1:40123, abc12345678") == []
    assert REPR.search("{'architecture': 'x86_64'}") and REPR.search('{"concurrency": 1}')
    assert not REPR.search("concurrency 8; 100 req/s Poisson")


def _retried(doc: dict) -> dict:
    """A CPU result as a sweep with --retries writes it: step 0 measured twice (attempt 1 drifted), the last
    step INVALID on every attempt (still shown with its figures)."""
    doc = copy.deepcopy(doc)
    doc["run_id"] += "__retried"
    first = copy.deepcopy(doc["steps"][0])
    first.update(verdict="INVALID", reasons=["drift: mean latency changed +31% over the step (Mann–Kendall p = "
                                             "0.0004 < 0.01, Sen slope beyond ±5%)"], attempt=1)  # fmt: skip
    doc["steps"][0].update(attempt=2, earlier_attempts=[first])
    last = doc["steps"][-1]
    stuck = copy.deepcopy(last)
    stuck.update(verdict="INVALID", reasons=["no steady state: MSER-5 would cut 900 of 1200 requests (more "
                                             "than half)"], attempt=1)  # fmt: skip
    last.update(verdict="INVALID", reasons=list(stuck["reasons"]), attempt=3,
                earlier_attempts=[stuck, {**copy.deepcopy(stuck), "attempt": 2}])  # fmt: skip
    return doc


@pytest.fixture(scope="module")
def reviewer_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pages")
    with running_server(f"sqlite:///{tmp / 'results.db'}", tmp) as server:
        import_l4(tmp / "pa")
        retried = tmp / "retried"
        retried.mkdir()
        cpu = json.loads(
            (DATA / "cpu-local-measured" / "minilm-l6__cpu-local__fp32__closed-http-b1.json").read_text()
        )
        (retried / "retried.json").write_text(json.dumps(_retried(cpu), indent=2, sort_keys=True))
        subprocess.run([ACCELBENCH, "push", str(DATA / "cpu-local"), str(H200), str(tmp / "pa"), str(retried),
                        "--server", server.base_url, "--token", server.token],
                       check=True, capture_output=True, timeout=300)  # fmt: skip
        auth = {"Authorization": f"Bearer {server.token}"}
        spec = spec_text("reviewer", ["cpu-local"], ["l4"])
        httpx.post(
            server.base_url + "/api/v1/campaigns", json={"spec": spec}, headers=auth, timeout=60
        ).raise_for_status()
        yield server


def _artefacts() -> Path:
    folder = Path(os.environ.get("ACCELBENCH_ARTEFACTS") or tempfile.gettempdir()) / "accelbench-pages"
    folder = folder / time.strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots and axe results: {folder}")
    return folder


def _check_page(page, name: str, folder: Path) -> str:
    for summary in page.locator("details > summary").all():  # what a disclosure hides is checked too
        summary.click()
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    text = page.inner_text("main")
    assert not REPR.search(text), f"{name}: a dict or JSON repr: {REPR.search(text).group(0)!r}"
    assert too_precise(text) == [], f"{name}: numbers with more than 4 significant figures"
    page.add_script_tag(path=str(AXE))
    violations = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' '))}))"
    )
    (folder / f"{name}.axe.json").write_text(json.dumps(violations, indent=2))
    bad = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert bad == [], f"{name}: {bad}"
    return text


def test_every_page_reads_as_text_for_people_and_passes_axe(reviewer_server):
    from playwright.sync_api import sync_playwright

    base, folder = reviewer_server.base_url, _artefacts()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            # bypass_csp: the server's Content-Security-Policy (default-src none) would refuse the injected axe script
            context = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True)
            page = context.new_page()
            page.set_default_timeout(180_000)  # the report renders its plots; the machine is shared
            page.goto(base + "/login")  # the browser session is a server-side one: log in as a reviewer does
            page.fill("input[name=token]", reviewer_server.token)
            page.click("button[type=submit]")

            page.goto(base + "/")
            text = _check_page(page, "dashboard", folder)
            assert "NVIDIA H200" in text  # the host as people read it, not a dict

            page.goto(base + "/results?target=h200-sxm")
            text = _check_page(page, "results-filtered", folder)
            assert page.locator("#results tbody tr").count() == 2 and "2 result(s) match" in text
            page.goto(base + "/results?per_page=2")
            _check_page(page, "results", folder)
            assert page.locator("#results tbody tr").count() == 2
            page.click("a[rel=next]")
            page.wait_for_load_state()  # the URL changes when the navigation commits, before page 2's rows load
            assert "page=2" in page.url and page.locator("#results tbody tr").count() == 2

            page.goto(base + "/report?model=resnet50&slo_p99_ms=20")
            _check_page(page, "report", folder)
            page.click("#ranking a:has-text('result documents')")
            assert "/results?model=resnet50" in page.url and page.locator("#results tbody tr").count() >= 1

            resnet = _stored(base, reviewer_server.token, "resnet50__h200-sxm__bf16__device-check")
            page.goto(base + f"/results/{resnet}")
            text = _check_page(page, "result-h200", folder)
            for expected in ("Intel(R) Xeon(R) Processor, 16 cores", "1 × NVIDIA H200 (140.4 GiB each)",
                             "Ubuntu 24.04.3 LTS", "torch 2.11.0", "concurrency 8", "NOT_RUN"):  # fmt: skip
                assert expected in text, expected
            assert page.locator("details#probe-details table tbody tr").count() > 20  # the full probe

            retried = _stored(
                base, reviewer_server.token, "minilm-l6__cpu-local__fp32__closed-http-b1__retried"
            )
            page.goto(base + f"/results/{retried}")
            text = _check_page(page, "result-retried", folder)
            assert page.locator("#attempts tbody tr").count() == 3
            assert (
                "2 (1 INVALID before)" in text
                and "3 (2 INVALID before)" in text
                and "no steady state" in text
            )
            invalid_row = page.locator("#steps tbody tr.verdict-invalid").last.inner_text()  # stayed INVALID
            assert "[" in invalid_row and "req/s" in invalid_row  # figures and intervals kept

            page.goto(base + "/history?model=resnet50&target=cpu-local&precision=fp32")
            _check_page(page, "history", folder)
            page.goto(base + "/campaigns/1")
            _check_page(page, "campaign", folder)
            page.goto(base + "/campaigns")
            _check_page(page, "campaigns", folder)
            page.goto(base + "/runners")
            _check_page(page, "runners", folder)
        finally:
            browser.close()


def _stored(base: str, token: str, run_id: str) -> str:
    listing = httpx.get(base + "/api/v1/results", params={"limit": 200}, timeout=60,
                        headers={"Authorization": f"Bearer {token}"}).json()  # fmt: skip
    return next(r["id"] for r in listing["results"] if r["run_id"] == run_id)


def test_every_table_downloads_as_csv_with_every_digit(reviewer_server):
    base, auth = reviewer_server.base_url, {"Authorization": f"Bearer {reviewer_server.token}"}
    resnet = _stored(base, reviewer_server.token, "resnet50__h200-sxm__bf16__device-check")
    for url in (f"/results/{resnet}?format=csv&table=steps", f"/results/{resnet}?format=csv&table=probe",
                "/results?format=csv&table=results", "/?format=csv&table=latest",
                "/report?model=resnet50&format=csv&table=ranking", "/report?model=resnet50&format=csv&table=results",
                "/history?model=resnet50&target=cpu-local&precision=fp32&format=csv&table=runs", "/campaigns/1?format=csv"):  # fmt: skip
        got = httpx.get(base + url, headers=auth, timeout=180)
        assert got.status_code == 200 and got.headers["content-type"].startswith("text/csv"), url
        assert len(got.text.splitlines()) >= 2, url
    steps = httpx.get(base + f"/results/{resnet}?format=csv&table=steps", headers=auth, timeout=60).text
    doc = json.loads((H200 / "resnet50__h200-sxm__bf16.json").read_text())
    assert repr(doc["steps"][0]["throughput_rps"]) in steps  # the download keeps what the page rounds
    missing = httpx.get(base + f"/results/{resnet}?format=csv&table=nope", headers=auth, timeout=60)
    assert missing.status_code == 404 and "steps" in missing.json()["error"]
