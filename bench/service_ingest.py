"""Results service throughput: the ingest rate of real result documents and the latency of the report page,
driving `accelbench server`'s own API with Locust (as a library), on SQLite and on a throwaway PostgreSQL.

    .venv/bin/python bench/service_ingest.py [--db sqlite,postgresql] [--results 1000] [--batch 50]
        [--pushers 4] [--report-users 2] [--report-s 20]

Ingest: ``--results`` committed cpu-local result documents (tests/data/reports/cpu-local), each made distinct
by a run-id suffix so every one is a real insert, pushed by ``--pushers`` threads through POST
/api/v1/results/batch (what ``accelbench push`` sends), timed from the first byte to the last answer; then,
side by side, 200 more through the one-document route. Report: Locust users GET /report?model=minilm-l6 (the
page) while another user pushes one more document every 2 s, so the page views include the first view after
each push; printed with p50/p99, and the one view right after a push on its own. Everything runs on 127.0.0.1;
on a shared 2-core machine read the figures as a range.
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
import psutil
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
        yield url, token, psutil.Process(proc.pid)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()


def cpu_s(server: psutil.Process) -> tuple[float, float]:
    """CPU seconds (user + system) of the server process and, apart, of its children (the report builder)."""

    def used(proc: psutil.Process) -> float:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            return 0.0
        return times.user + times.system

    return used(server), sum(used(child) for child in server.children(recursive=True))


def distinct(n: int, tag: str) -> dict:
    base = DOCS[n % len(DOCS)]
    return dict(base, run_id=f"{base['run_id']}-{tag}{n}")


def push_all(url: str, token: str, count: int, batch: int, pushers: int) -> float:
    """Push ``count`` distinct documents in batches from ``pushers`` threads; documents per second."""
    from concurrent.futures import ThreadPoolExecutor

    auth = {"Authorization": f"Bearer {token}"}
    batches = [[{"result": distinct(n, "b"), "source": f"b{n}.json"} for n in range(i, min(i + batch, count))]
               for i in range(0, count, batch)]  # fmt: skip

    def send(bodies: list) -> int:
        with httpx.Client(base_url=url, headers=auth, timeout=300) as client:
            answer = client.post("/api/v1/results/batch", json={"results": bodies})
            answer.raise_for_status()
            return answer.json()["created"]

    started = time.perf_counter()
    with ThreadPoolExecutor(pushers) as pool:
        created = sum(pool.map(send, batches))
    elapsed = time.perf_counter() - started
    assert created == count, f"{created} of {count} stored"
    return count / elapsed


def push_single(url: str, token: str, count: int, pushers: int) -> float:
    from concurrent.futures import ThreadPoolExecutor

    auth = {"Authorization": f"Bearer {token}"}

    def send(n: int) -> None:
        with httpx.Client(base_url=url, headers=auth, timeout=300) as client:
            client.post("/api/v1/results", json=distinct(n, "s")).raise_for_status()

    started = time.perf_counter()
    with ThreadPoolExecutor(pushers) as pool:
        list(pool.map(send, range(count)))
    return count / (time.perf_counter() - started)


def wait_fresh(url: str, token: str, timeout_s: float = 900) -> float:
    """Seconds until the report page shows every stored result (the background build after the pushes)."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        page = httpx.get(
            url + "/report?model=minilm-l6", headers={"Authorization": f"Bearer {token}"}, timeout=600
        )
        page.raise_for_status()
        if "Newer results are being added" not in page.text:
            return time.perf_counter() - started
        time.sleep(1.0)
    raise SystemExit(f"the report page was not fresh after {timeout_s:.0f} s")


def users_for(token: str):
    auth = {"Authorization": f"Bearer {token}"}

    class Report(HttpUser):
        wait_time = constant(0)

        @task
        def page(self) -> None:
            self.client.get("/report?model=minilm-l6", headers=auth, name="/report?model=minilm-l6 (page)")

    class Pusher(HttpUser):
        wait_time = constant(2.0)

        @task
        def push(self) -> None:
            n = next(COUNTER)
            with self.client.post("/api/v1/results", json=distinct(n, "live"), headers=auth,
                                  name="/api/v1/results (one push per 2 s)", catch_response=True) as response:  # fmt: skip
                if response.status_code != 201:
                    response.failure(f"{response.status_code}: {response.text[:100]}")

    return Report, Pusher


