"""Regression tests from the acceptance audit: bad input a user plausibly gives ends in one line, not silence."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CPU_LOCAL = Path(__file__).parent / "data" / "reports" / "cpu-local"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelbench.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)  # fmt: skip


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelbench: error:"), proc.stderr
    return lines[0]


@pytest.mark.slow
def test_report_price_override_for_an_unknown_target_is_an_error(tmp_path):
    # A misspelt id used to be ignored silently, so the report priced the target from the catalog.
    proc = cli("report", str(CPU_LOCAL), "--price", "cpu-locl=0.05", "--json", cwd=tmp_path)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "unknown target 'cpu-locl'" in line and "cpu-local" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--zzbogus"], "No such option '--zzbogus' (see '"),
        (["nocommand"], "No such command 'nocommand'"),
        (["targets", "show"], "Missing argument 'ID' (see "),
        (["models", "inspect", "builtin:identity", "--batch", "0"], "Invalid value for '--batch'"),
        (
            ["quantize", "builtin:identity", "--target", "c7i.large", "--precision", "int3"],
            "'int3' is not one of",
        ),
        (["report"], "give one or more result files"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(tmp_path, args, expected):
    # click's own Usage/Try/Error block was 3-4 lines; the contract is one line on stderr.
    proc = cli(*args, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert expected in one_error_line(proc)


def test_bare_group_still_prints_its_help(tmp_path):
    proc = cli("models", cwd=tmp_path)
    assert "inspect" in proc.stderr + proc.stdout and "accelbench: error" not in proc.stderr


@pytest.mark.slow
def test_compare_with_results_lacking_graph_cost_flags_no_false_regression(tmp_path):
    # perf_analyzer imports carry no graph_cost, so NEW cannot project the A100 baseline; that used to be
    # flagged "REGRESSION: no longer meets the SLO" although nothing was measured worse.
    new = tmp_path / "new"
    pa = Path(__file__).parent / "data" / "reports" / "perf_analyzer_verbose_l4_handwritten.csv"
    imported = cli("import", "perf-analyzer", str(pa), "--target", "l4", "--model", "minilm-l6",
                   "--precision", "int8", "--out", str(new), cwd=tmp_path)  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    proc = cli("report", "--compare", str(CPU_LOCAL), str(new), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    a100 = [r for r in rows if r["target"] == "a100-sxm4-80gb" and r["model"] == "minilm-l6"]
    assert a100 and not any(r["regression"] for r in a100)


def test_unknown_target_suggests_ids_starting_with_what_was_typed(tmp_path):
    # "a100" used to suggest a10g and h100-sxm (nearest spelling) but no A100.
    proc = cli("targets", "show", "a100", cwd=tmp_path)
    assert proc.returncode == 2
    assert "did you mean a100-sxm4-80gb, a100-sxm4-40gb" in one_error_line(proc)


@pytest.mark.parametrize("port", ["99999", "-1", "0"])
def test_serve_port_out_of_range_is_one_line(tmp_path, port):
    # --http-port 99999 used to reach socket.bind: OverflowError traceback.
    repo = tmp_path / "repo"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text('name: "m"\\nbackend: "python"\\n')
    proc = cli("serve", str(repo), "--http-port", port, cwd=tmp_path)
    assert proc.returncode == 2
    assert "--http-port" in one_error_line(proc)


def test_run_progress_says_why_a_step_is_invalid():
    # `accelbench run` printed a bare "INVALID" per step; `accelbench loadtest` already gave the reason.
    from accelbench.documents import Step
    from accelbench.experiment.progress import step_note

    step = {"index": 0, "offered": {"concurrency": 2}, "throughput_rps": 43.1, "latency_us": {"p99": 66687},
            "verdict": "INVALID", "reasons": ["unstable: the last 3 windows differ by more than 10%"]}  # fmt: skip
    note = step_note(Step.model_validate(step))
    assert note.endswith(
        "concurrency 2: 43.1 req/s, p99 66687 µs, INVALID (unstable: the last 3 windows differ by more than 10%)"
    )
    assert step_note(Step.model_validate({**step, "verdict": "VALID", "reasons": []})).endswith(
        "p99 66687 µs, VALID"
    )
