"""CPU time of one report build over many result documents, as the results server makes one after a push: the
documents parsed once (the server keeps them parsed), then ``render_report`` for the HTML page, its plots
included, timed by the process's CPU time; and the plots alone (``all_plots``) on the data it built.

    .venv/bin/python bench/report_build.py [--results 600] [--source cpu-local] [--rounds 3] [--tree PATH ...]

``--source``: the committed documents under tests/data/reports/ to replicate (cpu-local: fixtures without step
statistics, as bench/service_ingest.py pushes; cpu-local-measured: recorded, with statistics), each copy made
distinct by its run id, so a report over them sees repeated runs of each (model, precision, target).
``--tree``: source trees to time in turn, round by round (interleaved, so a change in the machine's load falls on
all of them alike), each in a fresh process with the tree first on ``sys.path``; default: this one. Every
process renders once untimed first (imports, caches), as a long-lived build process has. Prints one line per
run and the median per tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
import accelbench
from accelbench.hardware.catalog import load_catalog
from accelbench.reports.inputs import load_documents
from accelbench.reports.options import ReportOptions
from accelbench.reports.plots import all_plots
from accelbench.reports.report import render_report

docs, catalog, options = load_documents([sys.argv[1]]), load_catalog(), ReportOptions()
render_report(docs, catalog, options, formats=("html",))  # untimed: imports and first-use caches
t0 = time.process_time()
rendered = render_report(docs, catalog, options, formats=("html",))
t1 = time.process_time()
all_plots(rendered.data)
t2 = time.process_time()
print(json.dumps({"code": accelbench.__file__, "documents": len(docs), "report_s": t1 - t0, "plots_s": t2 - t1,
                  "matplotlib": "matplotlib" in sys.modules}))
"""


def write_documents(folder: Path, source: str, count: int) -> None:
    docs = [
        json.loads(p.read_text())
        for p in sorted((ROOT / "tests" / "data" / "reports" / source).glob("*.json"))
    ]
    for n in range(count):
        base = docs[n % len(docs)]
        doc = dict(base, run_id=f"{base['run_id']}-bench{n}")
        (folder / f"{doc['run_id']}.json").write_text(json.dumps(doc))


def time_tree(tree: Path, folder: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(folder)], capture_output=True, text=True, env=env,
                          cwd=tree, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"report build under {tree} failed: {proc.stderr.strip().splitlines()[-1:]}")
    result = json.loads(proc.stdout.splitlines()[-1])
    if not Path(result["code"]).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"{tree}: the child imported accelbench from {result['code']}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=int, default=600)
    parser.add_argument("--source", choices=("cpu-local", "cpu-local-measured"), default="cpu-local")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--tree", action="append", type=Path, help="a source tree (repeat); default: this one"
    )
    args = parser.parse_args(argv)
    trees = [t.resolve() for t in args.tree or [ROOT]]
    runs: dict[Path, list[dict]] = {tree: [] for tree in trees}
    with tempfile.TemporaryDirectory() as tmp:
        write_documents(Path(tmp), args.source, args.results)
        print(
            f"{args.results} documents from tests/data/reports/{args.source}; load average {os.getloadavg()[0]:.1f}"
        )
        for round_no in range(args.rounds):
            for tree in trees:
                r = time_tree(tree, Path(tmp))
                runs[tree].append(r)
                print(f"round {round_no + 1} {tree}: report {r['report_s']:.2f} s CPU, the plots alone "
                      f"{r['plots_s']:.3f} s (matplotlib loaded: {r['matplotlib']})", flush=True)  # fmt: skip
    for tree, rs in runs.items():
        report = statistics.median(r["report_s"] for r in rs)
        plots = statistics.median(r["plots_s"] for r in rs)
        print(f"median {tree}: report {report:.2f} s CPU, plots {plots:.3f} s ({len(rs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
