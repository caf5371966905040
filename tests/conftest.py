"""Fixtures shared by several test files, and the two test tiers.

``make test-fast`` runs ``pytest -m "not slow" -n 2``: every test that starts a server (tritonserver, ``accelbench
server``, the reference/SSE test servers), PostgreSQL or Locust is marked ``slow``, explicitly or here by the
fixtures it uses. A test not marked slow that starts one anyway fails, naming what it started
(``tests/fast_tier_guard/``), in either tier.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ACCELBENCH = str(Path(sys.executable).parent / "accelbench")
IDENTITY_MODEL = "identity__cpu-local__fp32"
ROOT = Path(__file__).resolve().parents[1]


def _quantize(out: Path, *args: str) -> str:
    """``accelbench quantize ARGS --out OUT`` through the real CLI; its stdout. Through the interpreter, not the
    console script: the GPU machine runs some of the tests that use these without installing accelbench."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    cmd = [sys.executable, "-m", "accelbench.cli", "quantize", *args, "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# Variants several modules make the same way, made once per run: a test reads them and never writes into them
# (a test that needs to change one copies it, or quantizes into its own folder).
@pytest.fixture(scope="session")
def identity_variants(tmp_path_factory) -> Path:
    """The folder holding builtin:identity's FP32 cpu-local variant (``IDENTITY_MODEL``), made through the CLI."""
    variants = tmp_path_factory.mktemp("variants")
    _quantize(variants, "builtin:identity", "--target", "cpu-local", "--precision", "fp32")
    return variants


@pytest.fixture(scope="session")
def minilm_c7i_variants(tmp_path_factory) -> tuple[Path, str]:
    """builtin:minilm-l6 for c7i.xlarge at the target's default precision (INT8, with its FP32 reference):
    the folder and the command's stdout."""
    out = tmp_path_factory.mktemp("minilm-c7i")
    return out, _quantize(out, "builtin:minilm-l6", "--target", "c7i.xlarge")


@pytest.fixture(scope="session")
def identity_repo(identity_variants, tmp_path_factory) -> Path:
    """A local-flavour Triton repository with builtin:identity (FP32, cpu-local), made through the real CLI."""
    from accelbench.serving.repository import write_repository

    repo = tmp_path_factory.mktemp("repo")
    write_repository([identity_variants / IDENTITY_MODEL], repo, "local")
    return repo


# Every process a test starts inherits this mark, one value per pytest process (each xdist worker, and `make test`'s
# side session): tests/test_processes_sigkill.py tells another session's process of the same command line (its
# `accelbench.watchdog`, say) from a leftover of its own. A rehearsal's side session once had a watchdog running
# while a worker's SIGKILL test looked, unmarked, so it was counted as left behind.
SIGKILL_MARK = "ACCELBENCH_SIGKILL_TEST_WORKER"
os.environ[SIGKILL_MARK] = f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{os.getpid()}"

# Fixtures that start a server or a database: a test that uses one is slow.
SLOW_FIXTURES = {"postgres_url", "live_server"}
GUARD_DIR = Path(__file__).parent / "fast_tier_guard"
_spec = importlib.util.spec_from_file_location("fast_tier_guard", GUARD_DIR / "sitecustomize.py")
guard = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(guard)
GUARD_LOG = Path(tempfile.gettempdir()) / f"accelbench-fast-guard-{os.getpid()}.log"


# The modules that take longest under `make test`, longest first (the "time by phase and module" section a run
# prints; docs/testing.md). `make test` hands whole modules to its two workers in collection order
# (--no-loadscope-reorder: xdist's own order, most tests first, put these few-test modules last), so the long
# ones start first and the run ends on short modules, with neither worker idle waiting for the other's last one.
# A module not listed keeps its place after them; a stale list costs time, never a test.
LONGEST_FIRST = (
    "test_vllm_live",  # two vLLM starts at once (its OpenAI server, `accelbench run` through Triton)
    "test_corpus",
    "test_network_bed",  # issue 50: 290-310 s
    "test_loadtests_live",
    "test_llm_reference",
    "test_campaign_agents",
    "test_llm_workloads_live",
    "test_device_triton",
    "test_campaigns_api",
    "test_processes_sigkill",
    "test_experiment_pipeline",
    "test_serving_torch",
    "test_loadtests_served",
    "test_llm_loadgen_triton",
    "test_export_hf",
    "test_loadtests_distributed",
    "test_install_fresh_env",
    "test_campaign_multihost",
)


