"""Progress lines: plain when not a terminal, rich on one; brackets in names are text, not markup."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from accelbench.experiment.progress import Progress, make_progress


def test_plain_lines_when_not_a_tty(capsys):
    progress = make_progress()  # pytest's stderr is not a TTY
    with progress.step("quantize", "builtin:identity cpu-local fp32") as notes:
        notes.append("PASS")
    progress.skip("load", "identity__cpu-local__fp32", "result complete")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("[quantize] builtin:identity cpu-local fp32: done (") and err[0].endswith(
        "s; PASS)"
    )
    assert err[1] == "[load] identity__cpu-local__fp32: skipped (result complete)"
    assert (progress.count("done"), progress.count("skipped"), progress.count("skipped", "quantize")) == (
        1,
        1,
        0,
    )


def test_rich_keeps_bracketed_text_and_records_failures():
    buffer = io.StringIO()
    progress = Progress(_console=Console(file=buffer, force_terminal=True, width=200))
    with pytest.raises(RuntimeError), progress.step("load", "[bold]x"):
        raise RuntimeError("boom")
    progress.note("load", "{'concurrency': 1}: 10 req/s")
    text = buffer.getvalue()
    assert "[load] [bold]x: failed after" in text and "[load] {'concurrency': 1}" in text
    assert progress.records[0].status == "failed"


def test_quiet_prints_nothing(capsys):
    progress = make_progress(quiet=True)
    with progress.step("report", "r"):
        pass
    assert capsys.readouterr().err == "" and progress.count("done", "report") == 1
