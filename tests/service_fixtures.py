"""Fixtures for the results service: a real PostgreSQL per test session, database URLs for SQLite and
PostgreSQL, and the real ``accelbench server`` in a subprocess on a free loopback port.

    postgres_url        session: a throwaway PostgreSQL 15 cluster (initdb/pg_ctl), a base URL without a db
    db_url              function, parametrized ["sqlite", "postgresql"]: a fresh, empty database URL
    live_server         module, parametrized the same way: (base_url, admin_token, db_url) of a running server
    start_server(...)   helper: start/stop a server yourself (restart tests, --public-read)

PostgreSQL is skipped, saying why, when its binaries are missing, unless ACCELBENCH_REQUIRE_POSTGRES=1 (set
by .ci/run), where that is a failure.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ACCELBENCH = str(Path(sys.executable).parent / "accelbench")
DB_KINDS = ["sqlite", "postgresql"]


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    from accelbench.serving.server import free_port

    return free_port()


def _as_postgres(cmd: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root: run its binaries as the postgres user
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """postgresql+psycopg://postgres@127.0.0.1:PORT — a cluster of its own, stopped (immediate) at the end."""
    bindir = _pg_bin()
    if bindir is None:
        if os.environ.get("ACCELBENCH_REQUIRE_POSTGRES"):
            pytest.fail("ACCELBENCH_REQUIRE_POSTGRES is set but no /usr/lib/postgresql/*/bin/initdb exists")
        pytest.skip(
            "PostgreSQL server binaries missing (apt-get install -y postgresql; .ci/run installs them)"
        )
    base = Path(tempfile.mkdtemp(prefix="accelbench-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    subprocess.run(_as_postgres([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                                 "-E", "UTF8", "--no-sync"]), check=True, capture_output=True, env=env)  # fmt: skip
    opts = f"-k {sock} -h 127.0.0.1 -p {port} -c fsync=off -c max_connections=200"
    try:
        subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-w", "-t", "60",
                                     "-l", str(base / "log"), "start"]), check=True, capture_output=True, env=env)  # fmt: skip
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                       capture_output=True, env=env)  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)


def new_database(kind: str, request: pytest.FixtureRequest, tmp_dir: Path) -> str:
    """A fresh empty database of ``kind``: an SQLite file, or a new database in the session's cluster."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_dir / f'results-{uuid.uuid4().hex[:8]}.db'}"
    base = request.getfixturevalue("postgres_url")
    name = f"t_{uuid.uuid4().hex[:12]}"
    import psycopg

    with psycopg.connect(
        base.replace("postgresql+psycopg", "postgresql") + "/postgres", autocommit=True
    ) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{base}/{name}"


@pytest.fixture(params=DB_KINDS)
def db_url(request, tmp_path) -> str:
    return new_database(request.param, request, tmp_path)


def create_token(db: str, scope: str = "admin", name: str = "test") -> str:
    """What `accelbench token create` does, in this process: no interpreter start and service imports per
    server (seconds each on a loaded 2-core machine); the command itself is tested in test_service_cli."""
    from accelbench.service.auth import create_token as create
    from accelbench.service.db import open_database, session_scope

    engine = open_database(db)
    try:
        with session_scope(engine) as session:
            return create(session, name, scope)
    finally:
        engine.dispose()


@dataclass
class RunningServer:
    base_url: str
    token: str  # admin
    db_url: str
    proc: subprocess.Popen
    log: Path

    def kill(self, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)


def start_server(db: str, log_dir: Path, *extra: str, token: str | None = None,
                 descriptors: int | None = None) -> RunningServer:  # fmt: skip
    """Start ``accelbench server --db DB --port FREE`` (own process group) and wait for /api/v1/health;
    ``descriptors``: the server's soft and hard RLIMIT_NOFILE (a service manager's 1,024, say)."""
    import resource

    import httpx

    def limit() -> None:
        if descriptors is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

    token = token or create_token(db)
    port = _free_port()
    log = log_dir / f"server-{port}.log"
    cmd = [ACCELBENCH, "server", "--db", db, "--port", str(port), *extra]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=limit
        )
    server = RunningServer(f"http://127.0.0.1:{port}", token, db, proc, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(server.base_url + "/api/v1/health", timeout=2).status_code == 200:
                return server
        time.sleep(0.1)
    server.kill()
    raise AssertionError(f"server did not answer in 60 s: {log.read_text()[-2000:]}")


@contextlib.contextmanager
def running_server(db: str, log_dir: Path, *extra: str, token: str | None = None,
                   descriptors: int | None = None) -> Iterator[RunningServer]:  # fmt: skip
    server = start_server(db, log_dir, *extra, token=token, descriptors=descriptors)
    try:
        yield server
    finally:
        server.kill(signal.SIGTERM)
        if server.proc.poll() is None:
            server.kill()


@pytest.fixture(scope="module", params=DB_KINDS)
def live_server(request, tmp_path_factory) -> Iterator[RunningServer]:
    """One real server per test module and database kind, with an admin token."""
    tmp = tmp_path_factory.mktemp(f"server-{request.param}")
    with running_server(new_database(request.param, request, tmp), tmp) as server:
        yield server
