"""Golden files: `accelbench report` over the committed results renders exactly what it rendered before.

Each case renders one set of committed result documents (tests/data/reports, bench/results/h200, tests/data/llm)
with its options, through the CLI as a user would, and compares every file against tests/data/reports/golden/
CASE/: report.md, report.html, results.csv, generative.csv/.json, compare.md/.json and the `--json` table byte
for byte, and results.parquet by content (its schema and rows: the file's bytes name the pyarrow version that
wrote it). Together the cases exercise measured, projected (published, calibrated, assumed), owned-device,
repeated, imported, generative and compared rows.

The plots are SVGs written directly (reports/svg.py, no plotting library), under plots/ and the same bytes
inline in report.html (checked), so the goldens keep them once, in report.html, compared byte for byte with
the rest of the page.

To rewrite the goldens (only for a change meant to change the report, never for a refactor):
``ACCELBENCH_UPDATE_GOLDENS=1 .venv/bin/python -m pytest tests/test_reports_golden.py``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from accelbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
GOLDEN = DATA / "reports" / "golden"
CPU_LOCAL = DATA / "reports" / "cpu-local"  # fixture documents, no step statistics
MEASURED = DATA / "reports" / "cpu-local-measured"  # recorded by the default `accelbench run`
H200 = ROOT / "bench" / "results" / "h200" / "2026-11-30" / "results"  # device check on an H200
TINY = DATA / "llm" / "tiny"  # llama-tiny through the real Triton model on cpu-local
HAND = DATA / "llm" / "hand"  # hand-written generative documents, four load levels
MINILM_INT8 = "minilm-l6__cpu-local__int8__closed-http-b1.json"
UPDATE = os.environ.get("ACCELBENCH_UPDATE_GOLDENS") == "1"
IMPORTED_AT = "2026-12-01T00:00:00+00:00"  # an import stamps the time it ran; the golden needs one fixed


# ------------------------------------------------------------------------------------------ the inputs
def _scaled(src: Path, dst: Path, factor: float) -> Path:
    """``src`` copied with the MiniLM INT8 throughput and its interval scaled by ``factor``."""
    shutil.copytree(src, dst)
    path = dst / MINILM_INT8
    doc = json.loads(path.read_text())
    for s in doc["steps"]:
        s["throughput_rps"] = s["throughput_ips"] = s["throughput_rps"] * factor
        thr = (s.get("statistics") or {}).get("throughput_rps")
        if thr:
            thr.update({k: thr[k] * factor for k in ("value", "low", "high", "se")})
    path.write_text(json.dumps(doc))
    return dst


def _scale_throughput(data: dict, scale: float) -> None:
    """Every step's throughput and its interval ×``scale``, rounded as a result document records them."""
    for step in data["steps"]:
        step["throughput_rps"] = round(step["throughput_rps"] * scale, 3)
        step["throughput_ips"] = round(step["throughput_ips"] * scale, 3)
        thr = (step.get("statistics") or {}).get("throughput_rps")
        if thr:
            thr.update({k: round(thr[k] * scale, 4) for k in ("value", "low", "high", "se")})


