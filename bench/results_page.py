"""The results list page (/results) at 100 and at 10,000 stored results, side by side in one run.

    .venv/bin/python bench/results_page.py [--rows 10000] [--repeats 5]

Fills two SQLite databases with synthetic index rows (each holding a real result document), then times the
page as a browser asks for it (the real app, in process): page 1, a page deep in the list, and a filtered
page. Prints the median of each and the ratio large ÷ small: a page's cost should not grow with the table.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DOC = ROOT / "tests" / "data" / "reports" / "cpu-local" / "resnet50__cpu-local__fp32__closed-http-b1.json"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def fill(session, n: int) -> None:
    """``n`` stored results over 4 models, 3 targets, 2 precisions, 5 hosts, one per hour from T0."""
    import sqlalchemy as sa

    from accelbench.service.models import Result, StoredDocument

    text = DOC.read_text()
    rows = [{"id": i + 1, "content_hash": f"{i:064x}", "schema": "accelbench.result/1", "run_id": f"run-{i}",
             "source": "x.json", "model": f"model-{i % 4}", "variant": None,
             "target": ("cpu-local", "l4", "a100-sxm4-80gb")[i % 3], "precision": ("fp32", "int8")[i % 2],
             "host": f"host-{i % 5}", "host_label": f"vm: host {i % 5}", "origin": "accelbench-loadtest",
             "created_at": T0 + timedelta(hours=i), "received_at": T0, "summary": {"steps": 2}}
            for i in range(n)]  # fmt: skip
    session.execute(sa.insert(Result), rows)
    session.execute(sa.insert(StoredDocument), [{"result_id": r["id"], "document": text} for r in rows])
    session.commit()


def _client(folder: Path, n: int):
    from fastapi.testclient import TestClient

    from accelbench.service import db
    from accelbench.service.app import create_app
    from accelbench.service.state import Settings

    url = f"sqlite:///{folder / f'r{n}.db'}"
    engine = db.open_database(url)
    with db.sessionmaker_for(engine)() as session:
        fill(session, n)
    engine.dispose()
    token = subprocess.run(
        [
            str(Path(sys.executable).parent / "accelbench"),
            "token",
            "create",
            "--db",
            url,
            "--scope",
            "read",
            "--name",
            "bench",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    client = TestClient(create_app(Settings(db_url=url)))
    client.headers.update({"Authorization": f"Bearer {token.strip()}", "Accept": "text/html"})
    return client


def _median_s(client, url: str, repeats: int) -> float:
    client.get(url).raise_for_status()  # parsed documents are cached per process: time the steady state
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        client.get(url).raise_for_status()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        small, large = _client(Path(tmp), 100), _client(Path(tmp), args.rows)
        pages = {"page 1": "/results", "page 2": "/results?page=2",
                 "filtered (model, target, dates)": "/results?model=model-1&target=l4&since=2026-01-10&until=2026-02-10"}  # fmt: skip
        deep = f"/results?page={args.rows // 50}"
        print(f"/results page views, median of {args.repeats} (ms): 100 rows vs {args.rows:,} rows")
        for name, url in [*pages.items(), (f"page {args.rows // 50} (the last)", deep)]:
            a = _median_s(small, url if url != deep else "/results?page=2", args.repeats)
            b = _median_s(large, url, args.repeats)
            print(f"  {name:34s} {a * 1000:8.1f} {b * 1000:8.1f}   ratio {b / a:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
