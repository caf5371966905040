"""The service's pages in a real browser (headless Chromium driven by Playwright, JavaScript OFF: the pages
must work without it): log in, open the dashboard, follow the link to a model's report, change the SLO in the
form, and see the ranking change. Skips, saying why, only when chromium is not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from service_fixtures import ACCELBENCH, running_server

DATA = Path(__file__).parent / "data" / "reports"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]  # fmt: skip

if CHROMIUM is None and os.environ.get("ACCELBENCH_REQUIRE_BROWSER"):
    raise RuntimeError("ACCELBENCH_REQUIRE_BROWSER is set but chromium is not installed")
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (apt-get install -y chromium; .ci/run installs it)",
    ),
    pytest.mark.slow,  # a real accelbench server and a real browser
]


def import_l4(out: Path) -> None:
    """The hand-written perf_analyzer L4 file imported as minilm-l6 int8 (a second host's result)."""
    subprocess.run([ACCELBENCH, "import", "perf-analyzer", str(DATA / "perf_analyzer_verbose_l4_handwritten.csv"),
                    "--target", "l4", "--model", "minilm-l6", "--precision", "int8", "--out", str(out)],
                   check=True, capture_output=True, timeout=120)  # fmt: skip


@pytest.fixture(scope="module")
def server_with_two_hosts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    with running_server(f"sqlite:///{tmp / 'results.db'}", tmp) as server:
        import_l4(tmp / "host-b")
        subprocess.run([ACCELBENCH, "push", str(DATA / "cpu-local"), str(tmp / "host-b"), "--server", server.base_url,
                        "--token", server.token], check=True, capture_output=True, timeout=300)  # fmt: skip
        yield server


def _ranking(page) -> dict[str, str]:
    """'target precision' → rank cell, as the browser shows the ranking table."""
    rows = page.locator("#ranking tbody tr")
    out = {}
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td").all_inner_texts()
        out[f"{cells[1]} {cells[2]}"] = cells[0]
    return out


def test_dashboard_to_report_then_a_tighter_slo_changes_the_ranking(server_with_two_hosts):
    from playwright.sync_api import sync_playwright

    base = server_with_two_hosts.base_url
    console: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_context(java_script_enabled=False).new_page()
            page.set_default_timeout(120_000)  # a report renders its plots; the machine is shared
            page.on("console", lambda msg: console.append(msg.text))
            page.goto(base + "/")
            assert page.url == base + "/login"  # no token yet: the login form, not an error
            page.fill("input[name=token]", server_with_two_hosts.token)
            page.click("button[type=submit]")
            assert page.url.rstrip("/") == base and page.locator("#models").count() == 1
            page.click("a.report-link:has-text('minilm-l6')")
            assert "/report?model=minilm-l6" in page.url
            before = _ranking(page)
            assert before["cpu-local int8"] != "—" and before["l4 int8"] != "—"  # both hosts ranked at 100 ms
            assert (
                page.locator("figure#plot-latency_vs_throughput svg").count() == 1
            )  # the report's own plots
            page.fill("input[name=slo_p99_ms]", "20")
            page.click("button[type=submit]")
            assert "slo_p99_ms=20" in page.url
            after = _ranking(page)
            assert after != before
            assert after["cpu-local int8"] == "—" and after["l4 int8"] != "—"  # the CPU no longer meets 20 ms
            assert page.locator("input[name=slo_p99_ms]").input_value() == "20"
        finally:
            browser.close()
    assert console == [], console
