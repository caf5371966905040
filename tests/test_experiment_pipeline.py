"""`accelbench run` end to end on builtin:identity: real quantize, real tritonserver, real Locust, real report.

A second run must redo nothing (every stage skipped) and leave the report byte-identical; an interrupt in the
middle of the load stage must leave no tritonserver behind.
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from accelbench.cli import main
from accelbench.errors import ToolchainMissingError
from accelbench.experiment.pipeline import run_experiment
from accelbench.experiment.progress import Progress
from accelbench.experiment.spec import parse_spec

SPEC = """
name = "identity-smoke"
[[models]]
uri = "builtin:identity"
precisions = ["fp32"]
[[targets]]
id = "cpu-local"
mode = "local"
[[targets]]
id = "l4"
mode = "project"
[load]
levels = [1, 2]
duration_s = 1.5
warmup_s = 0.5
[slo]
latency_ms = 50
"""


def _tritonservers_serving(folder: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if "tritonserver" in cmd and str(folder) in cmd:
            found.append(proc)
    return found


@pytest.mark.slow
def test_run_then_rerun_redoes_nothing_and_gives_the_same_report(tmp_path):
    spec = parse_spec(SPEC, "smoke.toml")
    first = Progress(quiet=True)
    started = time.monotonic()
    outcome = run_experiment(spec, out_dir=tmp_path / "out", progress=first)
    first_s = time.monotonic() - started
    report = outcome.report_path
    assert report == tmp_path / "out" / "report" / "report.md" and report.is_file()
    assert {r.stage for r in first.records if r.status == "done"} >= {
        "quantize",
        "repository",
        "serve",
        "load",
        "report",
    }
    results = sorted((tmp_path / "out" / "results").glob("*.json"))
    assert [p.name for p in results] == ["identity__cpu-local__fp32__closed-http-b1.json"]
    text = report.read_text()
    assert "cpu-local" in text and "l4" in text and "a100-sxm4-80gb" in text  # measured, projected, baseline
    before = {p: p.read_bytes() for p in (tmp_path / "out" / "report").rglob("*") if p.is_file()}
    assert not _tritonservers_serving(tmp_path)

    second = Progress(quiet=True)
    started = time.monotonic()
    run_experiment(spec, out_dir=tmp_path / "out", progress=second)
    second_s = time.monotonic() - started
    assert second.count("done") == 0, [r for r in second.records if r.status == "done"]
    assert {r.stage for r in second.records if r.status == "skipped"} == {"quantize", "load", "report"}
    after = {p: p.read_bytes() for p in (tmp_path / "out" / "report").rglob("*") if p.is_file()}
    assert after == before
    print(f"first run {first_s:.1f} s, second run {second_s:.2f} s")  # figures for the note, not asserted

    # re-rendering from the same results (report folder removed) gives the same files too
    for path in before:
        if path.name != ".inputs.sha256":
            path.unlink()
    third = Progress(quiet=True)
    run_experiment(spec, out_dir=tmp_path / "out", progress=third)
    assert [r.stage for r in third.records if r.status == "done"] == ["report"]
    assert {p: p.read_bytes() for p in before} == before

    # a changed load profile re-measures; the variant is still reused
    fourth = Progress(quiet=True)
    changed = parse_spec(SPEC.replace("levels = [1, 2]", "levels = [1]"), "smoke.toml")
    run_experiment(changed, out_dir=tmp_path / "out", progress=fourth)
    assert fourth.count("skipped", "quantize") == 1 and fourth.count("done", "load") == 1
    assert not _tritonservers_serving(tmp_path)


@pytest.mark.slow
def test_interrupt_during_load_leaves_no_tritonserver(tmp_path, monkeypatch):
    import accelbench.loadtests.sweep as sweep

    seen: list[int] = []

    def interrupted(**kwargs):
        seen.extend(p.pid for p in _tritonservers_serving(tmp_path))
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_sweep", interrupted)
    progress = Progress(quiet=True)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(parse_spec(SPEC, "smoke.toml"), out_dir=tmp_path / "out", progress=progress)
    assert len(seen) == 1  # the server was up when the interrupt came
    assert not psutil.pid_exists(seen[0]) or psutil.Process(seen[0]).status() == psutil.STATUS_ZOMBIE
    assert not _tritonservers_serving(tmp_path)
    # what finished is kept: the variant is reused by the next run
    assert (tmp_path / "out" / "variants" / "identity__cpu-local__fp32" / "manifest.json").is_file()
    assert progress.count("failed", "load") == 1
    assert (tmp_path / "out" / "run.json").is_file()


def test_local_mode_on_hardware_this_host_is_not(tmp_path):
    spec = parse_spec(SPEC.replace('id = "l4"\nmode = "project"', 'id = "l4"\nmode = "local"'), "smoke.toml")
    with pytest.raises(
        ToolchainMissingError, match="target l4 has mode 'local' but this host cannot run tensorrt"
    ):
        run_experiment(spec, out_dir=tmp_path / "out")


def test_cli_errors_are_one_line(tmp_path):
    spec = tmp_path / "smoke.toml"
    spec.write_text(SPEC)
    unknown = CliRunner().invoke(main, ["run", str(spec), "--target", "h100-sxm"])
    assert unknown.exit_code == 2 and "not in this spec" in unknown.output
    missing = CliRunner().invoke(main, ["run", str(tmp_path / "nope.toml")])
    assert missing.exit_code == 2 and "spec file not found" in missing.output
    bad_target = tmp_path / "bad.toml"
    bad_target.write_text(SPEC.replace('id = "l4"', 'id = "l5"'))
    result = CliRunner().invoke(main, ["run", str(bad_target)])
    assert result.exit_code == 2 and "targets[1].id" in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_two_load_processes_merge_into_one_result(tmp_path):
    """The spec's `processes = 2`: a Locust master with two worker processes on this host, merged exactly."""
    import json

    spec = parse_spec(SPEC.replace("levels = [1, 2]", "levels = [2]\nprocesses = 2"), "smoke.toml")
    run_experiment(spec, out_dir=tmp_path / "out")
    doc = json.loads(
        (tmp_path / "out" / "results" / "identity__cpu-local__fp32__closed-http-b1.json").read_text()
    )
    step = doc["steps"][0]
    assert doc["load_profile"]["processes"] == 2 and step["loadgen"]["processes"] == 2
    assert step["requests"] > 0 and step["errors"] == {
        "connection": 0,
        "timeout": 0,
        "server": 0,
        "wrong_output": 0,
    }
    # the workers' histograms are merged on the master: one count, equal to the server's own count
    assert step["server_stats"]["success_count"] == step["requests"]
    assert not _tritonservers_serving(tmp_path)