def bench_one(kind: str, args: argparse.Namespace, tmp: Path) -> None:
    with postgres(tmp) if kind == "postgresql" else _sqlite(tmp) as db, server(db, tmp) as (url, token, proc):
        auth = {"Authorization": f"Bearer {token}"}
        load_before = os.getloadavg()[0]
        before = cpu_s(proc)
        batch_rate = push_all(url, token, args.results, args.batch, args.pushers)
        after = cpu_s(proc)
        batch_cpu = [(a - b) * 1000 / args.results for a, b in zip(after, before, strict=True)]
        single_rate = push_single(url, token, 200, args.pushers)
        single_cpu = (cpu_s(proc)[0] - after[0]) * 1000 / 200
        stored = httpx.get(url + "/api/v1/results?limit=1", headers=auth, timeout=60).json()["total"]
        built_s = wait_fresh(url, token)
        httpx.post(
            url + "/api/v1/results", json=distinct(0, "cold"), headers=auth, timeout=60
        ).raise_for_status()
        started = time.perf_counter()
        first = httpx.get(url + "/report?model=minilm-l6", headers=auth, timeout=600)
        first_ms = (time.perf_counter() - started) * 1000
        first.raise_for_status()
        fresh_s = wait_fresh(url, token) + first_ms / 1000
        report_user, pusher_user = users_for(token)
        env = Environment(user_classes=[report_user, pusher_user], host=url)
        runner = env.create_local_runner()
        before = cpu_s(proc)
        runner.start(args.report_users + 1, spawn_rate=args.report_users + 1)
        gevent.sleep(args.report_s)
        runner.quit()
        page_cpu = cpu_s(proc)
        rows = {f"{m} {n}": e for (n, m), e in sorted(env.stats.entries.items())}
        views = sum(e.num_requests for (n, m), e in env.stats.entries.items() if "(page)" in n)
        load_after = os.getloadavg()[0]
    print(f"\n== {kind}: {stored} stored documents ({stored // 2} of them minilm-l6); load average "
          f"{load_before:.1f} before, {load_after:.1f} after (the machine may be shared: the CPU times are the "
          "figures to compare)")  # fmt: skip
    print(f"ingest: {batch_rate:.0f} documents/s through POST /api/v1/results/batch ({args.batch} per request, "
          f"{args.pushers} pushers); {single_rate:.0f} documents/s one per request; ratio {batch_rate / single_rate:.1f}x")  # fmt: skip
    print(f"server CPU per document: {batch_cpu[0]:.2f} ms in the batch route (and {batch_cpu[1]:.2f} ms in the "
          f"report build processes meanwhile), {single_cpu:.2f} ms one per request")  # fmt: skip
    print(
        f"background build of the minilm-l6 page after the ingest: {built_s:.1f} s (no page view waited for it)"
    )
    print(
        f"first view of the report page right after a push: {first_ms:.0f} ms "
        f"({'the previous build, marked as being updated' if 'Newer results' in first.text else 'fresh'}); "
        f"the page shows the push {fresh_s:.1f} s after it"
    )
    for name, e in rows.items():
        print(f"{name:52s} {e.num_requests:6d} req ({e.num_failures} failed)  p50 {e.get_response_time_percentile(0.5):.0f} ms  "
              f"p99 {e.get_response_time_percentile(0.99):.0f} ms  max {e.max_response_time:.0f} ms")  # fmt: skip
    print(f"server CPU per page view (the pushes meanwhile included): {(page_cpu[0] - before[0]) * 1000 / max(views, 1):.1f} ms; "
          f"build processes meanwhile: {page_cpu[1] - before[1]:.1f} s")  # fmt: skip


@contextmanager
def _sqlite(tmp: Path):
    yield f"sqlite:///{tmp / 'bench.db'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="sqlite,postgresql")
    parser.add_argument("--results", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--pushers", type=int, default=4)
    parser.add_argument("--report-users", type=int, default=2)
    parser.add_argument("--report-s", type=float, default=20.0)
    args = parser.parse_args()
    print(f"accelbench service benchmark, {os.cpu_count()} CPUs, documents from tests/data/reports/cpu-local "
          f"({len(DOCS)} files, {sum(len(json.dumps(d)) for d in DOCS) // len(DOCS)} bytes each on average)")  # fmt: skip
    for kind in args.db.split(","):
        with tempfile.TemporaryDirectory(prefix=f"accelbench-bench-{kind}-") as tmp:
            bench_one(kind, args, Path(tmp))


if __name__ == "__main__":
    main()