def _repeats(dst: Path) -> Path:
    """The recorded results with the MiniLM INT8 sweep repeated three times (throughput ×1, ×1.25, ×0.8) and
    the ResNet-50 INT8 sweep twice (×1, ×1.1): too few to estimate the between-run variance well."""
    shutil.copytree(MEASURED, dst)
    for name, scales in ((MINILM_INT8, (1.0, 1.25, 0.8)),
                         ("resnet50__cpu-local__int8__closed-http-b1.json", (1.0, 1.1))):  # fmt: skip
        first = json.loads((dst / name).read_text())
        for repeat, scale in enumerate(scales, 1):
            data = json.loads(json.dumps(first))
            if repeat > 1:
                data["run_id"] += f"__r{repeat}"
            data["load_profile"]["repeat"] = repeat
            _scale_throughput(data, scale)
            (dst / f"{data['run_id']}.json").write_text(json.dumps(data))
    # the MiniLM INT8 sweep as if run on two other targets, so the ranking compares measured rows: three
    # repeats on a10g (a Holm-corrected comparison) and a single run on l40s (no between-run variance there)
    first = json.loads((dst / MINILM_INT8).read_text())
    for target, scales in (("a10g", (2.0, 2.4, 1.7)), ("l40s", (6.0,))):
        for repeat, scale in enumerate(scales, 1):
            data = json.loads(json.dumps(first))
            data["target"] = target
            data["variant"] = f"minilm-l6__{target}__int8"
            data["run_id"] = data["variant"] + (f"__r{repeat}" if repeat > 1 else "")
            if len(scales) > 1:
                data["load_profile"]["repeat"] = repeat
            _scale_throughput(data, scale)
            (dst / f"{data['run_id']}.json").write_text(json.dumps(data))
    return dst


def _imports(dst: Path) -> Path:
    """The three committed load-generator files imported as result documents, with a fixed import time."""
    from accelbench.documents import dump_json
    from accelbench.reports.importers import import_locust, import_perf_analyzer

    reports = DATA / "reports"
    docs = [
        import_perf_analyzer(str(reports / "perf_analyzer_verbose_l4_handwritten.csv"), "l4", "minilm-l6", "int8", 1),
        import_perf_analyzer(str(reports / "perf_analyzer_minilm_int8_cpu.csv"), "cpu-local", "minilm-l6", "int8", 1),
        import_locust(str(reports / "locust_minilm_int8_cpu_stats.csv"), "cpu-local", "minilm-l6", "fp32", 1, 4),
    ]  # fmt: skip
    dst.mkdir(parents=True)
    for i, doc in enumerate(docs):
        data = json.loads(dump_json(doc))
        data["provenance"]["created_at"] = IMPORTED_AT
        (dst / f"import-{i}.json").write_text(json.dumps(data, sort_keys=True))
    # and one result that names no target: left out of the table, with a line in the settings
    data = json.loads((CPU_LOCAL / MINILM_INT8).read_text())
    data["target"] = None
    (dst / "no-target.json").write_text(json.dumps(data))
    return dst


PROJECT_CLASSIC = "l4,l40s,jetson-agx-orin-64gb,inf2-xlarge"
PROJECT_LLM = "l4,a100-sxm4-80gb,h100-sxm,inf2-xlarge,jetson-agx-orin-64gb"

# case → (the inputs: committed folders, or a function that writes derived ones under a folder; the options)
REPORTS = {
    "fixtures": ([CPU_LOCAL], ["--slo-p99-ms", "100", "--project", PROJECT_CLASSIC, "--target-qps", "500"]),
    "measured": ([MEASURED], ["--project", "a100-sxm4-80gb,h100-sxm", "--project", "jetson-agx-orin-64gb",
                              "--amortization-years", "4", "--usd-per-kwh", "0.2", "--target-qps", "40"]),
    "measured-p95": ([MEASURED], ["--percentile", "95", "--slo-p99-ms", "50", "--price-basis", "spot",
                                  "--project", "t4"]),
    "h200": ([H200], ["--project", "l4,h100-sxm,a100-sxm4-80gb", "--price-basis", "reserved",
                      "--target-qps", "2000", "--headroom", "0.5"]),
    "repeats": (_repeats, ["--slo-p99-ms", "100", "--project", "l4"]),
    "imports": (_imports, ["--slo-p99-ms", "60", "--baseline", "l4", "--price", "cpu-local=0.05",
                           "--include-failed", "--max-error-rate", "0.05"]),
    "generative-tiny": ([TINY], ["--min-tokens-per-user", "10", "--project", PROJECT_LLM, "--target-tokens-per-s",
                                 "1000", "--fit-model", "llama-3.1-8b", "--context", "8192"]),
    "generative-mixed": ([HAND, CPU_LOCAL], ["--min-tokens-per-user", "100", "--slo-tpot-p99-ms", "20",
                                             "--project", "l4", "--slo-p99-ms", "100"]),
}  # fmt: skip


