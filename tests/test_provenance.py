"""Provenance is the measuring host's: package versions, host and command are read by the process that
measures, on the machine that measures, and no later step (rebuild, import, resume, report, the service's
store, a re-dump) fills them in with its own. One test per path; the committed H200 documents are checked
against their own probe."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.documents import dump_json, load_result, to_dict
from tests.test_manifest import variant_manifest

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "bench" / "results" / "h200" / "2026-11-30"
SHAPE_RECORDINGS = ROOT / "tests" / "data" / "edge"


def _committed_results() -> list[Path]:
    found = []
    for path in sorted(
        [*(ROOT / "bench" / "results").rglob("*.json"), *(ROOT / "tests" / "data").rglob("*.json")]
    ):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        if path.is_relative_to(SHAPE_RECORDINGS):
            continue  # shapes of documents with their measured values masked (tests/edge_documents.py)
        if isinstance(data, dict) and data.get("schema") == "accelbench.result/1":
            found.append(path)
    return found


def test_the_committed_h200_documents_carry_their_own_probes_packages():
    probe = json.loads((H200 / "probe.json").read_text())
    measured = {k: v for k, v in probe["packages"].items() if v}
    docs = sorted((H200 / "results").glob("*.json"))
    assert len(docs) == 2
    for path in docs:
        prov = json.loads(path.read_text())["provenance"]
        assert prov["host"] == probe, path.name
        assert prov["packages"] == measured, path.name  # torch 2.11.0 as on the H200, not 2.13.0+cpu
        assert "CORRECTIONS.md" in prov["note"]
    assert "2.13.0+cpu" in (H200 / "CORRECTIONS.md").read_text()


@pytest.mark.parametrize("path", _committed_results(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_redump_changes_no_provenance_field(path):
    text = path.read_text()
    doc = load_result(json.loads(text), str(path))
    again = json.loads(dump_json(doc))
    assert again["provenance"] == json.loads(text)["provenance"]
    assert to_dict(load_result(again).provenance) == to_dict(doc.provenance)


def test_a_redump_would_be_caught_changing_provenance():
    """The check above can fail: a document whose provenance a writer altered is told apart."""
    path = H200 / "results" / "resnet50__h200-sxm__bf16.json"
    doc = load_result(json.loads(path.read_text()), str(path))
    doc.provenance.packages = {**doc.provenance.packages, "torch": "2.13.0+cpu"}
    assert json.loads(dump_json(doc))["provenance"] != json.loads(path.read_text())["provenance"]


def _device_check():
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "bench"))
    import device_check

    return device_check


def test_the_device_check_records_its_own_packages_and_command_when_it_measures():
    dc = _device_check()
    probe = {"packages": {"torch": "2.11.0", "numpy": "2.5.2", "tensorrt": None}}
    measured = dc.measuring_provenance(probe, ["bench/device_check.py", "--out", "/tmp/x y"])
    assert measured["packages"] == {"torch": "2.11.0", "numpy": "2.5.2"}
    assert measured["command"] == "python3 bench/device_check.py --out '/tmp/x y'"


def _rebuild(folder: Path) -> None:
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "device_check.py"), "--rebuild-results", str(folder)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]


@pytest.mark.slow
def test_a_rebuild_elsewhere_copies_the_measuring_runs_provenance(tmp_path):
    _device_check()
    summary = json.loads((H200 / "summary.json").read_text())
    summary["provenance"] = {"packages": {"torch": "9.9.9+measuring-host"}, "command": "python3 measured --as-run",
                             "method": "as measured"}  # fmt: skip
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    shutil.copy(H200 / "probe.json", tmp_path / "probe.json")
    _rebuild(tmp_path)
    for path in (tmp_path / "results").glob("*.json"):
        prov = json.loads(path.read_text())["provenance"]
        assert prov["packages"] == {"torch": "9.9.9+measuring-host"}  # not this machine's torch
        assert prov["command"] == "python3 measured --as-run" and prov["method"] == "as measured"


@pytest.mark.slow
def test_rebuilding_the_committed_h200_run_reproduces_the_corrected_files(tmp_path):
    _device_check()
    for name in ("summary.json", "probe.json"):
        shutil.copy(H200 / name, tmp_path / name)
    _rebuild(tmp_path)
    for path in sorted((H200 / "results").glob("*.json")):
        assert (tmp_path / "results" / path.name).read_text() == path.read_text(), path.name


def test_a_load_test_document_is_stamped_by_the_measuring_process():
    from accelbench.loadtests import results
    from accelbench.loadtests.profiles import LoadProfile

    doc = results.new_document(model="m", variant="m", manifest=None, server={"url": "http://x", "version": "1"},
                               profile=LoadProfile(kind="closed", levels=(1,)),
                               command="accelbench loadtest ...")  # fmt: skip
    assert doc.provenance.host == results.host_probe()
    assert doc.provenance.packages == results.package_versions()
    assert doc.provenance.command == "accelbench loadtest ..."


def test_steps_measured_on_another_host_are_measured_again_not_relabelled(tmp_path):
    """Resume keeps a document's steps only when this host and these packages measured them."""
    from accelbench.loadtests import results
    from accelbench.loadtests.profiles import LoadProfile
    from accelbench.loadtests.sweep import is_complete, result_path

    profile = LoadProfile(kind="closed", protocol="http", levels=(1,), duration_s=1.0)
    doc = results.new_document(model="m", variant="m", manifest=variant_manifest("abc"),
                               profile=profile, server={"url": "u", "version": ""})  # fmt: skip
    doc.steps = [
        load_result(json.loads((H200 / "results" / "resnet50__h200-sxm__bf16.json").read_text())).steps[0]
    ]
    doc.steps[0].index = 0
    doc.complete = True
    path = result_path(tmp_path, "m", profile)
    results.save(doc, path)
    assert is_complete(path, "abc", profile)  # this host measured it
    doc.provenance.host = {**doc.provenance.host, "hostname": "some-other-host"}
    results.save(doc, path)
    assert not is_complete(path, "abc", profile)
    doc.provenance.host = results.host_probe()
    doc.provenance.packages = {**doc.provenance.packages, "locust": "0.0.1"}
    results.save(doc, path)
    assert not is_complete(path, "abc", profile)


