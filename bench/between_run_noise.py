"""Between-run noise: N identical short `accelbench loadtest` runs against ONE server, then every pair compared.

    .venv/bin/python bench/between_run_noise.py [--runs 10] [--model builtin:minilm-l6] [--precision int8]
        [--concurrency 2] [--duration 8] [--warmup 2] [--max-duration 45] [--slow-runs 3] [--slowdown 0.2]
        [--hog-runs 0] [--slo-ms 1000] [--variant DIR] [--out DIR] [--write-floor]

Prints each run's capacity and p99, the between-run coefficient of variation (CV) of both, and for every pair
of identical runs (i < j, old = i, new = j) how often each rule flags a regression:

- ``within-run``: the rule before issue 31 (each run's own Welch interval, disjoint p99 intervals);
- ``noise floor``: reports/compare.py's rule with the floor in accelbench/reports/noise_floor.toml as it stood
  *before* this run (a floor is never judged on the runs that set it);
- ``history``: the same rule with every run but the new one as the history, the old one included, as
  ``report --compare --history`` and the service's history flags take it (the old run is an earlier run).

Then ``--slow-runs`` runs with the server really slowed down: its process group stopped for ``--slowdown``
of every 100 ms (SIGSTOP/SIGCONT), and ``--hog-runs`` runs with a CPU hog per core beside it. Every (normal,
slow) pair is compared: the share flagged is the rule's power against that slowdown.
``--write-floor`` stores this run's CVs as the noise floor of cpu-local, with the command and date.
The machine is shared with other jobs: read the CVs as this host's, on this day, under that load.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from accelbench.hardware.catalog import load_catalog
from accelbench.processes import signal_group
from accelbench.reports.build import ReportOptions, build_report
from accelbench.reports.compare import capacity_ratio, judge_change
from accelbench.reports.inputs import load_documents
from accelbench.reports.noise import FLOOR_FILE, floor_for, history_spread
from accelbench.reports.rows import ReportRow
from accelbench.serving import LocalTriton
from accelbench.serving.repository import write_repository

EXE = str(Path(sys.executable).parent / "accelbench")
TARGET = "cpu-local"


def make_variant(model: str, precision: str, out: Path) -> Path:
    cmd = [EXE, "quantize", model, "--target", TARGET, "--precision", precision, "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    return next(
        p for p in out.iterdir() if p.name.endswith(f"__{precision}") and (p / "manifest.json").is_file()
    )


def one_run(url: str, variant: Path, out: Path, args: argparse.Namespace) -> ReportRow | None:
    cmd = [EXE, "loadtest", "--url", url, "--model", variant.name, "--manifest", str(variant),
           "--concurrency", str(args.concurrency), "--duration", str(args.duration), "--warmup", str(args.warmup),
           "--max-duration", str(args.max_duration), "--out", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    options = ReportOptions(slo_ms=args.slo_ms)
    (row,) = [r for r in build_report(load_documents([str(out)]), load_catalog(), options).rows
              if r.status == "measured"]  # fmt: skip
    if row.capacity_rps is None:  # an INVALID step (drift on a loaded host): no capacity to compare
        print(f"  {out.name}: no capacity ({row.reason}; step: {row.step_reasons})", flush=True)
        return None
    return row


def runs_of(kind: str, n: int, run) -> list[ReportRow]:
    rows = []
    for i in range(n):
        row = run(i)
        if row is not None:
            rows.append(row)
            print(
                f"{kind} {i}: {row.capacity_rps:.2f} req/s, p99 {row.latency_us / 1000:.2f} ms",
                flush=True,
            )
    return rows


def hog() -> None:
    while True:
        pass


class Throttle(threading.Thread):
    """A real slowdown of the server: its whole process group stopped for ``share`` of every 100 ms
    (SIGSTOP/SIGCONT), so it computes at (1 − share) of its speed whatever else the machine runs."""

    def __init__(self, pgid: int, share: float) -> None:
        super().__init__(daemon=True)
        self.pgid, self.share, self.halt = pgid, share, threading.Event()

    def run(self) -> None:
        period = 0.1
        while not self.halt.is_set():
            signal_group(self.pgid, signal.SIGSTOP)
            time.sleep(period * self.share)
            signal_group(self.pgid, signal.SIGCONT)
            self.halt.wait(period * (1 - self.share))

    def stop(self) -> None:
        self.halt.set()
        self.join()
        signal_group(self.pgid, signal.SIGCONT)


def pairs_flagged(rows: list[ReportRow], rule: str, floor) -> tuple[int, int]:
    flagged = total = 0
    for i, j in itertools.combinations(range(len(rows)), 2):
        old, new = rows[i], rows[j]
        if rule == "within-run":
            regression = within_run_rule(old, new)
        elif rule == "noise floor":
            regression = judge_change(old, new, spread=floor).regression
        else:
            others = [r for k, r in enumerate(rows) if k != j]
            spread = history_spread([r.capacity_rps for r in others], [r.latency_us for r in others])
            regression = judge_change(old, new, spread=spread).regression
        flagged += bool(regression)
        total += 1
    return flagged, total


def within_run_rule(old: ReportRow, new: ReportRow) -> bool:
    """The rule before issue 31: each run's own Welch capacity interval, disjoint p99 intervals."""
    ratio = capacity_ratio(old, new)
    return bool((ratio is not None and ratio.high < 1.0) or new.latency_low_us > old.latency_high_us)


