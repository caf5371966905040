"""Done means: two hosts' result folders pushed to one server give the report ``accelbench report`` gives over
the two folders, byte for byte (JSON and report.html), on SQLite and on a real PostgreSQL; the history of a
(model, target, precision) flags a run that moved more than the run-to-run spread."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from service_fixtures import ACCELBENCH

DATA = Path(__file__).parent / "data" / "reports"
HTTP = httpx.Client(timeout=300)  # a report renders plots: slow on a loaded 2-core machine
OPTION_SETS = [
    [],
    ["--slo-p99-ms", "20", "--price-basis", "spot", "--baseline", "l4", "--price", "cpu-local=0.05"],
    ["--slo-p99-ms", "250", "--percentile", "95", "--project", "l40s,inf2-xlarge", "--target-qps", "500"],
]


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([ACCELBENCH, *args], capture_output=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr.decode()
    return proc


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory) -> tuple[Path, Path]:
    """Host A: an `accelbench run` on cpu-local (committed results); host B: a perf_analyzer import for l4."""
    base = tmp_path_factory.mktemp("hosts")
    host_a = base / "host-a" / "results"
    shutil.copytree(DATA / "cpu-local", host_a)
    host_b = base / "host-b"
    _cli("import", "perf-analyzer", str(DATA / "perf_analyzer_verbose_l4_handwritten.csv"), "--target", "l4",
         "--model", "minilm-l6", "--precision", "int8", "--out", str(host_b))  # fmt: skip
    return host_a, host_b


@pytest.fixture(scope="module")
def cli_report(tmp_path_factory):
    """``cli_report(*args)``: what ``accelbench report *args`` gives (with ``--json`` its stdout, else the
    report.html it writes), each run once per module: the CLI's output does not depend on the server it is
    compared with, so one run serves the SQLite and the PostgreSQL server."""
    outputs: dict[tuple[str, ...], bytes] = {}
    base = tmp_path_factory.mktemp("cli-reports")

    def report(*args: str) -> bytes:
        if args not in outputs:
            if "--json" in args:
                outputs[args] = _cli("report", *args).stdout
            else:
                out = base / f"report{len(outputs)}"
                _cli("report", *args, "--out", str(out))
                outputs[args] = (out / "report.html").read_bytes()
        return outputs[args]

    return report


def _to_query(options: list[str]) -> list[tuple[str, str]]:
    names = {"--slo-p99-ms": "slo_p99_ms", "--price-basis": "price_basis", "--baseline": "baseline",
             "--price": "price", "--percentile": "percentile", "--project": "project", "--target-qps": "target_qps"}  # fmt: skip
    return [(names[k], v) for k, v in zip(options[::2], options[1::2], strict=True)]


def test_two_hosts_pushed_give_the_cli_report_byte_for_byte(live_server, two_hosts, cli_report):
    host_a, host_b = two_hosts
    push = _cli(
        "push", str(host_a), str(host_b), "--server", live_server.base_url, "--token", live_server.token
    )
    assert "pushed 5 new, 0 already stored" in push.stdout.decode()
    again = _cli(
        "push", str(host_a), str(host_b), "--server", live_server.base_url, "--token", live_server.token
    )
    assert "pushed 0 new, 5 already stored" in again.stdout.decode()
    auth = {"Authorization": f"Bearer {live_server.token}"}
    for options in OPTION_SETS:
        expected = cli_report(str(host_a), str(host_b), "--json", *options)
        got = HTTP.get(live_server.base_url + "/api/v1/report", params=_to_query(options), headers=auth)
        assert got.status_code == 200, got.text
        assert got.content == expected, options
        page = HTTP.get(live_server.base_url + "/report.html", params=_to_query(options), headers=auth)
        html = cli_report(str(host_a), str(host_b), *options)
        assert page.status_code == 200 and page.content == html, options
    rows = json.loads(expected)
    ranked = {
        r["target"] for r in rows if r["model"] == "minilm-l6" and r["status"] == "measured" and r["rank"]
    }
    assert ranked == {"l4", "cpu-local"}  # the one report ranks both hosts' targets


def test_one_model_report_equals_the_cli_over_that_models_files(live_server, two_hosts, cli_report):
    host_a, host_b = two_hosts
    _cli("push", str(host_a), str(host_b), "--server", live_server.base_url, "--token", live_server.token)
    files = [str(p) for p in (*host_a.glob("resnet50*.json"), *host_b.glob("resnet50*.json"))]
    expected = cli_report(*files, "--json")
    got = HTTP.get(live_server.base_url + "/api/v1/report", params={"model": "resnet50"},
                    headers={"Authorization": f"Bearer {live_server.token}"})  # fmt: skip
    assert got.content == expected


def test_history_flags_a_run_that_moved_beyond_the_spread(live_server, tmp_path):
    """A later run of the same variant far slower than the host's noise floor allows is flagged; the unchanged
    rerun is not (single runs: the noise floor of cpu-local is the between-run variance, reports/noise.py)."""
    from accelbench.reports.noise import floor_for

    slower = math.exp(-6 * floor_for("cpu-local").sd_log_capacity)  # six SDs of the floor below
    # recorded by a real `accelbench run`, with step statistics (the intervals the rule needs)
    src = json.loads(
        (DATA / "cpu-local-measured" / "minilm-l6__cpu-local__int8__closed-http-b1.json").read_text()
    )
    auth = {"Authorization": f"Bearer {live_server.token}"}
    runs = []
    for day, scale in (("2026-11-30", 1.0), ("2026-12-01", slower)):
        doc = json.loads(json.dumps(src))
        doc["provenance"]["created_at"] = f"{day}T10:00:00+00:00"
        for step in doc["steps"]:  # a slower machine: same latencies at a lower rate (a test input, not data)
            step["throughput_rps"] = round(step["throughput_rps"] * scale, 3)
        runs.append(doc)
    report = live_server.base_url + "/api/v1/report"
    before = HTTP.get(report, params={"model": "minilm-l6"}, headers=auth).text
    for doc in runs:
        stored = HTTP.post(live_server.base_url + "/api/v1/results", json=doc, headers=auth)
        assert stored.status_code in (200, 201)
    after = HTTP.get(report, params={"model": "minilm-l6"}, headers=auth).text
    assert after != before  # a push invalidates the rendered report the server keeps
    params = {"model": "minilm-l6", "target": "cpu-local", "precision": "int8"}
    history = HTTP.get(live_server.base_url + "/api/v1/history", params=params, headers=auth).json()
    by_day = {r["created_at"][:10]: r for r in history["runs"]}
    assert by_day["2026-12-01"]["change"]["regression"] is True
    assert any("capacity down" in f for f in by_day["2026-12-01"]["change"]["flags"])
    assert by_day["2026-11-30"]["change"] is None or not by_day["2026-11-30"]["change"]["regression"]
    page = HTTP.get(live_server.base_url + "/history", params=params, headers=auth)
    assert page.status_code == 200 and "<svg" in page.text and "moved:" in page.text
    # an SLO no run meets: no empty axes, but a line saying so, and each run's reason beside its dash
    strict = HTTP.get(
        live_server.base_url + "/history", params={**params, "slo_p99_ms": "0.001"}, headers=auth
    )
    assert strict.status_code == 200 and "<svg" not in strict.text
    assert "No run has a capacity at p99 ≤ 0.001 ms" in strict.text
    assert strict.text.count("<td>— (") == len(history["runs"]), strict.text
