"""How much load can accelbench's Locust harness itself generate, and what does it cost?

Against builtin:identity (the null model) on the local Triton, for 1 and 2 load processes: a closed-loop
concurrency sweep; the highest throughput it sustained (requests/s), the client CPU per request, and for
every step the client p50 next to Triton's server-side mean request time from its statistics for the
same measured window. Each request's client latency contains its server-side time, so the client mean
can never be below Triton's mean for the same requests (the script exits 1 if it is: the accounting would
be wrong). Triton only reports a mean, so a client p50 below it is possible when the server has a heavy
tail (a busy host); such steps are flagged "p50<srv".

    .venv/bin/python bench/loadgen_ceiling.py [--levels 1,2,4,8,16] [--duration 4] [--protocol http]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from accelbench.loadtests.api import loadtest
from accelbench.loadtests.profiles import LoadProfile, parse_levels
from accelbench.serving import LocalTriton
from accelbench.serving.repository import write_repository

MODEL = "identity__cpu-local__fp32"


def build_repo(work: Path) -> Path:
    accelbench = str(Path(sys.executable).parent / "accelbench")
    cmd = [accelbench, "quantize", "builtin:identity", "--target", "cpu-local", "--precision", "fp32",
           "--out", str(work / "variants")]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True)
    write_repository([work / "variants" / MODEL], work / "repo", "local")
    return work / "repo"


def sweep(triton, work: Path, kind: str, levels, processes: int, args) -> list[dict]:
    profile = LoadProfile(kind=kind, protocol=args.protocol, levels=tuple(levels), duration_s=args.duration,
                          warmup_s=args.warmup, processes=processes)  # fmt: skip
    doc, _ = loadtest(model=MODEL, profile=profile, out_dir=work / f"{kind}-p{processes}", url=triton.http_url,
                      grpc_url=triton.grpc_url, card_uri="builtin:identity")  # fmt: skip
    return doc["steps"]


def print_row(processes: int, step: dict) -> None:
    lat, lg = step["latency_us"], step["loadgen"]
    server_us = (step["server_stats"] or {}).get("request_us")
    ratio = f"{lat['p50'] / server_us:.2f}" if server_us and lat["p50"] else "-"
    flag = " p50<srv" if server_us and lat["p50"] and lat["p50"] < server_us else ""
    offered = step["offered"].get("concurrency") or f"{step['offered']['rate_rps']:.0f}/s"
    print(f"{processes:>5} {offered:>7} {step['throughput_rps']:>8.0f} {lg['cpu_us_per_request']:>10} "
          f"{','.join(f'{c:.2f}' for c in lg['cpu_fraction']):>10} {lat['p50']:>7} {lat['mean']:>7.0f} "
          f"{lat['p99']:>7} {server_us or 0:>9.0f} {ratio:>10}{flag}  {step['verdict']} {'; '.join(step['reasons'])}")  # fmt: skip


def mean_not_below_server(step: dict) -> bool:
    server_us = (step["server_stats"] or {}).get("request_us")
    return server_us is None or step["latency_us"]["mean"] is None or step["latency_us"]["mean"] >= server_us


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,2,4,8,16")
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--protocol", default="http", choices=["http", "grpc"])
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--out", default=None, help="keep the result documents here")
    args = parser.parse_args()
    work = Path(args.out or tempfile.mkdtemp(prefix="accelbench-loadgen-"))
    repo = build_repo(work)
    rows, summary = [], []
    with LocalTriton(repo) as triton:
        for processes in (int(p) for p in args.processes.split(",")):
            closed = sweep(triton, work, "closed", parse_levels(args.levels), processes, args)
            best = max(closed, key=lambda s: s["throughput_rps"])
            # open loop at fractions of the closed-loop peak: the highest rate achieved (>= 90 % of offered)
            rates = [round(best["throughput_rps"] * f) for f in (0.5, 0.8, 1.0, 1.2)]
            opened = sweep(triton, work, "open", rates, processes, args)
            achieved = [
                s for s in opened if s["requests"] / s["duration_s"] >= 0.9 * s["offered"]["rate_rps"]
            ]
            top = max((s["offered"]["rate_rps"] for s in achieved), default=None)
            rows += [(processes, s) for s in closed + opened]
            summary.append(f"{processes} process(es): closed-loop peak {best['throughput_rps']:.0f} req/s at "
                           f"concurrency {best['offered']['concurrency']} ({best['loadgen']['cpu_us_per_request']} "
                           f"µs client CPU/request); highest open-loop rate achieved: {top} req/s")  # fmt: skip
    print(f"{'procs':>5} {'offered':>7} {'req/s':>8} {'cpu µs/req':>10} {'cpu/core':>10} {'p50 µs':>7} "
          f"{'mean µs':>7} {'p99 µs':>7} {'server µs':>9} {'p50/server':>10}  verdict")  # fmt: skip
    for processes, step in rows:
        print_row(processes, step)
    print("\n".join(summary))
    ok = all(mean_not_below_server(step) for _, step in rows)
    print(json.dumps({"results_dir": str(work), "client_mean_never_below_server_mean": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
