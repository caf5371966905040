"""Reports read documents, not paths: the same documents from a folder, from JSON text (as the service's database
keeps them) or in another order render byte-identical md, html, csv, parquet and JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.documents import ResultDocument, dump_json
from accelbench.errors import BadInputError
from accelbench.hardware.catalog import load_catalog
from accelbench.reports.build import ReportOptions
from accelbench.reports.importers import import_perf_analyzer
from accelbench.reports.inputs import load_documents
from accelbench.reports.report import FORMATS, make_report, render_report

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "reports"
H200 = ROOT / "bench" / "results" / "h200" / "2026-11-30" / "results"
OPTIONS = ReportOptions(project=("l4", "inf2-xlarge"), target_qps=100.0)


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> list[str]:
    imported = tmp_path_factory.mktemp("imported")
    doc = import_perf_analyzer(DATA / "perf_analyzer_minilm_int8_cpu.csv", "l4", "minilm-l6", "int8")
    (imported / "pa.json").write_text(dump_json(doc))
    return [str(DATA / "cpu-local"), str(H200), str(imported)]


@pytest.fixture(scope="module")
def from_disk(sources):
    return render_report(load_documents(sources), load_catalog(), OPTIONS)


def _same(a, b) -> None:
    assert a.json_text == b.json_text
    assert list(a.outputs) == list(b.outputs)
    for name in a.outputs:
        assert a.outputs[name] == b.outputs[name], name


@pytest.mark.slow
def test_all_formats_are_rendered(from_disk):
    assert set(from_disk.outputs) >= {"report.md", "report.html", "results.csv", "results.parquet"}
    assert any(name.startswith("plots/") for name in from_disk.outputs)
    assert '"target": "l4"' in from_disk.json_text and '"target": "h200-sxm"' in from_disk.json_text
    hosts = {r["target"]: r["host"] for r in from_disk.table if r["status"] == "measured"}
    assert (
        hosts["h200-sxm"] == "Intel(R) Xeon(R) Processor"
    )  # the device check's probe names no host: its CPU
    assert hosts["cpu-local"] == "dev-2core" and hosts["l4"] == "unknown host"


@pytest.mark.slow
def test_documents_through_json_text_render_the_same_bytes(sources, from_disk):
    stored = [doc.model_dump_json(by_alias=True, exclude_unset=True) for doc in load_documents(sources)]
    back = [ResultDocument.model_validate_json(text) for text in reversed(stored)]
    _same(from_disk, render_report(back, load_catalog(), OPTIONS))


@pytest.mark.slow
def test_the_same_document_twice_counts_once(sources, from_disk):
    docs = load_documents(sources)
    _same(from_disk, render_report(docs + docs[:2], load_catalog(), OPTIONS))


@pytest.mark.slow
def test_the_cli_writes_what_render_report_returns(sources, from_disk, tmp_path):
    out = make_report(sources, load_catalog(), OPTIONS, tmp_path / "report")
    assert [p.relative_to(tmp_path / "report").as_posix() for p in out.files] == list(from_disk.outputs)
    for path in out.files:
        assert path.read_bytes() == from_disk.outputs[path.relative_to(tmp_path / "report").as_posix()]


@pytest.mark.slow
def test_rewritten_documents_give_the_same_report(sources, from_disk, tmp_path):
    for i, doc in enumerate(load_documents(sources)):
        (tmp_path / f"{i}.json").write_text(dump_json(doc))
    _same(from_disk, render_report(load_documents([str(tmp_path)]), load_catalog(), OPTIONS))


@pytest.mark.slow
def test_only_the_formats_asked_for(sources):
    docs = load_documents(sources)
    assert render_report(docs, load_catalog(), OPTIONS, formats=()).outputs == {}
    assert set(render_report(docs, load_catalog(), OPTIONS, formats=("csv",)).outputs) == {"results.csv"}
    with pytest.raises(ValueError, match="unknown report formats"):
        render_report(docs, load_catalog(), OPTIONS, formats=("pdf",))
    assert set(FORMATS) == {"md", "html", "csv", "parquet"}


def test_no_documents_is_one_clear_error():
    with pytest.raises(BadInputError, match="no result documents"):
        render_report([], load_catalog(), OPTIONS)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["steps"][1]["latency_us"].update(p99="fast"),
         "field 'steps[1].latency_us.p99': must be a number, got 'fast'"),
        (lambda d: d.update(schema="accelbench.result/2"),
         "field 'schema' must be 'accelbench.result/1', got 'accelbench.result/2'"),
        (lambda d: d.pop("load_profile"), "field 'load_profile': Field required"),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_a_bad_document_is_one_line_naming_file_and_field(tmp_path, mutate, expected):
    import json
    import subprocess
    import sys

    doc = json.loads((DATA / "cpu-local" / "minilm-l6__cpu-local__int8__closed-http-b1.json").read_text())
    mutate(doc)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    proc = subprocess.run([sys.executable, "-m", "accelbench.cli", "report", str(path), "--json"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"accelbench: error: {path}: {expected}"]
