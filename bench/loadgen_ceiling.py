"""How much load can accelbench's harness generate, what does it cost, and how does it compare with perf_analyzer?

One local Triton serves builtin:identity (the null model) and MiniLM-L6 INT8. The script measures

1. identity, closed loop, 1 and 2 load processes: throughput per concurrency, client CPU per request (the
   measured window of the load processes), client p50 next to Triton's server-side mean request time;
2. MiniLM INT8 at concurrency 1: client CPU per request with MiniLM-sized answers (token_embeddings
   128×384 float32 plus sentence_embedding, ~198 kB per answer);
3. when perf_analyzer is found (``--perf-analyzer PATH``, default /tmp/pa-venv/bin/perf_analyzer: a venv with
   ``tritonclient==2.41.1``, whose wheel ships the binary, plus Debian's libb64-0d), on the same server and
   the same request data (one perf_analyzer JSON data file of real token ids, read by both tools: accelbench
   through ``--input-data FILE``), interleaved perf_analyzer / accelbench / accelbench / perf_analyzer per
   level: throughput and p50 ratios on MiniLM INT8 at concurrency 1, 2, 4, and the identity ceiling
   (accelbench with 1 and 2 processes) against perf_analyzer's, at ``--ceiling-concurrency``.

perf_analyzer measures ``--pa-interval-ms`` windows until 3 agree (``--stability-percentage``); accelbench
measures ``3 × interval`` per step, so both report about the same span. perf_analyzer's CPU is its whole
process (start-up and warm-up included) over the requests it counted.

    .venv/bin/python bench/loadgen_ceiling.py [--levels 1,2,4,8,16] [--duration 4] [--pa-interval-ms 2000]
        [--rounds 3] [--compare-only] [--protocol http|grpc]
        [--perf-analyzer PATH] [--skip-pa] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from accelbench.documents import VariantManifest, to_dict
from accelbench.loadtests.api import loadtest
from accelbench.loadtests.profiles import LoadProfile, parse_levels
from accelbench.serving import LocalTriton
from accelbench.serving.repository import model_name, write_repository

PA_DEFAULT = "/tmp/pa-venv/bin/perf_analyzer"
PYTRITON_LIBS = Path(np.__file__).resolve().parents[1] / "nvidia_pytriton.libs"


def build_repo(work: Path, minilm: str) -> tuple[Path, dict[str, tuple[Path, VariantManifest]]]:
    """Quantize both models through the real CLI, one local repository; {role: manifest}."""
    from accelbench.models.manifest import read_manifest

    accelbench = str(Path(sys.executable).parent / "accelbench")
    manifests = {}
    for role, uri, precision in (("identity", "builtin:identity", "fp32"), ("minilm", minilm, "int8")):
        out = work / "variants" / role
        cmd = [
            accelbench,
            "quantize",
            uri,
            "--target",
            "cpu-local",
            "--precision",
            precision,
            "--out",
            str(out),
        ]
        subprocess.run(cmd, check=True, capture_output=True)
        [vdir] = [p for p in out.iterdir() if p.name.endswith(f"__{precision}")]
        manifests[role] = (vdir, read_manifest(vdir))
    write_repository([vdir for vdir, _ in manifests.values()], work / "repo", "local")
    return work / "repo", manifests


def write_data_file(manifest: VariantManifest, path: Path, count: int = 64) -> Path:
    """perf_analyzer's JSON data format, one entry per request (batch 1), from the model card's generator."""
    from accelbench.models.cards import card_from_dict
    from accelbench.models.inputs import make_inputs

    payloads = make_inputs(card_from_dict(manifest.card, "manifest"), 1, count, seed=0)
    entries = [{name: {"content": arr[0].reshape(-1).tolist(), "shape": list(arr.shape[1:])}
                for name, arr in p.items()} for p in payloads]  # fmt: skip
    path.write_text(json.dumps({"data": entries}))
    return path


def ab_run(triton, model: str, data: Path, levels, processes: int, duration_s: float, warmup_s: float,
           out: Path, protocol: str = "http") -> list[dict]:  # fmt: skip
    profile = LoadProfile(kind="closed", protocol=protocol, levels=tuple(levels), duration_s=duration_s,
                          warmup_s=warmup_s, processes=processes, input_data=str(data))  # fmt: skip
    doc, _ = loadtest(
        model=model, profile=profile, out_dir=out, url=triton.http_url, grpc_url=triton.grpc_url
    )
    return to_dict(doc)["steps"]  # the steps as written to the result file


def pa_run(pa: str, triton, model: str, data: Path, concurrency: int, args, out: Path) -> dict:
    """One perf_analyzer run: throughput, p50 (µs) and its whole process's CPU per counted request."""
    csv = out / f"pa-{model}-c{concurrency}-{len(list(out.glob('pa-*')))}.csv"
    address = triton.grpc_url if args.protocol == "grpc" else triton.http_address
    cmd = [pa, "-m", model, "-u", address, "-i", args.protocol, "--concurrency-range", str(concurrency),
           "--input-data", str(data), "--measurement-interval", str(args.pa_interval_ms),
           "--stability-percentage", str(args.pa_stability), "--max-trials", "10", "-f", str(csv)]  # fmt: skip
    env = {"LD_LIBRARY_PATH": str(cuda_shim(out))}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"perf_analyzer failed ({run.returncode}): {(run.stderr or run.stdout)[-500:]}")
    row = dict(zip(*[line.split(",") for line in csv.read_text().splitlines()[:2]], strict=True))
    counts = [int(n) for n in re.findall(r"Request count: (\d+)", run.stdout)]
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"throughput_rps": float(row["Inferences/Second"]), "p50_us": int(row["p50 latency"]),
            "cpu_us_per_request": round(cpu_s * 1e6 / counts[-1], 1) if counts else None}  # fmt: skip