@pytest.mark.slow
def test_url_mode_measures_a_running_triton(tmp_path):
    """mode "url": the variants are made for the target, a Triton someone else runs serves them, run measures."""
    import json

    from accelbench.models.quantize import QuantizeRequest, quantize
    from accelbench.serving.repository import write_repository
    from accelbench.serving.server import LocalTriton

    out = tmp_path / "out"
    manifests = quantize(QuantizeRequest("builtin:identity", "c7i.large", "fp32", out_dir=out / "variants"))
    write_repository([out / "variants" / m.name for m in manifests], tmp_path / "their-repo", "local")
    with LocalTriton(tmp_path / "their-repo") as theirs:
        spec = parse_spec(
            SPEC.replace(
                'id = "cpu-local"\nmode = "local"',
                f'id = "c7i.large"\nmode = "url"\nurl = "{theirs.http_url}"',
            ),
            "smoke.toml",
        )
        progress = Progress(quiet=True)
        run_experiment(spec, out_dir=out, progress=progress)
    assert not (out / "repository").exists()  # nothing served by us
    doc = json.loads((out / "results" / "identity__c7i-large__fp32__closed-http-b1.json").read_text())
    assert doc["provenance"]["server"]["url"] == theirs.http_url
    assert [s["offered"]["concurrency"] for s in doc["steps"]] == [1, 2]


@pytest.mark.slow
def test_run_with_repeats_measures_each_repeat_and_reports_one_row(tmp_path):
    out = tmp_path / "out"
    spec = tmp_path / "smoke.toml"
    spec.write_text(
        SPEC.replace("levels = [1, 2]", "levels = [1]").replace("duration_s = 1.5", "duration_s = 1")
    )
    result = CliRunner().invoke(main, ["run", str(spec), "--out", str(out), "--quiet", "--repeats", "2"])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in (out / "results").glob("*.json"))
    assert names == ["identity__cpu-local__fp32__closed-http-b1.json",
                     "identity__cpu-local__fp32__closed-http-b1__r2.json"]  # fmt: skip
    report = (out / "report" / "report.md").read_text()
    # one cpu-local row from both runs; on a busy shared host a run may be INVALID (drift), and the note
    # then says so ("1 of 2 runs ..."), otherwise "mean of 2 runs"
    rows = [
        line
        for line in report.splitlines()
        if line.startswith("| ") and "| cpu-local | fp32 | measured |" in line
    ]
    assert len(rows) == 1 and "of 2 runs" in rows[0], report
    assert not _tritonservers_serving(tmp_path)
