"""`accelbench import ...` and `accelbench report ...` end to end on recorded and fixture files."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from accelbench.cli import main

DATA = Path(__file__).parent / "data" / "reports"
PA_REAL = DATA / "perf_analyzer_minilm_int8_cpu.csv"
PA_VERBOSE = DATA / "perf_analyzer_verbose_l4_handwritten.csv"
LOCUST = DATA / "locust_minilm_int8_cpu_stats.csv"
CPU_LOCAL = DATA / "cpu-local"
MEASURED = DATA / "cpu-local-measured"  # recorded by the default `accelbench run`, with step statistics
PROJECT = "l4,l40s,jetson-agx-orin-64gb,inf2-xlarge"


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def import_pa(csv_file: Path, out: Path, target: str, precision: str = "int8") -> dict:
    path = run("import", "perf-analyzer", str(csv_file), "--target", target, "--model", "minilm-l6",
               "--precision", precision, "--out", str(out)).strip()  # fmt: skip
    return json.loads(Path(path).read_text())


# ---------------------------------------------------------------- importers
def test_import_perf_analyzer_recorded_sample(tmp_path):
    doc = import_pa(PA_REAL, tmp_path, "cpu-local")
    assert doc["schema"] == "accelbench.result/1" and doc["origin"] == "perf_analyzer-import"
    assert [s["offered"] for s in doc["steps"]] == [{"concurrency": 1}, {"concurrency": 4}]
    first = doc["steps"][0]
    assert first["throughput_ips"] == 56.3619 and first["latency_us"]["p99"] == 24842
    assert first["server_stats"]["queue_us"] == 713 and first["server_stats"]["compute_infer_us"] == 16374
    assert first["latency_resolution_us"] == 1.0 and first["verdict"] == "VALID"
    assert doc["provenance"]["imported_from"]["file"] == PA_REAL.name


def test_import_perf_analyzer_verbose_csv(tmp_path):
    doc = import_pa(PA_VERBOSE, tmp_path, "l4")
    c4 = next(s for s in doc["steps"] if s["offered"] == {"concurrency": 4})
    assert c4["latency_us"]["mean"] == 1210 and c4["latency_us"]["p99"] == 1874
    assert c4["metrics"]["gpu_power_w"] == pytest.approx(63.95)
    assert c4["energy_per_request_j"] == pytest.approx(63.95 / 3294.02)


@pytest.mark.slow
def test_import_locust_marks_resolution(tmp_path):
    path = run("import", "locust", str(LOCUST), "--target", "cpu-local", "--model", "minilm-l6",
               "--precision", "int8", "--users", "4", "--out", str(tmp_path)).strip()  # fmt: skip
    doc = json.loads(Path(path).read_text())
    (s,) = doc["steps"]
    assert doc["origin"] == "locust-import" and s["requests"] == 1746
    assert s["throughput_rps"] == pytest.approx(124.5820260912265)
    assert s["latency_us"]["p99"] == 49000 and s["latency_us"]["max"] == pytest.approx(55156.004)
    assert s["latency_resolution_us"] == 1000.0 and s["error_rate"] == 0.0
    run("report", str(tmp_path), "--slo-p99-ms", "50", "--out", str(tmp_path / "rep"))
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "p99 known to 1 ms" in md and "| locust-import |" in md


# ---------------------------------------------------------------- done means: capacity and cost by hand
def best_qualifying_ips(csv_file: Path, slo_us: float) -> float:
    with csv_file.open() as handle:
        rows = list(csv.DictReader(handle))
    return max(float(r["Inferences/Second"]) for r in rows if float(r["p99 latency"]) <= slo_us)


@pytest.mark.slow
def test_perf_analyzer_import_capacity_and_cost_recomputable(tmp_path):
    import_pa(PA_VERBOSE, tmp_path / "results", "l4")
    out = run("report", str(tmp_path / "results"), "--slo-p99-ms", "2", "--price", "l4=0.75",
              "--out", str(tmp_path / "rep"), "--json")  # fmt: skip
    table = json.loads(out)
    (row,) = [r for r in table if r["target"] == "l4"]
    expected = best_qualifying_ips(PA_VERBOSE, 2000)
    assert row["status"] == "measured" and row["capacity_rps"] == expected == 3294.02
    assert row["usd_per_hour"] == 0.75 and row["price_basis"] == "override"
    assert row["cost_per_million_usd"] == pytest.approx(0.75 / (expected * 3600) * 1e6)
    # a reader recomputes it from the two numbers printed in the report's row
    md = (tmp_path / "rep" / "report.md").read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("| 1 | l4 |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    capacity, usd_per_hour, cost = float(cells[4].replace(",", "")), float(cells[8][1:]), float(cells[9][1:])
    assert usd_per_hour / (capacity * 3600) * 1e6 == pytest.approx(cost, rel=1e-3)


@pytest.mark.slow
def test_recorded_cpu_sample_at_2ms_does_not_meet_but_at_30ms_does(tmp_path):
    import_pa(PA_REAL, tmp_path / "results", "cpu-local")
    tight = json.loads(run("report", str(tmp_path / "results"), "--slo-p99-ms", "2", "--price", "cpu-local=0.1",
                           "--out", str(tmp_path / "a"), "--json"))  # fmt: skip
    loose = json.loads(run("report", str(tmp_path / "results"), "--slo-p99-ms", "30", "--price", "cpu-local=0.1",
                           "--out", str(tmp_path / "b"), "--json"))  # fmt: skip
    row_t = next(r for r in tight if r["target"] == "cpu-local")
    row_l = next(r for r in loose if r["target"] == "cpu-local")
    assert (
        row_t["meets_slo"] is False and row_t["capacity_rps"] is None and "does not meet" in row_t["reason"]
    )
    assert row_l["capacity_rps"] == best_qualifying_ips(PA_REAL, 30000) == 56.3619


# ---------------------------------------------------------------- done means: CPU + projections, labelled, deterministic
def render(out: Path, *extra: str) -> None:
    run("report", str(CPU_LOCAL), "--slo-p99-ms", "100", "--project", PROJECT, "--target-qps", "500",
        "--out", str(out), *extra)  # fmt: skip


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    render(out)
    return out


@pytest.mark.slow
def test_report_has_every_target_and_labels_every_projected_figure(rendered):
    md = (rendered / "report.md").read_text()
    headline = md.split("\n\n")[2]  # after the title and the headline's heading: its table
    assert "cheapest target" in headline and "requests at p99" in headline and "vs a100-sxm4-80gb" in headline
    rows = [ln for ln in md.splitlines() if re.match(r"\| (\d+|—) \| ", ln)]
    targets = {ln.split("|")[2].strip() for ln in rows}
    assert {"cpu-local", "l4", "l40s", "jetson-agx-orin-64gb", "inf2-xlarge", "a100-sxm4-80gb"} <= targets
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if cells[3] == "projected":
            for figure in (cells[4], cells[5], cells[9], cells[12]):  # capacity, p99, cost, cost ratio
                assert figure == "—" or figure.endswith("(proj)"), ln
        else:
            assert cells[3] == "measured" and "(proj)" not in cells[4] + cells[5] + cells[9]
    for section in ("## Results", "## Provenance", "## Method", "## Capacity plan", "### Prices"):
        assert section in md
    assert "assumed 0.3" in md and "$0.15/kWh" in md and "1/8 of p4de.24xlarge" in md


@pytest.mark.slow
def test_html_is_self_contained_with_three_plots(rendered):
    page = (rendered / "report.html").read_text()
    assert page.count("<svg") == 3 and "<script" not in page.lower()
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls  # XML namespaces only
    assert "SLO p99 100 ms" in page and "(proj)" in page


@pytest.mark.slow
def test_tables_csv_and_parquet_agree(rendered):
    import pyarrow.parquet as pq

    with (rendered / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    table = pq.read_table(rendered / "results.parquet").to_pylist()
    assert len(rows) == len(table) == 24  # 4 measured + 2 models × 2 precisions × 5 projected targets
    assert [r["target"] for r in rows] == [r["target"] for r in table]


@pytest.mark.slow
def test_rerender_is_byte_identical(rendered, tmp_path):
    render(tmp_path)
    names = sorted(p.relative_to(rendered).as_posix() for p in rendered.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    for name in names:
        assert (rendered / name).read_bytes() == (tmp_path / name).read_bytes(), name


@pytest.mark.slow
def test_failed_accuracy_is_not_ranked_unless_asked(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(CPU_LOCAL, results)
    doc_path = results / "minilm-l6__cpu-local__int8__closed-http-b1.json"
    doc = json.loads(doc_path.read_text())
    doc["accuracy"] = {"metric": "cosine", "value": 0.39, "verdict": "FAIL"}
    doc_path.write_text(json.dumps(doc))
    base = ("report", str(results), "--slo-p99-ms", "100", "--out", str(tmp_path / "o"), "--json")
    row = next(
        r for r in json.loads(run(*base)) if r["target"] == "cpu-local" and r["variant"].endswith("int8")
    )
    assert row["ranked"] is False and row["rank"] is None and "accuracy FAIL" in row["reason"]
    row = next(
        r
        for r in json.loads(run(*base, "--include-failed"))
        if r["target"] == "cpu-local" and r["precision"] == "int8"
    )
    assert row["ranked"] is True and row["rank"] is not None


MINILM = ("minilm-l6", "int8", "cpu-local")


def _scaled(dst: Path, factor: float) -> Path:
    """The recorded results with the MiniLM INT8 throughput and its interval scaled by ``factor``."""
    shutil.copytree(MEASURED, dst)
    doc_path = dst / "minilm-l6__cpu-local__int8__closed-http-b1.json"
    doc = json.loads(doc_path.read_text())
    for s in doc["steps"]:
        s["throughput_rps"] = s["throughput_ips"] = s["throughput_rps"] * factor
        thr = (s.get("statistics") or {}).get("throughput_rps")
        if thr:
            thr.update({k: thr[k] * factor for k in ("value", "low", "high", "se")})
    doc_path.write_text(json.dumps(doc))
    return dst


def test_compare_flags_a_regression_only_when_intervals_say_so(tmp_path):
    """Recorded documents with statistics (the default run on the 2-core machine); the new side's MiniLM INT8
    throughput and its interval scaled far beyond the host's measured noise floor (six of its SDs), and by 0.97
    (inside the noise). Single runs on cpu-local: judged against that floor."""
    from accelbench.reports.noise import floor_for

    far = math.exp(-6 * floor_for("cpu-local").sd_log_capacity)
    for name, factor in (("new", far), ("noise", 0.97)):
        _scaled(tmp_path / name, factor)
    out = json.loads(run("report", "--compare", str(MEASURED), str(tmp_path / "new"), "--slo-p99-ms", "100",
                         "--out", str(tmp_path / "cmp"), "--json"))  # fmt: skip
    flagged = {(r["model"], r["precision"], r["target"]) for r in out["rows"] if r["regression"]}
    assert flagged == {("minilm-l6", "int8", "cpu-local")}
    noise = json.loads(run("report", "--compare", str(MEASURED), str(tmp_path / "noise"), "--slo-p99-ms", "100",
                           "--json"))  # fmt: skip
    assert not any(r["regression"] for r in noise["rows"])
    assert any(r["judged"] for r in noise["rows"])
    # the fixture documents carry no intervals: compared, never called a regression
    plain = json.loads(
        run("report", "--compare", str(CPU_LOCAL), str(CPU_LOCAL), "--slo-p99-ms", "100", "--json")
    )
    assert not any(r["regression"] or r["judged"] for r in plain["rows"])
    assert "interval" in out["rule"] and (tmp_path / "cmp" / "compare.md").exists()
    minilm = next(r for r in noise["rows"] if (r["model"], r["precision"], r["target"]) == MINILM)
    assert minilm["verdict"] == "inconclusive: single runs (within the noise floor)"
    assert minilm["basis"].startswith("noise floor")


def test_compare_with_history_judges_against_the_spread_of_earlier_runs(tmp_path):
    for i, factor in enumerate((0.9, 0.95, 0.98, 1.05, 1.1)):  # five earlier runs, about 8 % apart
        _scaled(tmp_path / "history" / f"run-{i}", factor)
    for name, factor in (("new", 0.7), ("noise", 0.93)):
        _scaled(tmp_path / name, factor)

    def minilm(new: str) -> dict:
        out = json.loads(run("report", "--compare", str(MEASURED), str(tmp_path / new), "--history",
                             str(tmp_path / "history"), "--json"))  # fmt: skip
        return next(r for r in out["rows"] if (r["model"], r["precision"], r["target"]) == MINILM)

    noise, worse = minilm("noise"), minilm("new")
    # five in the folder and the old run itself: it is an earlier run too (the service's history counts it)
    assert noise["verdict"] == "ok" and noise["basis"].startswith("history: 6 earlier runs"), noise
    assert worse["regression"] and worse["basis"].startswith("history: 6 earlier runs"), worse
    shutil.copytree(MEASURED, tmp_path / "history" / "old")  # the old run in the folder as well: counted once
    assert minilm("noise")["basis"].startswith("history: 6 earlier runs")


# ---------------------------------------------------------------- bad input: one line, exit 2
def cli_subprocess(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelbench.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "results path not found"),
        ("empty", "no accelbench.result/1 documents"),
        ("malformed", "is not valid JSON"),
        ("unknown-target", "unknown target"),
        ("import-unknown-target", "unknown target"),
        ("import-missing-csv", "CSV not found"),
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_2(tmp_path, case, expected):
    results = tmp_path / "results"
    results.mkdir()
    args = ["report", str(results), "--out", str(tmp_path / "o")]
    if case == "missing":
        args[1] = str(tmp_path / "nope")
    elif case == "malformed":
        (results / "r.json").write_text('{"schema": "accelbench.result/1", "steps": [')
    elif case == "unknown-target":
        doc = json.loads((CPU_LOCAL / "minilm-l6__cpu-local__int8__closed-http-b1.json").read_text())
        doc["target"] = "h800-imaginary"
        (results / "r.json").write_text(json.dumps(doc))
    elif case == "import-unknown-target":
        args = [
            "import",
            "perf-analyzer",
            str(PA_REAL),
            "--target",
            "l5",
            "--model",
            "m",
            "--out",
            str(results),
        ]
    elif case == "import-missing-csv":
        args = ["import", "locust", str(tmp_path / "none.csv"), "--target", "l4", "--model", "m"]
    proc = cli_subprocess(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelbench: error:") and expected in lines[0], proc.stderr


@pytest.mark.slow
def test_projection_of_a_cpu_target_is_calibrated_from_the_measured_cpu(tmp_path):
    from accelbench.hardware.catalog import load_catalog
    from accelbench.hardware.roofline import roofline_point
    from accelbench.reports.projection import roofline_at

    table = json.loads(run("report", str(CPU_LOCAL), "--slo-p99-ms", "100", "--project", "c7i.xlarge",
                           "--out", str(tmp_path), "--json"))  # fmt: skip
    row = next(
        r
        for r in table
        if r["target"] == "c7i.xlarge" and r["model"] == "minilm-l6" and r["precision"] == "int8"
    )
    assert row["status"] == "projected" and row["efficiency_source"].startswith("calibrated")
    # recompute the calibration: measured ÷ roofline bound for every qualifying cpu-local step, median
    cpu = load_catalog().get("cpu-local")
    ratios = []
    for path in sorted(CPU_LOCAL.glob("*.json")):
        doc = json.loads(path.read_text())
        for s in doc["steps"]:
            if s["latency_us"]["p99"] <= 100_000:
                bound = roofline_at(roofline_point, doc["graph_cost"], 1, cpu, doc["precision"])
                ratios.append(s["throughput_ips"] / bound.throughput_upper_bound_ips)
    ratios.sort()
    mid = len(ratios) // 2
    median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
    assert row["efficiency"] == pytest.approx(median)
    md = (tmp_path / "report.md").read_text()
    assert "calibrated: median of" in md and "efficiency" in md


@pytest.mark.slow
def test_energy_per_request_shown_where_power_was_measured(tmp_path):
    import_pa(PA_VERBOSE, tmp_path / "results", "l4")
    table = json.loads(run("report", str(tmp_path / "results"), "--slo-p99-ms", "2", "--out", str(tmp_path / "r"),
                           "--json"))  # fmt: skip
    row = next(r for r in table if r["target"] == "l4")
    assert row["energy_per_request_j"] == pytest.approx(63.95 / 3294.02)
    assert "J/request" in (tmp_path / "r" / "report.md").read_text()


def test_baseline_override_sets_the_ratios(tmp_path):
    table = json.loads(
        run("report", str(CPU_LOCAL), "--slo-p99-ms", "100", "--baseline", "cpu-local", "--json")
    )
    for row in table:
        assert row["baseline_target"] == "cpu-local"
        if row["target"] == "cpu-local" and row["capacity_rps"]:
            assert row["capacity_vs_baseline"] == row["cost_vs_baseline"] == 1.0
    assert not any(r["target"] == "a100-sxm4-80gb" for r in table)  # the catalog baseline is no longer added


def test_perf_analyzer_request_rate_and_malformed_csv(tmp_path):
    from accelbench.errors import BadInputError
    from accelbench.reports.importers import import_perf_analyzer

    rate = tmp_path / "rate.csv"
    rate.write_text(
        "Request Rate,Inferences/Second,Client Send,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n"
        "100,99.8,20,3,900,950,980,1200\n50,50.1,20,3,800,850,870,1000\n"
    )
    doc = import_perf_analyzer(rate, "l4", "m", "int8")
    assert doc.load_profile.kind == "open" and doc.load_profile.levels == [50.0, 100.0]
    assert [s.offered.rate_rps for s in doc.steps] == [50.0, 100.0]
    bad = tmp_path / "bad.csv"
    bad.write_text("Concurrency,Inferences/Second\n1,not-a-number\n")
    with pytest.raises(BadInputError, match="Inferences/Second"):
        import_perf_analyzer(bad, "l4", "m")


def test_results_from_two_hosts_with_the_same_run_id_are_pooled(tmp_path):
    name = "minilm-l6__cpu-local__int8__closed-http-b1.json"
    for host, factor in (("host-a", 1.0), ("host-b", 1.5)):
        doc = json.loads((CPU_LOCAL / name).read_text())
        doc["provenance"]["host"]["hostname"] = host
        for s in doc["steps"]:
            s["throughput_rps"] = s["throughput_ips"] = round(s["throughput_rps"] * factor, 3)
        (tmp_path / host).mkdir()
        (tmp_path / host / name).write_text(json.dumps(doc))
    table = json.loads(run("report", str(tmp_path / "host-a"), str(tmp_path / "host-b"), "--slo-p99-ms", "100",
                           "--json"))  # fmt: skip
    row = next(r for r in table if r["target"] == "cpu-local")
    assert row["capacity_rps"] == round(88.1 * 1.5, 3) and row["host"] == "host-a, host-b"
    assert row["chosen_run_id"].startswith("minilm-l6__cpu-local__int8__closed-http-b1@")
    assert len(row["sources"].split(";")) == 2