def cuda_shim(out: Path) -> Path:
    """The 2.41.1 binary links libcudart.so.12 even for HTTP; the nvidia-pytriton wheel bundles one."""
    shim = out / "pa-libs"
    shim.mkdir(exist_ok=True)
    link = shim / "libcudart.so.12"
    found = sorted(PYTRITON_LIBS.glob("libcudart-*.so.12*"))
    if found and not link.exists():
        link.symlink_to(found[0])
    return shim


def interleaved(pa: str, triton, model: str, data: Path, concurrency: int, processes: int, args,
                out: Path) -> dict:  # fmt: skip
    """PA / AB / AB / PA at one level; means of each tool's two runs and their ratios."""
    duration = 3 * args.pa_interval_ms / 1000
    pas, abs_ = [], []
    for tool in ("pa", "ab", "ab", "pa"):
        if tool == "pa":
            pas.append(pa_run(pa, triton, model, data, concurrency, args, out))
        else:
            # a fresh folder per run: the same one would resume the finished document and measure nothing
            step = ab_run(triton, model, data, [concurrency], processes, duration, args.warmup,
                          out / f"ab-{model}-c{concurrency}-p{processes}-{len(list(out.glob('ab-*')))}",
                          args.protocol)[0]  # fmt: skip
            abs_.append({"throughput_rps": step["throughput_rps"], "p50_us": step["latency_us"]["p50"],
                         "cpu_us_per_request": step["loadgen"]["cpu_us_per_request"]})  # fmt: skip
    mean = {k: {m: statistics.mean(r[m] for r in runs if r[m] is not None) for m in runs[0]}
            for k, runs in (("pa", pas), ("ab", abs_))}  # fmt: skip
    return {"model": model, "protocol": args.protocol, "concurrency": int(concurrency), "processes": processes,
            "runs": {"pa": pas, "ab": abs_},
            "mean": mean, "throughput_ratio": round(mean["ab"]["throughput_rps"] / mean["pa"]["throughput_rps"], 3),
            "p50_ratio": round(mean["ab"]["p50_us"] / mean["pa"]["p50_us"], 3)}  # fmt: skip


def print_sweep_row(processes: int, step: dict) -> None:
    lat, lg = step["latency_us"], step["loadgen"]
    server_us = (step["server_stats"] or {}).get("request_us")
    print(f"{processes:>5} {step['offered']['concurrency']:>5} {step['throughput_rps']:>8.0f} "
          f"{lg['cpu_us_per_request']:>10} {','.join(f'{c:.2f}' for c in lg['cpu_fraction']):>10} {lat['p50']:>7} "
          f"{lat['p99']:>7} {server_us or 0:>9.0f}  {step['verdict']} {'; '.join(step['reasons'])}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,2,4,8,16")
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--minilm", default="builtin:minilm-l6")
    parser.add_argument("--perf-analyzer", default=PA_DEFAULT)
    parser.add_argument("--skip-pa", action="store_true")
    parser.add_argument("--pa-levels", default="1,2,4")
    parser.add_argument("--ceiling-concurrency", type=int, default=8)
    parser.add_argument("--pa-interval-ms", type=int, default=2000)
    parser.add_argument(
        "--pa-stability", type=int, default=1000, help="1000: report after 3 windows, like a fixed step"
    )
    parser.add_argument("--rounds", type=int, default=3, help="PA/AB/AB/PA sets per level (ratios: median)")
    parser.add_argument("--compare-only", action="store_true", help="skip the sweeps, only the side by side")
    parser.add_argument(
        "--protocol",
        choices=["http", "grpc"],
        default="http",
        help="of the side by side (the sweeps use HTTP)",
    )
    parser.add_argument("--out", default=None, help="keep the result documents and perf_analyzer CSVs here")
    args = parser.parse_args()
    work = Path(args.out or tempfile.mkdtemp(prefix="accelbench-loadgen-"))
    work.mkdir(parents=True, exist_ok=True)
    repo, manifests = build_repo(work, args.minilm)
    names = {role: model_name(m) for role, (_, m) in manifests.items()}
    data = {role: write_data_file(m, work / f"{role}-data.json") for role, (_, m) in manifests.items()}
    summary: dict = {"results_dir": str(work)}
    with LocalTriton(repo) as triton:
        if not args.compare_only:
            summary.update(sweeps(triton, names, data, args, work))
        pa = args.perf_analyzer
        if not args.skip_pa and Path(pa).is_file():
            summary["vs_perf_analyzer"] = compare(pa, triton, names, data, args, work)
        elif not args.skip_pa:
            print(f"perf_analyzer not found at {pa}: side-by-side figures skipped")
    print(json.dumps(summary, indent=1))
    return 0


