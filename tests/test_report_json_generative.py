"""``accelbench report --json`` prints the generative rows (issue 39): the rows generative.json has, marked, with
the objectives they were judged at, after the classic rows (unchanged); from the committed generative documents
(tests/data/llm/hand: four llama-tiny steps on cpu-local; tests/data/llm/tiny: a real Triton sweep)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from accelbench.cli import main
from accelbench.documents import load_result
from accelbench.reports.rows import TOKEN_COLUMNS

DATA = Path(__file__).parent / "data"
ACCELBENCH = [sys.executable, "-m", "accelbench.cli"]
HAND, TINY, CLASSIC = DATA / "llm" / "hand", DATA / "llm" / "tiny", DATA / "reports" / "cpu-local"


def _report(*args: str) -> str:
    res = CliRunner().invoke(main, ["report", *args])
    assert res.exit_code == 0, res.output
    return res.output


def test_json_has_the_generative_rows_of_generative_json(tmp_path):
    options = ["--slo-ttft-p99-ms", "2000", "--slo-tpot-p99-ms", "20", "--project", "l4"]
    rows = json.loads(_report(str(HAND), "--json", *options))
    _report(str(HAND), "--out", str(tmp_path / "rep"), *options)
    written = json.loads((tmp_path / "rep" / "generative.json").read_text())
    # measured cpu-local, then projected: the catalog's baseline (a100) and l4
    assert [(r["table"], r["target"], r["status"]) for r in rows] == [
        ("generative", "cpu-local", "measured"),
        ("generative", "a100-sxm4-80gb", "projected"),
        ("generative", "l4", "projected"),
    ]
    for row, expected in zip(rows, written["rows"], strict=True):
        assert {k: v for k, v in row.items() if not k.startswith("slo_") and k != "table"} == expected
        assert set(row) >= {c.name for c in TOKEN_COLUMNS} | {"points"}
        assert (row["slo_ttft_p99_ms"], row["slo_tpot_p99_ms"]) == (
            written["objectives"]["ttft_p99_ms"],
            written["objectives"]["tpot_p99_ms"],
        )
    measured = rows[0]
    assert (
        measured["slo_tpot_p99_ms"] == 20 and measured["slo_source"] == "--slo-ttft-p99-ms/--slo-tpot-p99-ms"
    )
    # the capacity is the fastest point meeting both objectives; the points are the four committed steps
    assert len(measured["points"]) == len(list(HAND.glob("*.json"))) == 4
    passing = [p for p in measured["points"] if p["verdict"] == "PASS"]
    assert measured["capacity_output_tokens_per_s"] == max(p["output_tps"] for p in passing)
    assert measured["capacity_concurrency"] == 4  # TPOT p99 at c = 8 is 25.5 ms > 20 (test_llm_report)


def test_json_of_a_real_sweep_gives_its_steps_measured_figures():
    (row,) = [r for r in json.loads(_report(str(TINY), "--json")) if r["status"] == "measured"]
    (doc,) = [load_result(p) for p in TINY.glob("*.json")]
    steps = {s.index: s.generative for s in doc.steps if s.generative is not None}
    assert row["table"] == "generative" and row["slo_source"] == "the workload's objectives"
    assert (row["slo_ttft_p99_ms"], row["slo_tpot_p99_ms"]) == (
        doc.load_profile.workload.slo_ttft_p99_ms,
        doc.load_profile.workload.slo_tpot_p99_ms,
    )
    for point in row["points"]:
        assert point["output_tps"] == steps[point["step_index"]].output_tokens_per_s.value


def test_classic_rows_come_first_and_unchanged_beside_generative_ones():
    classic = json.loads(_report(str(CLASSIC), "--json"))
    mixed = json.loads(_report(str(CLASSIC), str(HAND), "--json"))
    assert classic and all("table" not in r for r in classic)
    assert mixed[: len(classic)] == classic
    assert {(r["table"], r["target"], r["status"]) for r in mixed[len(classic) :]} == {
        ("generative", "cpu-local", "measured"),
        ("generative", "a100-sxm4-80gb", "projected"),
    }


def test_the_old_objective_flags_still_work_with_one_warning():
    """--slo-ttft-ms / --slo-tpot-ms were the report's names for loadtest's --slo-ttft-p99-ms / --slo-tpot-p99-ms."""
    new = subprocess.run([*ACCELBENCH, "report", str(HAND), "--json", "--slo-ttft-p99-ms", "900",
                          "--slo-tpot-p99-ms", "20"], capture_output=True, text=True, timeout=300)  # fmt: skip
    old = subprocess.run([*ACCELBENCH, "report", str(HAND), "--json", "--slo-ttft-ms", "900",
                          "--slo-tpot-ms", "20"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert new.returncode == old.returncode == 0, old.stderr
    assert old.stdout == new.stdout and new.stderr == ""
    assert old.stderr.splitlines() == [
        "warning: --slo-ttft-ms is deprecated, use --slo-ttft-p99-ms",
        "warning: --slo-tpot-ms is deprecated, use --slo-tpot-p99-ms",
    ]
    (row, *_) = json.loads(new.stdout)
    assert (row["slo_ttft_p99_ms"], row["slo_tpot_p99_ms"]) == (900, 20)
    assert row["slo_source"] == "--slo-ttft-p99-ms/--slo-tpot-p99-ms"
    both = subprocess.run([*ACCELBENCH, "report", str(HAND), "--json", "--slo-ttft-ms", "900",
                           "--slo-ttft-p99-ms", "900"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert both.returncode == 2 and "Traceback" not in both.stderr
    assert "--slo-ttft-ms is the old spelling of --slo-ttft-p99-ms" in both.stderr.splitlines()[-1]


def test_the_objectives_source_names_each_where_they_differ():
    (row, *_) = json.loads(_report(str(HAND), "--json", "--slo-tpot-p99-ms", "20"))
    assert row["slo_source"] == "TTFT p99: the workload's objectives; TPOT p99: --slo-tpot-p99-ms"
