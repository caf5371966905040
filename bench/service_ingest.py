"""Results service throughput: the ingest rate of real result documents and the latency of the report page,
driving `accelbench server`'s own API with Locust (as a library), on SQLite and on a throwaway PostgreSQL.

    .venv/bin/python bench/service_ingest.py [--db sqlite,postgresql] [--users 4] [--ingest-s 15]
        [--report-users 2] [--report-s 15]

Ingest: each Locust user POSTs the committed cpu-local result documents (tests/data/reports/cpu-local), each
made distinct by a run-id suffix so every request is a real insert (201), not an idempotent 200. Report: GET
/report?model=minilm-l6 (the HTML page: report build, plots, template) and /api/v1/report (JSON) over what
the ingest phase stored. Prints requests/s and latency percentiles per phase and database. Everything runs on
127.0.0.1; on a shared 2-core machine read the figures as a range.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import gevent
import httpx
from locust import HttpUser, constant, task
from locust.env import Environment

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    json.loads(p.read_text())
    for p in sorted((ROOT / "tests" / "data" / "reports" / "cpu-local").glob("*.json"))
]
ACCELBENCH = str(Path(sys.executable).parent / "accelbench")
COUNTER = itertools.count()


def free_port() -> int:
    from accelbench.serving.server import free_port as _free

    return _free()


@contextmanager
def postgres(tmp: Path):
    """A throwaway PostgreSQL cluster on a loopback port (as the tests' fixture does)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise SystemExit("PostgreSQL server binaries missing: apt-get install -y postgresql")
    bindir = Path(found[-1]).parent
    wrap = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    data, sock = tmp / "pg", tmp / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(tmp, "postgres")
        shutil.chown(sock, "postgres")
    port = free_port()
    subprocess.run([*wrap, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"],
                   check=True, capture_output=True)  # fmt: skip
    opts = f"-k {sock} -h 127.0.0.1 -p {port} -c max_connections=200"
    subprocess.run([*wrap, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-w", "-l", str(tmp / "pg.log"),
                    "start"], check=True, capture_output=True)  # fmt: skip
    try:
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/bench"
    finally:
        subprocess.run([*wrap, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)  # fmt: skip


@contextmanager
def server(db: str, tmp: Path):
    token = subprocess.run([ACCELBENCH, "token", "create", "--db", db, "--scope", "admin", "--name", "bench"],
                           check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    port = free_port()
    log = open(tmp / f"server-{port}.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([ACCELBENCH, "server", "--db", db, "--port", str(port)], stdout=log, stderr=log,
                            start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/api/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url, token
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()


def run_locust(user_class: type, host: str, users: int, seconds: float) -> dict:
    env = Environment(user_classes=[user_class], host=host)
    runner = env.create_local_runner()
    runner.start(users, spawn_rate=users)
    gevent.sleep(seconds)
    runner.quit()
    out = {}
    for (name, method), entry in sorted(env.stats.entries.items()):
        out[f"{method} {name}"] = {
            "requests": entry.num_requests, "failures": entry.num_failures, "rps": entry.num_requests / seconds,
            "p50_ms": entry.get_response_time_percentile(0.5), "p95_ms": entry.get_response_time_percentile(0.95),
            "p99_ms": entry.get_response_time_percentile(0.99), "max_ms": entry.max_response_time,
        }  # fmt: skip
    return out


def users_for(token: str):
    auth = {"Authorization": f"Bearer {token}"}

    class Ingest(HttpUser):
        wait_time = constant(0)

        @task
        def push(self) -> None:
            n = next(COUNTER)
            doc = dict(DOCS[n % len(DOCS)], run_id=f"{DOCS[n % len(DOCS)]['run_id']}-bench{n}")
            with self.client.post("/api/v1/results", json=doc, headers=auth, name="/api/v1/results",
                                  catch_response=True) as response:  # fmt: skip
                if response.status_code != 201:
                    response.failure(f"{response.status_code}: {response.text[:100]}")

    class Report(HttpUser):
        wait_time = constant(0)

        @task(1)
        def page(self) -> None:
            self.client.get("/report?model=minilm-l6", headers=auth, name="/report?model=minilm-l6 (page)")

        @task(1)
        def json_report(self) -> None:
            self.client.get(
                "/api/v1/report?model=minilm-l6", headers=auth, name="/api/v1/report?model=minilm-l6"
            )

    return Ingest, Report


def bench_one(kind: str, args: argparse.Namespace, tmp: Path) -> None:
    with postgres(tmp) if kind == "postgresql" else _sqlite(tmp) as db, server(db, tmp) as (url, token):
        ingest_user, report_user = users_for(token)
        ingest = run_locust(ingest_user, url, args.users, args.ingest_s)
        stored = httpx.get(url + "/api/v1/results?limit=1", headers={"Authorization": f"Bearer {token}"},
                           timeout=60).json()["total"]  # fmt: skip
        cold = {}
        for path in ("/report?model=minilm-l6", "/api/v1/report?model=minilm-l6"):
            started = time.perf_counter()  # the first view after the pushes builds the report (no cache)
            httpx.get(
                url + path, headers={"Authorization": f"Bearer {token}"}, timeout=600
            ).raise_for_status()
            cold[path] = time.perf_counter() - started
            if path.startswith("/report"):  # one more push, so the JSON report is built afresh too
                extra = dict(DOCS[1], run_id=f"{DOCS[1]['run_id']}-cold")
                httpx.post(url + "/api/v1/results", json=extra, headers={"Authorization": f"Bearer {token}"},
                           timeout=60).raise_for_status()  # fmt: skip
        report = run_locust(report_user, url, args.report_users, args.report_s)
    print(f"\n== {kind}: {args.users} ingest users × {args.ingest_s:g} s, then {args.report_users} report users × "
          f"{args.report_s:g} s over {stored} stored documents ({stored // 2} of them minilm-l6)")  # fmt: skip
    for path, seconds in cold.items():
        print(f"first view after a push (report built, not cached): GET {path}  {seconds * 1000:.0f} ms")
    for name, s in {**ingest, **report}.items():
        print(
            f"{name:44s} {s['requests']:6d} req ({s['failures']} failed)  {s['rps']:8.1f} req/s  "
            f"p50 {s['p50_ms']:.0f} ms  p95 {s['p95_ms']:.0f} ms  p99 {s['p99_ms']:.0f} ms  max {s['max_ms']:.0f} ms"
        )


@contextmanager
def _sqlite(tmp: Path):
    yield f"sqlite:///{tmp / 'bench.db'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="sqlite,postgresql")
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--ingest-s", type=float, default=15.0)
    parser.add_argument("--report-users", type=int, default=2)
    parser.add_argument("--report-s", type=float, default=15.0)
    args = parser.parse_args()
    print(f"accelbench service benchmark, {os.cpu_count()} CPUs, documents from tests/data/reports/cpu-local "
          f"({len(DOCS)} files, {sum(len(json.dumps(d)) for d in DOCS) // len(DOCS)} bytes each on average)")  # fmt: skip
    for kind in args.db.split(","):
        with tempfile.TemporaryDirectory(prefix=f"accelbench-bench-{kind}-") as tmp:
            bench_one(kind, args, Path(tmp))


if __name__ == "__main__":
    main()
