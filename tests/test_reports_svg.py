"""The report's SVG plots, written without a plotting library: no matplotlib imported for a report, names with
markup drawn as written, every plot an accessible image that parses as XML, and nice ticks on every axis
(tables of cases and hypothesis properties)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.hardware.catalog import load_catalog
from accelbench.reports.build import ReportOptions
from accelbench.reports.inputs import load_documents
from accelbench.reports.plots import trend_chart
from accelbench.reports.report import render_report
from accelbench.reports.scales import MAX_TICKS, domain, linear_ticks, log_ticks

ROOT = Path(__file__).resolve().parents[1]
CPU_LOCAL = ROOT / "tests" / "data" / "reports" / "cpu-local"
MEASURED = ROOT / "tests" / "data" / "reports" / "cpu-local-measured"
TINY = ROOT / "tests" / "data" / "llm" / "tiny"
NS = "{http://www.w3.org/2000/svg}"
NAME = "m$\\frac{x$-^_{ <b>&amp; \"q\" 'a'"  # mathtext, a tag, an entity and both quotes


def _texts(svg: ET.Element) -> list[str]:
    return [t.text or "" for t in svg.iter(f"{NS}text")]


def _plots(rendered) -> dict[str, ET.Element]:
    return {name: ET.fromstring(data) for name, data in rendered.outputs.items() if name.endswith(".svg")}


# ------------------------------------------------------------------------------------------------ the plots
def test_a_report_is_drawn_without_matplotlib():
    """Building and rendering a report (HTML and Markdown, classic and generative rows) imports no plotting
    library: the plots are written directly."""
    code = (
        "import json, sys\n"
        "from accelbench.hardware.catalog import load_catalog\n"
        "from accelbench.reports.build import ReportOptions\n"
        "from accelbench.reports.inputs import load_documents\n"
        "from accelbench.reports.report import render_report\n"
        f"docs = load_documents([{str(MEASURED)!r}, {str(TINY)!r}])\n"
        "r = render_report(docs, load_catalog(), ReportOptions(project=('l4',)), formats=('md', 'html'))\n"
        "print(json.dumps({'plots': sorted(n for n in r.outputs if n.startswith('plots/')),\n"
        "                  'loaded': sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib')}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["plots"] == ["plots/cost_vs_baseline.svg", "plots/frontier.svg", "plots/latency_vs_throughput.svg",
                            "plots/roofline.svg"]  # fmt: skip
    assert out["loaded"] == []


@pytest.fixture(scope="module")
def marked_up(tmp_path_factory):
    """The fixture results with the MiniLM model renamed to NAME, rendered as the CLI would."""
    folder = tmp_path_factory.mktemp("names")
    for path in CPU_LOCAL.glob("*.json"):
        doc = json.loads(path.read_text())
        if doc["model"] == "minilm-l6":
            doc["model"] = NAME
        (folder / path.name).write_text(json.dumps(doc))
    options = ReportOptions(slo_ms=100.0, project=("l4", "inf2-xlarge"))
    return render_report(load_documents([str(folder)]), load_catalog(), options)


def test_names_with_markup_are_drawn_as_written(marked_up):
    plots = _plots(marked_up)
    assert sorted(plots) == [
        "plots/cost_vs_baseline.svg",
        "plots/latency_vs_throughput.svg",
        "plots/roofline.svg",
    ]
    for name in ("plots/latency_vs_throughput.svg", "plots/cost_vs_baseline.svg"):
        assert any(t.startswith(NAME + ": ") for t in _texts(plots[name])), name
        assert NAME in plots[name].attrib["aria-label"]
    assert NAME in _texts(plots["plots/roofline.svg"])  # the roofline's legend names each model
    html = marked_up.outputs["report.html"].decode()
    for data in (marked_up.outputs[n] for n in plots):
        assert data.decode() in html  # the same bytes inline


def test_every_plot_is_an_accessible_image(marked_up):
    for name, svg in _plots(marked_up).items():
        assert svg.tag == f"{NS}svg" and svg.attrib["role"] == "img", name
        title = svg[0]
        assert (
            title.tag == f"{NS}title" and title.text == svg.attrib["aria-label"] and len(title.text) > 40
        ), name
        assert f"{NS}path" in {e.tag for e in svg.iter()}, name


def test_projected_markers_are_hollow_and_measured_ones_filled(marked_up):
    """The latency plot: one hollow marker per projected row with a capacity, the measured ones filled in their
    colour (markers are the closed outlines among the drawn data)."""
    svg = _plots(marked_up)["plots/latency_vs_throughput.svg"]
    data = [g for g in svg.iter(f"{NS}g") if g.attrib.get("class") == "data"]
    marks = [p for g in data for p in g.iter(f"{NS}path") if p.attrib["d"].endswith("Z")]
    hollow = [p for p in marks if p.attrib["fill"] == "none"]
    filled = [p for p in marks if p.attrib["fill"] != "none"]
    projected = [
        r for r in marked_up.data.rows if r.status == "projected" and r.capacity_rps and r.latency_us
    ]
    assert len(data) == 2 and len(hollow) == len(projected) > 0
    measured_steps = sum(1 for g in marked_up.data.groups.values() for _ in g.steps())
    assert 0 < len(filled) <= measured_steps
    assert all(p.attrib["fill"] == p.attrib["stroke"] for p in filled)


def test_a_trend_title_with_markup_and_hundreds_of_runs():
    title = "a<b>&c $x$ on cpu-local at int8: p99 ≤ 100 ms"
    runs = [{"label": f"run {i}", "capacity_rps": 100.0 + i % 7, "latency_us": 50_000.0 + 100 * (i % 5),
             "flagged": i == 599} for i in range(600)]  # fmt: skip
    svg = ET.fromstring(trend_chart(title, runs, "p99"))
    texts = _texts(svg)
    assert texts.count(title) == 1 and title in svg.attrib["aria-label"]
    assert "moved more than the run-to-run spread" in texts
    labels = [t for t in texts if t.startswith("run ")]
    assert labels[:2] == ["run 0", "run 38"] and len(labels) == 2 * math.ceil(
        600 / 38
    )  # both panels, thinned
    assert trend_chart(title, runs, "p99") == trend_chart(title, [dict(r) for r in runs], "p99")


def test_absurd_but_finite_numbers_still_draw():
    """Numbers at the edge of the float range (valid in a document) give a plot, not an OverflowError."""
    runs = [{"label": "a", "capacity_rps": 1.7e308, "latency_us": 5e-324, "flagged": True},
            {"label": "b", "capacity_rps": 10.0, "latency_us": 1e3, "flagged": False}]  # fmt: skip
    svg = trend_chart("absurd", runs, "p99")
    assert "nan" not in svg and "inf" not in svg
    for values in ([1e-300, 1.7e308], [1.7e308], [5e-324]):
        for log in (True, False):
            scale = domain(values, log)
            assert math.isfinite(scale.lo) and math.isfinite(scale.hi) and len(scale.ticks()) >= 2


# ------------------------------------------------------------------------------------------------ the ticks
@pytest.mark.parametrize(
    ("lo", "hi", "labels"),
    [
        (0.9, 90, ["1", "2", "5", "10", "20", "50"]),
        (45, 5000, ["50", "100", "200", "500", "1000", "2000", "5000"]),
        (0.07, 12000, ["0.1", "1", "10", "100", "1000", "10000"]),
        (1e9, 2e15, ["10⁹", "10¹⁰", "10¹¹", "10¹²", "10¹³", "10¹⁴", "10¹⁵"]),
        (2e5, 3e6, ["2×10⁵", "5×10⁵", "10⁶", "2×10⁶"]),
        (1, 1e30, ["10⁰", "10⁵", "10¹⁰", "10¹⁵", "10²⁰", "10²⁵", "10³⁰"]),
        (30, 45, ["30", "35", "40", "45"]),  # less than a factor 2.5: linear
    ],
)
def test_log_ticks(lo, hi, labels):
    assert [t.label for t in log_ticks(lo, hi)[0]] == labels


@pytest.mark.parametrize(
    ("lo", "hi", "labels"),
    [
        (0, 1, ["0", "0.2", "0.4", "0.6", "0.8", "1.0"]),
        (-0.3, 17.2, ["0", "5", "10", "15"]),
        (95, 105, ["96", "98", "100", "102", "104"]),
        (0, 2.5e6, ["0", "500,000", "1,000,000", "1,500,000", "2,000,000", "2,500,000"]),
        (3e9, 3.5e9, ["3.0×10⁹", "3.1×10⁹", "3.2×10⁹", "3.3×10⁹", "3.4×10⁹", "3.5×10⁹"]),
        (-5, -1, ["-5", "-4", "-3", "-2", "-1"]),
    ],
)
def test_linear_ticks(lo, hi, labels):
    assert [t.label for t in linear_ticks(lo, hi)] == labels


def _check_ticks(ticks, lo, hi, most, slack):
    """Two to ``most`` ticks, ascending, inside [lo, hi] give or take ``slack`` (rounding), labels distinct."""
    values = [t.value for t in ticks]
    assert 2 <= len(ticks) <= most
    assert values == sorted(values) and all(lo - slack <= v <= hi + slack for v in values)
    assert len({t.label for t in ticks}) == len(ticks)


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e12, 1e12), st.floats(1e-6, 1e6))
def test_linear_ticks_are_few_distinct_and_inside(lo, relative_span):
    hi = lo + relative_span * max(1.0, abs(lo))
    _check_ticks(linear_ticks(lo, hi), lo, hi, MAX_TICKS - 1, 1e-9 * (hi - lo))


@settings(max_examples=300, deadline=None)
@given(st.floats(-12, 12), st.floats(0.01, 30))
def test_log_ticks_are_few_distinct_and_inside(log_lo, decades):
    lo, hi = 10**log_lo, 10 ** (log_lo + decades)
    _check_ticks(log_ticks(lo, hi)[0], lo, hi, MAX_TICKS, 1e-9 * hi)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1e-9, 1e12), min_size=1, max_size=20), st.booleans())
def test_the_domain_shows_every_value(values, log):
    scale = domain(values, log)
    assert all(0.0 < scale.frac(v) < 1.0 for v in values)


def test_whiskers_and_bands_a_range_never_looks_like_a_measured_interval():
    """A bar's measured interval is a solid whisker with closed caps; a projected range is dashed with open
    brackets; a band is a filled outline between its two curves; the axis reaches every whisker end."""
    from accelbench.reports.svg import Bar, Figure, Style

    fig = Figure("whiskers")
    bars = fig.axes("bars", "x", "")
    bars.xlog = True
    bars.bars += [Bar(2.0, "#1f77b4", "measured", low=1.5, high=2.5),
                  Bar(5.0, "#ff7f0e", "projected", low=3.0, high=80.0, range_dashed=True)]  # fmt: skip
    band = fig.axes("band", "x", "y")
    band.band([(1.0, 9.0, 11.0), (2.0, 18.0, 22.0), (3.0, 27.0, 33.0)], "#2ca02c", "dashed")
    band.line([(1.0, 10.0), (3.0, 30.0)], Style("#2ca02c"))
    root = ET.fromstring(fig.svg())
    paths = list(root.iter(f"{NS}path"))
    whiskers = [p for p in paths if p.get("stroke") == "#111"]
    solid = [p for p in whiskers if p.get("stroke-dasharray") is None]
    dashed = [p for p in whiskers if p.get("stroke-dasharray")]
    assert len(dashed) == 1 and len(solid) == 2  # the measured whisker; the range's line and its brackets
    assert solid[0].get("d").count("V") == 2 and solid[1].get("d").count("H") == 4  # caps | |, brackets [ ]
    frame = next(p.get("d") for p in paths if p.get("stroke") == "#222")  # "M{left} {top}H{right}V…"
    right = float(frame.split("H")[1].split("V")[0])
    assert float(dashed[0].get("d").split("H")[1]) <= right  # the range's top end is inside the axis
    fills = [p for p in paths if p.get("fill-opacity") == "0.15"]
    assert len(fills) == 1 and fills[0].get("d").endswith("Z") and fills[0].get("stroke-dasharray")