def _longest_first(items: list[pytest.Item]) -> None:
    rank = {f"tests/{name}.py": i for i, name in enumerate(LONGEST_FIRST)}
    place = {item: i for i, item in enumerate(items)}
    items.sort(key=lambda item: (rank.get(item.nodeid.split("::")[0], len(rank)), place[item]))


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _longest_first(items)
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec is not None and callspec.params.get("db_url") == "postgresql"
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or on_postgres:
            item.add_marker(pytest.mark.slow)


@contextlib.contextmanager
def _fast_guard(item: pytest.Item) -> Iterator[None]:
    """Refuse servers, databases and Locust to a test not marked slow, here and in its Python children."""
    if item.get_closest_marker("slow"):
        yield
        return
    GUARD_LOG.write_text("")
    env = {guard.LOG_ENV: str(GUARD_LOG), guard.TEST_ENV: item.nodeid,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(GUARD_DIR), os.environ.get("PYTHONPATH")]))}  # fmt: skip
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    guard.turn_on(str(GUARD_LOG))
    try:
        yield
    finally:
        guard.turn_off()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        refused = GUARD_LOG.read_text().strip()
        if refused:
            message = f"not marked slow but started a server, a database or Locust:\n{refused}"
            raise pytest.fail.Exception(message, pytrace=False) from None  # the refusal, not what it caused


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    with _fast_guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    with _fast_guard(item):
        return (yield)


def pytest_unconfigure() -> None:
    GUARD_LOG.unlink(missing_ok=True)


def pytest_terminal_summary(terminalreporter) -> None:
    """Where the time went (docs/testing.md keeps the table): setup/call/teardown shares, slowest modules."""
    phases: dict[str, float] = {"setup": 0.0, "call": 0.0, "teardown": 0.0}
    modules: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            when, duration = getattr(report, "when", None), getattr(report, "duration", 0.0)
            if when in phases:
                phases[when] += duration
                module = report.nodeid.split("::")[0]
                modules[module] = modules.get(module, 0.0) + duration
    total = sum(phases.values())
    if total < 60:  # a few tests: nothing to say
        return
    terminalreporter.section("time by phase and module")
    shares = ", ".join(f"{k} {v:.0f} s ({v / total:.0%})" for k, v in phases.items())
    terminalreporter.write_line(f"{total:.0f} s in tests: {shares}")
    for module, seconds in sorted(modules.items(), key=lambda kv: -kv[1])[:20]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {module}")
    _per_worker(terminalreporter)


def _per_worker(terminalreporter) -> None:
    """Under xdist: each worker's time in tests and how long before the last test it ran out of work."""
    busy: dict[str, float] = {}
    ended: dict[str, float] = {}
    began = float("inf")
    for reports in terminalreporter.stats.values():
        for report in reports:
            node, stop = getattr(report, "node", None), getattr(report, "stop", 0.0)
            if node is None or getattr(report, "when", None) is None or not stop:
                continue
            worker = node.gateway.id
            busy[worker] = busy.get(worker, 0.0) + report.duration
            ended[worker] = max(ended.get(worker, 0.0), stop)
            began = min(began, report.start)
    if len(busy) < 2:
        return
    last = max(ended.values())
    terminalreporter.write_line(f"workers: first test to last {last - began:.0f} s")
    for worker in sorted(busy):
        idle = last - ended[worker]
        terminalreporter.write_line(
            f"  {worker}: {busy[worker]:.0f} s in tests, out of work {idle:.0f} s before the end"
        )


from service_fixtures import db_url, live_server, postgres_url  # noqa: E402,F401