def cross_flagged(normal: list[ReportRow], slow: list[ReportRow], floor) -> tuple[int, int, int]:
    by_floor = by_history = 0
    spread = history_spread([r.capacity_rps for r in normal], [r.latency_us for r in normal])
    for old in normal:
        for new in slow:
            by_floor += bool(judge_change(old, new, spread=floor).regression)
            by_history += bool(judge_change(old, new, spread=spread).regression)
    return by_floor, by_history, len(normal) * len(slow)


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


def write_floor(cv_cap: float, cv_lat: float, runs: int, args: argparse.Namespace, note: str) -> None:
    cmd = (f"bench/between_run_noise.py --runs {args.runs} --model {args.model} --precision {args.precision} "
           f"--concurrency {args.concurrency} --duration {args.duration:g} --warmup {args.warmup:g} "
           f"--max-duration {args.max_duration:g} --write-floor")  # fmt: skip
    text = (
        "# The between-run noise floor per kind of host: the coefficient of variation of capacity and of the\n"
        "# p99 at capacity over identical short runs against one server (bench/between_run_noise.py writes it).\n"
        "# reports/noise.py uses it to judge two single runs of a target listed here; docs/statistics.md.\n\n"
        "[[floor]]\n"
        f'targets = ["{TARGET}"]\n'
        f"cv_capacity = {cv_cap:.4f}\n"
        f"cv_latency = {cv_lat:.4f}\n"
        f"runs = {runs}\n"
        f'host = "{platform.node() or "this host"}: {os.cpu_count()}-core {platform.machine()} VM, shared with other jobs"\n'
        f'measured_at = "{time.strftime("%Y-%m-%d", time.gmtime())}"\n'
        f'command = "{cmd}"\n'
        f'note = "{note} (1-min, 2 cores) while it ran"\n'
    )
    FLOOR_FILE.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--hog-runs", type=int, default=0, help="runs with a CPU hog per core beside the server")
    ap.add_argument("--model", default="builtin:minilm-l6")
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--max-duration", type=float, default=45.0, help="a step runs on to p99's sample floor")
    ap.add_argument("--slow-runs", type=int, default=3, help="runs with the server throttled by --slowdown")
    ap.add_argument("--slowdown", default="0.2", help="comma-separated shares of time the server is stopped")
    ap.add_argument(
        "--slo-ms",
        type=float,
        default=1000.0,
        help="p99 objective of the capacity compared: far above the runs' p99, so that a slowed "
        "run's capacity is compared rather than its SLO verdict",
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--write-floor", action="store_true")
    ap.add_argument(
        "--variant", type=Path, default=None, help="a variant folder already quantized (skips it)"
    )
    args = ap.parse_args()
    floor = floor_for(TARGET)  # as it stood before this run
    load_start = os.getloadavg()[0]
    out = args.out or Path(tempfile.mkdtemp(prefix="accelbench-noise-"))
    variant = args.variant or make_variant(args.model, args.precision, out / "variants")
    repo = out / "repo"
    write_repository([variant], repo, "local")
    with LocalTriton(repo) as server:
        normal = runs_of(
            "run", args.runs, lambda i: one_run(server.http_url, variant, out / f"run-{i:02d}", args)
        )

        def hogged(i: int) -> ReportRow | None:
            hogs = [multiprocessing.Process(target=hog, daemon=True) for _ in range(os.cpu_count() or 1)]
            for h in hogs:
                h.start()
            try:
                return one_run(server.http_url, variant, out / f"hog-{i:02d}", args)
            finally:
                for h in hogs:
                    h.kill()
                    h.join()

        def throttled_run(i: int, share: float) -> ReportRow | None:
            throttle = Throttle(server.pid, share)
            throttle.start()
            try:
                return one_run(server.http_url, variant, out / f"slow-{share:g}-{i:02d}", args)
            finally:
                throttle.stop()

        slowed = {"hog": runs_of("hog", args.hog_runs, hogged)}
        for share in (float(x) for x in args.slowdown.split(",")):
            slowed[f"throttled {share:.0%}"] = runs_of(f"throttled {share:.0%}", args.slow_runs,
                                                       lambda i, share=share: throttled_run(i, share))  # fmt: skip
    caps = [r.capacity_rps for r in normal]
    lats = [r.latency_us for r in normal]
    within = statistics.mean(r.capacity_se / r.capacity_rps for r in normal)
    load_end = os.getloadavg()[0]
    summary = {"load average (1 min) at start, end": f"{load_start:.1f}, {load_end:.1f}","runs": f"{len(normal)} of {args.runs} with a capacity", "capacity_mean": statistics.mean(caps), "capacity_cv": cv(caps),
               "within_run_se_rel_mean": within, "latency_cv": cv(lats),
               "floor_before": None if floor is None else floor.source}  # fmt: skip
    for rule in ("within-run", "noise floor", "history"):
        if rule == "noise floor" and floor is None:
            continue
        flagged, total = pairs_flagged(normal, rule, floor)
        summary[f"identical pairs flagged ({rule})"] = f"{flagged}/{total} ({flagged / total:.1%})"
    for name, rows in slowed.items():
        if not rows:
            continue
        drop = statistics.mean(r.capacity_rps for r in rows) / statistics.mean(caps) - 1
        by_floor, by_history, total = cross_flagged(normal, rows, floor)
        summary[f"{name} capacity change"] = f"{drop:+.1%}"
        if floor is not None:
            summary[f"{name} pairs flagged (noise floor)"] = f"{by_floor}/{total}"
        summary[f"{name} pairs flagged (history)"] = f"{by_history}/{total}"
    print(json.dumps(summary, indent=2))
    if args.write_floor:
        write_floor(cv(caps), cv(lats), len(normal), args, f"load average {load_start:.1f} → {load_end:.1f}")
        print(f"wrote {FLOOR_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
