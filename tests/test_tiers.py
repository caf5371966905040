"""The two test tiers (tests/conftest.py): which tests the conftest marks slow, and what the fast tier's guard
refuses to a test not marked slow, in the test's own process and in its Python children."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest
from conftest import guard

PYTHON = sys.executable
ACCELBENCH = str(Path(PYTHON).parent / "accelbench")


@pytest.mark.parametrize(
    ("argv", "refused"),
    [
        (["/opt/x/tritonserver", "--model-repository=/r"], "tritonserver"),
        (["runuser", "-u", "postgres", "--", "/usr/lib/postgresql/15/bin/initdb", "-D", "d"], "PostgreSQL"),
        (["/usr/lib/postgresql/15/bin/pg_ctl", "-D", "d", "start"], "PostgreSQL"),
        ([PYTHON, "-m", "accelbench.loadtests.runner", "--events"], "Locust (the sweep's runner child)"),
        (
            [PYTHON, "-m", "accelbench.loadtests.reference_server", "--port", "1"],
            "the reference OpenAI server",
        ),
        ([PYTHON, "tests/openai_sse_server.py", "--port", "1"], "the SSE test server"),
        ([ACCELBENCH, "server", "--db", "sqlite:///x.db"], "the results server (accelbench server)"),
        ([PYTHON, "-m", "accelbench.cli", "server"], "the results server (accelbench server)"),
        (["/bin/sh", "-c", "exec tritonserver --help"], "tritonserver"),
        ("locust -f x.py", "Locust"),
        ([ACCELBENCH, "quantize", "builtin:identity", "--target", "cpu-local"], None),
        ([ACCELBENCH, "--help"], None),
        (["runuser", "-u", "postgres", "--", "psql", "-c", "select 1"], None),
        (["timeout", "60", "tritonserver"], "tritonserver"),
        ([PYTHON, "-c", "pass"], None),
        ([PYTHON, "-m", "accelbench.watchdog"], None),
    ],
)
def test_what_the_guard_refuses(argv, refused):
    assert guard.offence(argv) == refused


def test_the_guard_refuses_in_this_process_and_records_it(tmp_path):
    log = tmp_path / "refused.log"
    kept = guard._log_path  # on: this test is not slow; its refusals go to the conftest's log
    guard.turn_on(str(log))
    try:
        with pytest.raises(guard.SlowProcessRefused, match="started tritonserver"):
            subprocess.run(["tritonserver", "--help"], check=False)
    finally:
        guard.turn_on(kept)
    assert "started tritonserver (tritonserver --help)" in log.read_text()


def test_a_python_child_carries_the_guard(tmp_path):
    log = tmp_path / "refused.log"
    env = {
        **os.environ,
        guard.LOG_ENV: str(log),
        guard.TEST_ENV: "the-test",
        "PYTHONPATH": str(conftest.GUARD_DIR),
    }
    code = "import subprocess; subprocess.run(['tritonserver', '--help'])"
    run = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "SlowProcessRefused" in run.stderr, run.stderr
    assert log.read_text() == "the-test started tritonserver (tritonserver --help)\n"


class FakeItem:
    def __init__(
        self, fixtures: list[str], params: dict | None = None, nodeid: str = "tests/test_x.py::t"
    ) -> None:
        self.fixturenames = fixtures
        self.nodeid = nodeid
        if params is not None:
            self.callspec = SimpleNamespace(params=params)
        self.marks: list[str] = []

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark.name)


def test_the_longest_modules_go_first_and_the_rest_keep_their_order():
    names = ["tests/test_a.py::t1", "tests/test_llm_reference.py::t1", "tests/test_b.py::t1",
             "tests/test_corpus.py::t1", "tests/test_llm_reference.py::t2", "tests/test_a.py::t2"]  # fmt: skip
    items = [FakeItem([], nodeid=name) for name in names]
    conftest._longest_first(items)
    assert [item.nodeid for item in items] == [
        "tests/test_corpus.py::t1", "tests/test_llm_reference.py::t1", "tests/test_llm_reference.py::t2",
        "tests/test_a.py::t1", "tests/test_b.py::t1", "tests/test_a.py::t2"]  # fmt: skip


def test_every_longest_first_module_exists():
    here = Path(__file__).parent
    assert [name for name in conftest.LONGEST_FIRST if not (here / f"{name}.py").is_file()] == []


def test_make_test_keeps_the_collection_order():
    assert "--no-loadscope-reorder" in (Path(__file__).parent.parent / "Makefile").read_text()


def test_tests_on_a_server_or_postgresql_fixture_are_marked_slow():
    items = [FakeItem(["live_server", "tmp_path"]), FakeItem(["postgres_url"]),
             FakeItem(["db_url"], {"db_url": "postgresql"}), FakeItem(["db_url"], {"db_url": "sqlite"}),
             FakeItem(["tmp_path"])]  # fmt: skip
    conftest.pytest_collection_modifyitems(items)
    assert [item.marks for item in items] == [["slow"], ["slow"], ["slow"], [], []]


def test_the_modules_beside_the_workers_exist_and_run_once():
    """`make test` runs the waiting modules (SIDE_TESTS) in a session of their own beside the two workers, and
    leaves them out of the workers' session: each exists, and each is in both lists (run there, ignored here)."""
    makefile = (Path(__file__).parent.parent / "Makefile").read_text()
    (line,) = [x for x in makefile.replace("\\\n", " ").splitlines() if x.startswith("SIDE_TESTS")]
    side = line.split(":=", 1)[1].split()
    assert side and all((Path(__file__).parent.parent / p).is_file() for p in side), side
    assert "$(addprefix --ignore=,$(SIDE_TESTS))" in makefile and "$(SIDE_TESTS) > $(SIDE_LOG)" in makefile