def sweeps(triton, names: dict, data: dict, args, work: Path) -> dict:
    """Identity sweeps with 1 and 2 processes, and MiniLM at concurrency 1: throughput and client CPU."""
    summary: dict = {}
    print(f"{'procs':>5} {'conc':>5} {'req/s':>8} {'cpu µs/req':>10} {'cpu/core':>10} {'p50 µs':>7} "
          f"{'p99 µs':>7} {'server µs':>9}  verdict   (identity)")  # fmt: skip
    for processes in (1, 2):
        steps = ab_run(triton, names["identity"], data["identity"], parse_levels(args.levels), processes,
                       args.duration, args.warmup, work / f"identity-p{processes}")  # fmt: skip
        for step in steps:
            print_sweep_row(processes, step)
        best = max(steps, key=lambda s: s["throughput_rps"])
        summary[f"identity_ceiling_p{processes}"] = {
            "throughput_rps": best["throughput_rps"], "concurrency": best["offered"]["concurrency"],
            "cpu_us_per_request": best["loadgen"]["cpu_us_per_request"]}  # fmt: skip
    [mini] = ab_run(
        triton, names["minilm"], data["minilm"], [1], 1, args.duration, args.warmup, work / "minilm"
    )
    summary["minilm_c1_cpu_us_per_request"] = mini["loadgen"]["cpu_us_per_request"]
    print(f"MiniLM INT8 c=1: {mini['throughput_rps']} req/s, p50 {mini['latency_us']['p50']} µs, "
          f"client CPU {mini['loadgen']['cpu_us_per_request']} µs/request")  # fmt: skip
    return summary


def compare(pa: str, triton, names: dict, data: dict, args, work: Path) -> list[dict]:
    """Every level ``--rounds`` times (PA/AB/AB/PA each); per level the median of the rounds' ratios."""
    plan = [("minilm", int(c), 1) for c in parse_levels(args.pa_levels)]
    plan += [("identity", args.ceiling_concurrency, p) for p in (1, 2)]
    rounds = [[interleaved(pa, triton, names[role], data[role], c, p, args, work) for role, c, p in plan]
              for _ in range(args.rounds)]  # fmt: skip
    rows = []
    for k in range(len(plan)):
        per = [r[k] for r in rounds]
        median = {tool: {m: statistics.median(r["mean"][tool][m] for r in per) for m in per[0]["mean"][tool]}
                  for tool in ("pa", "ab")}  # fmt: skip
        rows.append({**per[0], "rounds": per, "mean": median,
                     "throughput_ratio": statistics.median(r["throughput_ratio"] for r in per),
                     "p50_ratio": statistics.median(r["p50_ratio"] for r in per)})  # fmt: skip
    print(f"{'model':>36} {'conc':>4} {'procs':>5} {'PA req/s':>9} {'AB req/s':>9} {'ratio':>6} {'rounds':>11} "
          f"{'PA p50':>7} {'AB p50':>7} {'ratio':>6} {'rounds':>11} {'PA cpu':>7} {'AB cpu':>7}")  # fmt: skip
    for r in rows:
        m = r["mean"]
        print(f"{r['model']:>36} {r['concurrency']:>4} {r['processes']:>5} {m['pa']['throughput_rps']:>9.1f} "
              f"{m['ab']['throughput_rps']:>9.1f} {r['throughput_ratio']:>6.3f} {_spread(r, 'throughput_ratio'):>11} "
              f"{m['pa']['p50_us']:>7.0f} {m['ab']['p50_us']:>7.0f} {r['p50_ratio']:>6.3f} "
              f"{_spread(r, 'p50_ratio'):>11} {m['pa']['cpu_us_per_request']:>7.0f} "
              f"{m['ab']['cpu_us_per_request']:>7.0f}")  # fmt: skip
    return rows


def _spread(row: dict, key: str) -> str:
    """The lowest and highest of one ratio over the rounds (the table's ratio is their median)."""
    values = [r[key] for r in row["rounds"]]
    return f"{min(values):.2f}–{max(values):.2f}"


if __name__ == "__main__":
    sys.exit(main())