def _inputs(spec, tmp: Path) -> list[str]:
    return [str(p) for p in spec] if isinstance(spec, list) else [str(spec(tmp / "in"))]


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


# ---------------------------------------------------------------------------------------- what we compare
def _parquet_content(path: Path) -> str:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    schema = [[f.name, str(f.type)] for f in table.schema]
    return json.dumps({"schema": schema, "rows": table.to_pylist()}, indent=1, sort_keys=True) + "\n"


def _outputs(out: Path) -> dict[str, bytes]:
    """The files of a report folder as compared: results.parquet by its content, each plot by its name (its
    bytes are inline in report.html, checked here and compared there), everything else as written."""
    files, plots = {}, []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        name = path.relative_to(out).as_posix()
        if name == "results.parquet":
            files["results.parquet.json"] = _parquet_content(path).encode()
        elif name.startswith("plots/") and name.endswith(".svg"):
            assert path.read_text().strip() in (out / "report.html").read_text(), (
                f"{name} is not in report.html"
            )
            plots.append(name)
        else:
            files[name] = path.read_bytes()
    if plots:
        files["plots.txt"] = "".join(f"{name}\n" for name in plots).encode()
    return files


def _check(case: str, files: dict[str, bytes]) -> None:
    """``files`` against the case's goldens: the same names, the same bytes."""
    folder = GOLDEN / case
    if UPDATE:
        shutil.rmtree(folder, ignore_errors=True)
        for name, data in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        return
    expected = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert sorted(files) == sorted(expected), f"{case}: the report's files changed"
    for name in sorted(files):
        assert files[name] == expected[name], (
            f"{case}/{name} differs from its golden (tests/data/reports/golden/{case}/{name})"
        )


# ------------------------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("case", sorted(REPORTS))
def test_report_matches_its_golden_files(case, tmp_path):
    spec, options = REPORTS[case]
    inputs = _inputs(spec, tmp_path)
    out = tmp_path / "report"
    _run("report", *inputs, *options, "--out", str(out))
    files = _outputs(out)
    files["table.json"] = _run("report", *inputs, *options, "--json").encode()
    _check(case, files)


def test_compare_matches_its_golden_files(tmp_path):
    """A regression far beyond the host's noise floor, one inside it, and a comparison against five earlier
    runs (--history): compare.md, compare.json and what --json prints."""
    from accelbench.reports.noise import floor_for

    far = math.exp(-6 * floor_for("cpu-local").sd_log_capacity)
    _scaled(MEASURED, tmp_path / "far", far)
    _scaled(MEASURED, tmp_path / "near", 0.97)
    for i, factor in enumerate((0.9, 0.95, 0.98, 1.05, 1.1)):
        _scaled(MEASURED, tmp_path / "history" / f"run-{i}", factor)
    files: dict[str, bytes] = {}
    for name, new, extra in (("far", "far", ()), ("near", "near", ()),
                             ("history", "near", ("--history", str(tmp_path / "history"))),
                             ("fixtures", None, ())):  # fmt: skip
        old = str(CPU_LOCAL if new is None else MEASURED)
        new_path = str(CPU_LOCAL if new is None else tmp_path / new)
        out = tmp_path / f"cmp-{name}"
        printed = _run("report", "--compare", old, new_path, *extra, "--out", str(out))
        assert printed.encode() == (out / "compare.md").read_bytes()
        files[f"{name}/compare.md"] = (out / "compare.md").read_bytes()
        files[f"{name}/compare.json"] = (out / "compare.json").read_bytes()
        files[f"{name}/stdout.json"] = _run("report", "--compare", old, new_path, *extra, "--json").encode()
    _check("compare", files)
