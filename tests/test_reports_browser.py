"""report.html in a real browser: headless Chromium (Debian's `chromium`) loads it from disk, no console
messages, every plot present in the DOM it built. Skips, saying why, only when chromium is not installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from accelbench.cli import main

DATA = Path(__file__).parent / "data" / "reports"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# CI installs chromium and sets ACCELBENCH_REQUIRE_BROWSER=1: there a missing browser is a failure, not a skip
if CHROMIUM is None and os.environ.get("ACCELBENCH_REQUIRE_BROWSER"):
    raise RuntimeError("ACCELBENCH_REQUIRE_BROWSER is set but chromium is not installed")
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (apt-get install -y chromium; .ci/run installs it)",
    ),
    pytest.mark.slow,  # a real browser: seconds per page
]


def load_in_chromium(page: Path, profile: Path) -> tuple[str, list[str]]:
    """The DOM after load, and every console line Chromium logged (``--enable-logging=stderr``)."""
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         "--enable-logging=stderr", "--v=0", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    return proc.stdout, console


def test_console_detection_works(tmp_path):
    """Guards the real test: a page with an error must produce console lines we see."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom"); notDefined();</script></body></html>')
    _, console = load_in_chromium(bad, tmp_path / "profile")
    assert any("boom" in ln for ln in console) and any("notDefined" in ln for ln in console)


def test_report_html_loads_without_console_errors_and_shows_every_plot(tmp_path):
    result = CliRunner().invoke(
        main,
        ["report", str(DATA / "cpu-local"), "--slo-p99-ms", "100", "--project", "l4,l40s,jetson-agx-orin-64gb,inf2-xlarge",
         "--out", str(tmp_path / "rep")],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    dom, console = load_in_chromium(tmp_path / "rep" / "report.html", tmp_path / "profile")
    assert console == []
    for name in ("latency_vs_throughput", "cost_vs_baseline", "roofline"):
        figure = re.search(rf'<figure id="plot-{name}">(.*?)</figure>', dom, re.DOTALL)
        assert figure, f"plot {name} missing from the DOM"
        assert "<svg" in figure.group(1) and "<path" in figure.group(1), f"plot {name} has no drawing"
    assert "cheapest target" in dom


# ------------------------------------------------------------------ the first screen, the charts, accessibility
DEMO_PROJECT = ("l4", "l40s", "jetson-agx-orin-64gb", "inf2-xlarge")  # the default spec's projected targets
VIEWPORT = {"width": 1280, "height": 800}  # a laptop's first screen


def _axe_js() -> Path | None:
    from test_service_pages import AXE

    return AXE


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    """The demo's report (the recorded default run, projected as the default spec projects), rendered once."""
    from accelbench.hardware.catalog import load_catalog
    from accelbench.reports.inputs import load_documents
    from accelbench.reports.options import ReportOptions
    from accelbench.reports.report import render_report, write_outputs

    docs = load_documents([str(DATA / "cpu-local-measured")])
    rendered = render_report(docs, load_catalog(), ReportOptions(project=DEMO_PROJECT), formats=("html",))
    out = tmp_path_factory.mktemp("demo")
    write_outputs(rendered.outputs, out)
    return out / "report.html", rendered.data


def test_first_screen_shows_the_headline_and_charts_draw_intervals_and_ranges(demo_report, tmp_path):
    """In Chromium at 1280×800: the headline table is on the first screen with, per model, the cheapest target
    and its projected range and the cheapest measured target and its interval; the cost chart's whiskers are as
    many as the rows with an interval or range, projected ones dashed; axe finds nothing serious."""
    from playwright.sync_api import sync_playwright

    from accelbench.reports.headline import cost_text, headline

    page_path, data = demo_report
    head = headline(data)
    assert {line.model for line in head.lines} == {"minilm-l6", "resnet50"}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(page_path.resolve().as_uri())
            page.screenshot(path=str(tmp_path / "first-screen.png"))  # kept for a look when this fails
            table = page.locator("section.headline table")
            box = table.bounding_box()
            assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"], (
                "headline below the fold"
            )
            for line in head.lines:
                row = table.locator("tr", has=page.locator(f"td:text-is('{line.model}')"))
                cells = row.locator("td").all_inner_texts()
                best, measured = line.best, line.best_measured
                assert best is not None and best.status == "projected" and best.low is not None
                assert cells[2].startswith(f"{best.target} {best.precision}") and cells[3] == cost_text(best)
                assert "range $" in cells[3]
                if measured is not None:
                    assert cells[5].startswith(f"{measured.target} {measured.precision} (measured)")
                    assert cells[6] == cost_text(measured) and "[$" in cells[6]
                row_box = row.bounding_box()
                assert row_box and row_box["y"] + row_box["height"] <= VIEWPORT["height"]
            sentences = page.locator("section.headline li").all_inner_texts()
            assert any("measure it before buying" in s for s in sentences)

            cost = page.locator("#plot-cost_vs_baseline svg")
            solid = cost.locator(
                "g.data path[stroke='#111']:not([stroke-dasharray])[stroke-width='1.4']"
            ).count()
            dashed = cost.locator("g.data path[stroke='#111'][stroke-dasharray]").count()
            ranged = [r for r in data.rows if r.cost_per_million_usd]
            n_proj = sum(1 for r in ranged if r.status == "projected" and r.projected_capacity_rps_low)
            n_meas = sum(1 for r in ranged if r.status == "measured" and r.cost_low is not None)
            assert dashed == n_proj > 0 and solid == n_meas > 0
            assert (
                cost.locator("g.data path[stroke='red'][stroke-dasharray]").count() >= 1
            )  # the baseline line
            assert "[owned]" in (cost.text_content() or "")
            latency = page.locator("#plot-latency_vs_throughput svg")
            assert (
                latency.locator("g.data path[stroke-dasharray]").count() >= n_proj
            )  # projected capacity ranges

            axe = _axe_js()
            if axe is None:
                pytest.skip("axe-core is not installed (npm install axe-core; or ACCELBENCH_AXE_JS)")
            for summary in page.locator("details > summary").all():  # what a disclosure hides is checked too
                summary.click()
            page.add_script_tag(path=str(axe))
            violations = page.evaluate(
                "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
                ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.length}))"
            )
            assert [v for v in violations if v["impact"] in ("serious", "critical")] == []
        finally:
            browser.close()