def test_an_import_records_no_provenance_of_the_importing_machine():
    from accelbench.reports.importers import import_perf_analyzer

    doc = import_perf_analyzer(ROOT / "tests" / "data" / "reports" / "perf_analyzer_minilm_int8_cpu.csv",
                               target="cpu-local", model="minilm-l6", precision="int8")  # fmt: skip
    assert doc.provenance.host == {} and doc.provenance.packages == {}
    assert doc.provenance.command is None  # the import command is not the measuring command
    assert "accelbench import perf-analyzer" in doc.provenance.note


@pytest.mark.slow
def test_assembling_a_report_reads_provenance_and_writes_none(tmp_path):
    from accelbench.hardware.catalog import load_catalog
    from accelbench.reports.build import ReportOptions
    from accelbench.reports.report import make_report

    before = {p.name: p.read_bytes() for p in (H200 / "results").glob("*.json")}
    made = make_report(
        [str(H200 / "results")], load_catalog(), ReportOptions(slo_ms=20.0), tmp_path / "report"
    )
    assert {p.name: p.read_bytes() for p in (H200 / "results").glob("*.json")} == before
    [row] = [r for r in made.table if r["target"] == "h200-sxm" and r["model"] == "resnet50"]
    assert "torch 2.11.0" in row["versions"] and "2.13.0+cpu" not in row["versions"]


@pytest.mark.slow
def test_the_service_stores_and_serves_provenance_verbatim(tmp_path):
    import httpx
    from service_fixtures import running_server

    raw = (H200 / "results" / "resnet50__h200-sxm__bf16.json").read_bytes()
    with running_server(f"sqlite:///{tmp_path / 'r.db'}", tmp_path) as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        stored = httpx.post(server.base_url + "/api/v1/results", content=raw, headers=auth, timeout=60).json()
        got = httpx.get(server.base_url + f"/api/v1/results/{stored['id']}", headers=auth, timeout=60).json()
    assert got["provenance"] == json.loads(raw)["provenance"]
    assert got["document"]["provenance"] == json.loads(raw)["provenance"]


def test_a_sweep_with_nothing_left_to_measure_is_not_stamped_again(tmp_path):
    """A job resumed from a document with every step measured but not marked complete (the answer to its
    result was lost) only completes it: the provenance stays that of the run that measured it, so the result
    is the same document, not a second run of it (issue 50)."""
    from accelbench.loadtests import results
    from accelbench.loadtests.profiles import LoadProfile
    from accelbench.loadtests.sweep import Server, SweepOptions, result_path, run_sweep

    profile = LoadProfile(kind="closed", protocol="http", levels=(1,), duration_s=1.0)
    doc = results.new_document(model="m", variant="m", manifest=None, profile=profile,
                               server={"url": "http://first-server:8000", "version": "2.50"})  # fmt: skip
    doc.steps = [
        load_result(json.loads((H200 / "results" / "resnet50__h200-sxm__bf16.json").read_text())).steps[0]
    ]
    doc.steps[0].index = 0
    doc.provenance.created_at = "2026-01-02T03:04:05Z"
    path = result_path(tmp_path, "m", profile)
    results.save(doc, path)
    again, _ = run_sweep(server=Server("http://second-server:9000"), model="m", variant="m", payloads=[],
                         expected_outputs=[], profile=profile, options=SweepOptions(tmp_path))  # fmt: skip
    assert again.complete
    assert to_dict(again.provenance) == to_dict(doc.provenance)
    assert to_dict(again) == {**to_dict(doc), "complete": True}
