"""The service's commands on the real thing: `accelbench server` lifecycle and bad options, `accelbench push`
against a server that is down (files untouched, one line, non-zero) and one that is up, `accelbench token`,
and SIGKILL during a push losing nothing that was acknowledged."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from service_fixtures import ACCELBENCH, create_token, new_database, running_server, start_server

DATA = Path(__file__).parent / "data" / "reports"
HTTP = httpx.Client(timeout=300)


def _run(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([ACCELBENCH, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})  # fmt: skip


def _run_all(*argvs: list[str]) -> list[subprocess.CompletedProcess]:
    """``_run(*argv)`` for each, two at a time (each is an interpreter start; a 2-core machine runs two)."""
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda argv: _run(*argv), argvs))


def _one_line(proc: subprocess.CompletedProcess, code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelbench: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def _digest(folder: Path) -> dict[str, tuple[str, int]]:
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in folder.iterdir()
    }


def test_push_to_a_server_that_is_down_sends_nothing_touches_nothing_and_says_so(tmp_path):
    from accelbench.serving.server import free_port

    results = tmp_path / "results"
    shutil.copytree(DATA / "cpu-local", results)
    before = _digest(results)
    proc = _run("push", str(results), "--server", f"http://127.0.0.1:{free_port()}", "--token", "abk_x",
                "--retry-s", "0")  # fmt: skip
    line = _one_line(proc, 4)
    assert "not reachable" in line and "confirmed 0 of 4 stored" in line and "accelbench push again" in line
    assert _digest(results) == before


@pytest.mark.slow
def test_push_bad_inputs_are_one_line(tmp_path):
    """Refused before anything is sent (no server is asked: once, not once per database)."""
    from accelbench.serving.server import free_port

    down = f"http://127.0.0.1:{free_port()}"
    (tmp_path / "empty").mkdir()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "accelbench.result/1", "run_id": "r"}))
    nope, empty, field, url = _run_all(["push", str(tmp_path / "nope"), "--server", down],
                                       ["push", str(tmp_path / "empty"), "--server", down],
                                       ["push", str(bad), "--server", down],
                                       ["push", str(DATA / "cpu-local"), "--server", "localhost:1"])  # fmt: skip
    assert "not found" in _one_line(nope, 2)
    assert "no accelbench.result/1" in _one_line(empty, 2)
    assert "field" in _one_line(field, 2)
    assert "give the server's URL" in _one_line(url, 2)


def test_push_the_server_refuses_is_one_line(live_server):
    good = str(DATA / "cpu-local")
    read = create_token(live_server.db_url, "read", "reader")
    no_token, reader = _run_all(["push", good, "--server", live_server.base_url],
                                ["push", good, "--server", live_server.base_url, "--token", read])  # fmt: skip
    assert "401" in _one_line(no_token, 2)
    assert "403" in _one_line(reader, 2)


def test_push_takes_the_token_from_the_environment_and_sends_the_variant_manifest(tmp_path, live_server):
    """A run's folder (results/ beside variants/): the manifest each result references travels with it."""
    out = tmp_path / "run"
    shutil.copytree(DATA / "cpu-local", out / "results")
    doc = json.loads((out / "results" / "minilm-l6__cpu-local__fp32__closed-http-b1.json").read_text())
    proc = _run("quantize", "builtin:identity", "--target", "cpu-local", "--precision", "fp32", "--out",
                str(out / "variants"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    manifest_file = next((out / "variants").rglob("manifest.json"))
    manifest = json.loads(manifest_file.read_text())
    doc["provenance"]["manifest_hash"] = manifest["manifest_hash"]  # this result references that variant
    doc["run_id"] += "-with-manifest"
    (out / "results" / "with-manifest.json").write_text(json.dumps(doc, indent=2))
    pushed = _run("push", str(out / "results"), "--server", live_server.base_url,
                  env={"ACCELBENCH_TOKEN": live_server.token})  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr
    listing = HTTP.get(live_server.base_url + "/api/v1/results", params={"model": "minilm-l6"},
                       headers={"Authorization": f"Bearer {live_server.token}"}).json()  # fmt: skip
    mine = next(r for r in listing["results"] if r["run_id"] == doc["run_id"])
    one = HTTP.get(
        live_server.base_url + mine["url"], headers={"Authorization": f"Bearer {live_server.token}"}
    )
    assert one.json()["variant_manifest"]["manifest_hash"] == manifest["manifest_hash"]
    assert one.json()["source"] == "with-manifest.json"


@pytest.mark.slow
def test_server_prints_its_database_binds_loopback_and_reuses_the_default_sqlite_file(tmp_path):
    """No --db: an SQLite file in the user data dir (XDG_DATA_HOME here), printed at start, kept across runs."""
    from accelbench.serving.server import free_port

    env = {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    db = tmp_path / "xdg" / "accelbench" / "results.db"
    token = _run("token", "create", "--scope", "admin", "--name", "me", env=env)
    assert token.returncode == 0 and token.stdout.startswith("abk_") and token.stdout.count("\n") == 1
    assert db.is_file()
    port = free_port()
    proc = subprocess.Popen([ACCELBENCH, "server", "--port", str(port)], env={**os.environ, **env},
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        first = proc.stderr.readline()
        assert f"sqlite:///{db}" in first, first
        assert f"http://127.0.0.1:{port}" in proc.stderr.readline()
        for _ in range(600):
            try:
                health = HTTP.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1)
                break
            except httpx.HTTPError:
                threading.Event().wait(0.1)
        assert health.json()["database"] == "sqlite"
        journal = subprocess.run([sys.executable, "-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1])"
                                  ".execute('PRAGMA journal_mode').fetchone()[0])", str(db)],
                                 capture_output=True, text=True)  # fmt: skip
        assert journal.stdout.strip() == "wal"
        mine = HTTP.get(f"http://127.0.0.1:{port}/api/v1/results",
                        headers={"Authorization": f"Bearer {token.stdout.strip()}"})  # fmt: skip
        assert mine.status_code == 200  # the token made before the server started is in the same file
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
    assert proc.returncode in (0, -15)  # uvicorn re-raises SIGTERM after a graceful shutdown


def test_server_bad_options_are_one_line(tmp_path, live_server):
    port = live_server.base_url.rsplit(":", 1)[1]
    in_use, gone = _run_all(["server", "--db", f"sqlite:///{tmp_path}/x.db", "--port", port],
                            ["token", "revoke", "--db", live_server.db_url, "--name", "nobody"])  # fmt: skip
    assert "cannot listen" in _one_line(in_use, 4)
    assert "no active token" in _one_line(gone, 2)


@pytest.mark.slow
def test_server_bad_databases_and_scopes_are_one_line():
    """What no database kind changes (once, not once per database)."""
    mysql, nonsense, down, god = _run_all(["server", "--db", "mysql://u@h/db"], ["server", "--db", "::nonsense"],
                                          ["server", "--db", "postgresql+psycopg://postgres@127.0.0.1:1/x", "--port", "0"],
                                          ["token", "create", "--scope", "god", "--name", "x"])  # fmt: skip
    assert "only sqlite and postgresql" in _one_line(mysql, 2)
    assert "not a database URL" in _one_line(nonsense, 2)
    assert "not reachable" in _one_line(down, 4)
    assert "Invalid value" in _one_line(god, 2)


def test_a_missing_service_extra_is_one_line():
    code = "import sys; sys.modules['fastapi'] = None\nfrom accelbench.cli import main\nmain(['server'])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and "pip install 'accelbench[service]'" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
@pytest.mark.slow
def test_sigkill_during_a_push_loses_nothing_acknowledged(kind, request, tmp_path):
    """Push many documents from threads, SIGKILL the server midway, restart it: every 201/200 is served."""
    db = new_database(kind, request, tmp_path)
    src = json.loads((DATA / "cpu-local" / "resnet50__cpu-local__int8__closed-http-b1.json").read_text())
    server = start_server(db, tmp_path)
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def pusher(worker: int) -> None:
        with httpx.Client(base_url=server.base_url, timeout=30,
                          headers={"Authorization": f"Bearer {server.token}"}) as client:  # fmt: skip
            for i in range(10_000):
                if stop.is_set():
                    return
                doc = json.loads(json.dumps(src))
                doc["run_id"] = f"kill-{worker}-{i}"  # distinct documents (test inputs for durability)
                try:
                    response = client.post("/api/v1/results", json=doc)
                except httpx.HTTPError:
                    return  # the server died: this one was never acknowledged
                if response.status_code in (200, 201):
                    with lock:
                        acknowledged.append(response.json()["id"])

    threads = [threading.Thread(target=pusher, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    while len(acknowledged) < 40 and all(t.is_alive() for t in threads):
        threading.Event().wait(0.05)
    server.kill()  # SIGKILL to the process group: no shutdown hook runs
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert len(acknowledged) >= 40
    with running_server(db, tmp_path, token=server.token) as again:
        stored = set()
        offset = 0
        while True:
            page = HTTP.get(again.base_url + "/api/v1/results", params={"limit": 1000, "offset": offset},
                            headers={"Authorization": f"Bearer {again.token}"}).json()  # fmt: skip
            stored |= {r["id"] for r in page["results"]}
            offset += 1000
            if offset >= page["total"]:
                break
    assert set(acknowledged) <= stored


@pytest.mark.slow
def test_health_is_503_when_the_database_goes_away(request, tmp_path):
    """PostgreSQL dropped under a running server: health says so (503, one line), and nothing answers 500."""
    import psycopg

    db = new_database("postgresql", request, tmp_path)
    with running_server(db, tmp_path) as server:
        assert HTTP.get(server.base_url + "/api/v1/health").status_code == 200
        base, name = db.rsplit("/", 1)
        with psycopg.connect(
            base.replace("postgresql+psycopg", "postgresql") + "/postgres", autocommit=True
        ) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        health = HTTP.get(server.base_url + "/api/v1/health")
        assert health.status_code == 503 and "not reachable" in health.json()["error"]
        listing = HTTP.get(
            server.base_url + "/api/v1/results", headers={"Authorization": f"Bearer {server.token}"}
        )
        assert listing.status_code == 503, listing.text
