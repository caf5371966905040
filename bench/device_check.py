"""One prepared GPU check: roofline against a real accelerator, NVML telemetry, measured result documents.

    python3 bench/device_check.py --out DIR [--device cuda] [--dtype bf16] [--quick]

Runs with the GPU machine's own python3 (torch, onnx, numpy, click, rich there; nothing to install) with
PYTHONPATH at the repository root. Writes to DIR:
    probe.json       `accelbench probe --json` on this host (NVML: name, memory, driver, CUDA, CC, MIG)
    ceilings.json    measured bf16 matrix-product TFLOP/s and device-to-device copy GB/s vs the catalog peaks
    summary.json/md  per model and batch: measured inferences/s, roofline projection, ratio, J/inference
    results.tar.gz   accelbench result documents (schema accelbench.result/1, origin device-check)
    log.txt          what ran, with timings
On a machine without a GPU (``--device cpu``) the same flow runs small and without NVML: that is how it is
tested before it spends device time.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from accelbench.documents import (  # noqa: E402
    Accuracy,
    Errors,
    GraphCost,
    LatencyUs,
    LoadProfile,
    Metrics,
    Offered,
    Provenance,
    ResultDocument,
    ServerStats,
    Step,
    dump_json,
)
from accelbench.hardware.catalog import load_catalog  # noqa: E402
from accelbench.hardware.roofline import roofline_point  # noqa: E402
from accelbench.models.builtin import build_builtin  # noqa: E402
from accelbench.models.cards import load_card  # noqa: E402
from accelbench.models.graph_cost import graph_cost  # noqa: E402
from accelbench.models.inputs import make_inputs  # noqa: E402
from accelbench.serving.onnx_torch import OnnxTorch  # noqa: E402

TARGET_ID = "h200-sxm"
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
LOG: list[str] = []


def log(msg: str) -> None:
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    LOG.append(line)
    print(line, flush=True)


class PowerSampler:
    """Samples NVML power (W) every ``period_s`` in a thread; energy from the board's own counter when it has one."""

    def __init__(self, device_index: int = 0, period_s: float = 0.02):
        self.period_s, self.samples_w, self._stop = period_s, [], threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(device_index)
        except Exception as err:  # no NVML: no power figures, said so in the output
            self.nvml, self.handle, self.error = None, None, f"NVML unavailable: {err}"

    def _energy_mj(self):
        try:
            return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
        except Exception:
            return None

    def __enter__(self):
        if self.nvml:
            self.t0, self.e0 = time.perf_counter(), self._energy_mj()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.samples_w.append(self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0)
            time.sleep(self.period_s)

    def __exit__(self, *exc):
        if self.nvml:
            self._stop.set()
            self._thread.join()
            self.elapsed_s = time.perf_counter() - self.t0
            e1 = self._energy_mj()
            self.energy_counter_j = (
                (e1 - self.e0) / 1000.0 if e1 is not None and self.e0 is not None else None
            )

    def result(self) -> dict:
        if not self.nvml or not self.samples_w:
            return {"power_w": None, "energy_j": None, "method": getattr(self, "error", "no samples")}
        mean_w = statistics.fmean(self.samples_w)
        if self.energy_counter_j:
            return {
                "power_w": mean_w,
                "energy_j": self.energy_counter_j,
                "method": "nvmlDeviceGetTotalEnergyConsumption",
            }
        return {
            "power_w": mean_w,
            "energy_j": mean_w * self.elapsed_s,
            "method": "mean nvmlDeviceGetPowerUsage x time",
        }


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _timer(device: str):
    """(start, stop) → elapsed seconds; CUDA events on a GPU, perf_counter on a CPU."""
    if device == "cuda":

        def run(fn, n):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(n):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0
    else:

        def run(fn, n):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            return time.perf_counter() - t0

    return run


def measure_ceilings(device: str, dtype: torch.dtype, quick: bool) -> dict:
    timed = _timer(device)
    n = 2048 if quick else 8192
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        torch.matmul(a, b)
    _sync(device)
    reps = 3 if quick else 20
    secs = timed(lambda: torch.matmul(a, b), reps) / reps
    matmul_tflops = 2 * n**3 / secs / 1e12
    a = b = None  # free the device memory before the copy test
    nbytes = (256 << 20) if quick else (4 << 30)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    _sync(device)
    reps = 3 if quick else 20
    secs = timed(lambda: dst.copy_(src), reps) / reps
    copy_gbs = 2 * nbytes / secs / 1e9  # bytes read plus written
    src = dst = None
    return {"matmul": {"n": n, "dtype": str(dtype).split(".")[-1], "tflops": matmul_tflops, "reps": reps},
            "d2d_copy": {"bytes": nbytes, "gbs_read_plus_written": copy_gbs, "reps": reps}}  # fmt: skip


def _capture(runner: OnnxTorch, feeds: dict, device: str):
    """A callable that runs the model once: a CUDA-graph replay on a GPU (no Python per op), eager elsewhere."""
    if device != "cuda":
        return lambda: runner(feeds)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            runner(feeds)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        runner(feeds)
    return graph.replay


def measure_model(
    name: str, batches: list[int], device: str, precision: str, quick: bool, catalog
) -> list[dict]:
    log(f"{name}: building the ONNX graph")
    model = build_builtin(name)
    card = load_card(f"builtin:{name}")
    runner = OnnxTorch(model, device, DTYPES[precision])
    target = catalog.get(TARGET_ID)
    timed = _timer(device)
    rows = []
    for batch in batches:
        feeds = runner.feeds(make_inputs(card, batch, 1, seed=0)[0])
        try:
            step = _capture(runner, feeds, device)
            graph_mode = device == "cuda"
        except Exception as err:  # capture can fail on an op that syncs; eager still measures
            log(f"  {name} b{batch}: CUDA graph capture failed ({err}); eager")
            step, graph_mode = (lambda feeds=feeds: runner(feeds)), False
        for _ in range(5):
            step()
        _sync(device)
        one = timed(step, 3) / 3
        per_rep = max(1, int((0.02 if quick else 0.2) / max(one, 1e-6)))
        reps = 5 if quick else 30
        latencies_s = [timed(step, per_rep) / per_rep for _ in range(reps)]
        sustain = max(1, int((0.3 if quick else 2.0) / max(one, 1e-6)))
        with PowerSampler() as power:
            sustained_s = timed(step, sustain)
        energy = power.result()
        median_s = statistics.median(latencies_s)
        cost = graph_cost(model, batch_size=batch, precision=precision)
        point = roofline_point(cost.flops_per_inference, cost.activation_bytes_per_inference, batch, target, precision,
                               weight_bytes=cost.weight_bytes)  # fmt: skip
        measured_ips = batch / median_s
        projected_ips = point.throughput_upper_bound_ips
        j_per_inf = energy["energy_j"] / (sustain * batch) if energy["energy_j"] is not None else None
        rows.append({
            "model": name, "batch": batch, "precision": precision, "cuda_graph": graph_mode,
            "latency_median_us": median_s * 1e6, "latency_p99_us": float(np.percentile(latencies_s, 99)) * 1e6,
            "latency_min_us": min(latencies_s) * 1e6, "latency_max_us": max(latencies_s) * 1e6,
            "measured_ips": measured_ips, "sustained_ips": sustain * batch / sustained_s,
            "projected_ips": projected_ips, "ratio_measured_to_projected": measured_ips / projected_ips,
            "roofline_bound": point.bound, "roofline_latency_lower_bound_us": point.latency_lower_bound_s * 1e6,
            "flops_per_inference": cost.flops_per_inference, "weight_bytes": cost.weight_bytes,
            "activation_bytes_per_inference": cost.activation_bytes_per_inference, "params": cost.params,
            "power_w": energy["power_w"], "energy_method": energy["method"], "joules_per_inference": j_per_inf,
            "repeats": reps, "iterations_per_repeat": per_rep,
        })  # fmt: skip
        r = rows[-1]
        log(f"  {name} b{batch}: {measured_ips:,.1f} inf/s (median of {reps}), projected {projected_ips:,.1f} "
            f"({r['ratio_measured_to_projected']:.2f}), {r['power_w'] or 0:.0f} W, J/inf {j_per_inf}")  # fmt: skip
    return rows


METHOD = ("in-process torch interpreter of the built-in ONNX graph (accelbench/serving/onnx_torch.py), CUDA graph "
          "replay, timed with CUDA events; a step at batch b = b requests batched by the server; no server, no "
          "network, no TensorRT")  # fmt: skip


def measuring_provenance(probe: dict, argv: list[str]) -> dict:
    """The packages and command of the measuring run, read by the measuring process on the measuring host:
    the package versions of its own probe (``accelbench probe``, run with this interpreter) and its argv.
    Written into summary.json, so a later ``--rebuild-results`` on another machine copies them, never reads
    its own (the 2026-11-30 H200 files once said torch 2.13.0+cpu: the rebuilding machine's; CORRECTIONS.md)."""
    packages = {k: v for k, v in (probe.get("packages") or {}).items() if v}
    return {
        "packages": packages or {"torch": torch.__version__},
        "command": shlex.join(["python3", *argv]),
        "method": METHOD,
    }


# summaries from before the measuring run recorded its provenance (the 2026-11-30 H200 run): what a rebuild
# says instead, as corrected in bench/results/h200/2026-11-30/CORRECTIONS.md
LEGACY_COMMAND = "python3 bench/device_check.py --out OUT"
LEGACY_METHOD = METHOD.replace(
    "accelbench/serving/onnx_torch.py", "bench/device/onnx_torch.py"
)  # its path then
LEGACY_NOTE = (
    "corrected 2026-12-01: packages had been filled in by the machine that rebuilt these files (torch 2.13.0+cpu, "
    "not this host's); they are now this run's probe.json packages, read on the H200 by the measuring run's own "
    "accelbench probe (its log records torch.__version__ 2.11.0+cu130); the measuring run did not record its exact "
    "command line, so the command is the documented invocation; see CORRECTIONS.md"
)


def recorded_provenance(summary: dict, probe: dict) -> dict:
    """What a rebuild copies: summary.json's own ``provenance`` (written by the measuring run), or, for a run
    from before it was written, the measuring host's probe.json packages, said so in a note."""
    if summary.get("provenance"):
        return summary["provenance"]
    packages = {k: v for k, v in (probe.get("packages") or {}).items() if v}
    return {"packages": packages, "command": LEGACY_COMMAND, "method": LEGACY_METHOD, "note": LEGACY_NOTE}


def result_documents(
    rows: list[dict], probe: dict, created_at: str, metrics_by_model: dict, measured: dict
) -> list[ResultDocument]:
    """accelbench.result/1 documents, one per model × precision; each batch size is one step.

    A step at batch b stands for a server that has b single-inference requests in flight and runs them as one
    batch (perfect dynamic batching, no network): offered concurrency b, requests/s = inferences/s, and the
    request latency is the batch latency. That is how the report compares it with served measurements.
    """
    docs = []
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        first = mine[0]
        name = f"{model}__{TARGET_ID}__{first['precision']}"
        docs.append(ResultDocument(
            run_id=f"{name}__device-check", origin="device-check", model=model, variant=name, target=TARGET_ID,
            precision=first["precision"], batch_size=1,
            accuracy=Accuracy(metric=metrics_by_model.get(model), value=None, verdict="NOT_RUN",
                              reason="the FP32 graph cast to the compute dtype and timed; no quantized variant"),
            graph_cost=GraphCost(params=first["params"], flops_per_inference=first["flops_per_inference"],
                                 weight_bytes=first["weight_bytes"],
                                 activation_bytes_per_inference=first["activation_bytes_per_inference"],
                                 precision=first["precision"]),
            provenance=Provenance(
                host=probe, packages=measured["packages"], manifest_hash=None, repository_config=None,
                server=None, created_at=created_at, command=measured["command"],
                **({"note": measured["note"]} if measured.get("note") else {}),
                method=measured.get("method") or METHOD,
            ),
            load_profile=LoadProfile(kind="closed", protocol="in-process", levels=[r["batch"] for r in mine],
                                     duration_s=None, warmup_s=None, processes=1, seed=0),
            steps=[_step(index, row, created_at) for index, row in enumerate(mine)],
            complete=True,
        ))  # fmt: skip
    return docs


def _step(index: int, row: dict, created_at: str) -> Step:
    lat = row["latency_median_us"]
    requests = row["repeats"] * row["iterations_per_repeat"] * row["batch"]
    return Step(
        index=index, offered=Offered(concurrency=row["batch"]), started_at=created_at, duration_s=None,
        requests=requests, inferences=requests, errors=Errors(connection=0, timeout=0, server=0, wrong_output=0),
        error_rate=0.0, throughput_rps=row["measured_ips"], throughput_ips=row["measured_ips"],
        latency_us=LatencyUs(p50=lat, p90=lat, p95=lat, p99=row["latency_p99_us"], p99_9=row["latency_max_us"],
                             max=row["latency_max_us"], mean=lat),
        histogram=None, server_stats=ServerStats(mean_batch_size=float(row["batch"])),
        metrics=Metrics(gpu_power_w=row["power_w"], energy_method=row["energy_method"], cuda_graph=row["cuda_graph"]),
        energy_per_request_j=row["joules_per_inference"], verdict="VALID", reasons=[],
    )  # fmt: skip


def write_results_tar(path: Path, docs: list[ResultDocument]) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for doc in docs:
            data = dump_json(doc).encode()
            info = tarfile.TarInfo(f"results/{doc.variant}.json")
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())


def summary_markdown(rows: list[dict], ceilings: dict, catalog_peaks: dict) -> str:
    out = ["# Device check: h200-sxm", "",
           f"bf16 matmul {ceilings['matmul']['tflops']:.0f} TFLOP/s (catalog dense peak {catalog_peaks['bf16']}); "
           f"D2D copy {ceilings['d2d_copy']['gbs_read_plus_written']:.0f} GB/s (catalog {catalog_peaks['bw']} GB/s)", "",
           "| model | batch | measured inf/s | projected inf/s (roofline) | measured/projected | bound | W | J/inference |",
           "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        j = f"{r['joules_per_inference']:.4f}" if r["joules_per_inference"] is not None else "n/a"
        w = f"{r['power_w']:.0f}" if r["power_w"] is not None else "n/a"
        out.append(f"| {r['model']} | {r['batch']} | {r['measured_ips']:,.1f} | {r['projected_ips']:,.1f} | "
                   f"{r['ratio_measured_to_projected']:.3f} | {r['roofline_bound']} | {w} | {j} |")  # fmt: skip
    return "\n".join(out) + "\n"


def rebuild_results(folder: Path) -> int:
    summary = json.loads((folder / "summary.json").read_text())
    probe = json.loads((folder / "probe.json").read_text())
    models = dict.fromkeys(r["model"] for r in summary["rows"])
    metrics = {m: load_card(f"builtin:{m}").accuracy.metric for m in models}
    (folder / "results").mkdir(exist_ok=True)
    measured = recorded_provenance(summary, probe)
    for doc in result_documents(summary["rows"], probe, summary["created_at"], metrics, measured):
        (folder / "results" / f"{doc.variant}.json").write_text(dump_json(doc))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--quick", action="store_true", help="tiny sizes: for testing the flow on a CPU")
    ap.add_argument("--models", default="bert-base,resnet50")
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--rebuild-results", metavar="DIR", help="rewrite DIR/results/*.json from DIR/summary.json and "
                    "DIR/probe.json of an earlier run (no measuring); for schema changes")  # fmt: skip
    args = ap.parse_args(argv)
    if args.rebuild_results:
        return rebuild_results(Path(args.rebuild_results))
    if not args.out:
        ap.error("--out DIR is required")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    created_at = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    t0 = time.perf_counter()
    log(
        f"device check on {platform.node()} device={args.device} dtype={args.dtype} torch {torch.__version__}"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    probe_run = subprocess.run([sys.executable, "-m", "accelbench.cli", "probe", "--json"], capture_output=True,
                               text=True, env=env, cwd=ROOT, timeout=120)  # fmt: skip
    (out / "probe.json").write_text(probe_run.stdout or "{}")
    log(f"probe exit {probe_run.returncode}; {probe_run.stderr.strip()[:300]}")
    probe = json.loads(probe_run.stdout) if probe_run.returncode == 0 else {"error": probe_run.stderr.strip()}
    log(f"probe catalog match: {probe.get('catalog_match')}")
    catalog = load_catalog()
    target = catalog.get(TARGET_ID)
    peaks = {"bf16": target.peak_tflops.get("bf16"), "bw": target.memory_bw_gbs}
    ceilings = measure_ceilings(args.device, DTYPES[args.dtype], args.quick)
    ceilings["catalog"] = {
        "target": TARGET_ID,
        "dense_bf16_tflops": peaks["bf16"],
        "memory_bw_gbs": peaks["bw"],
    }
    (out / "ceilings.json").write_text(json.dumps(ceilings, indent=2))
    log(f"ceilings: {json.dumps(ceilings)}")
    batches = [int(b) for b in args.batches.split(",")]
    rows = []
    for name in args.models.split(","):
        rows += measure_model(name, batches, args.device, args.dtype, args.quick, catalog)
    measured = measuring_provenance(probe, sys.argv if argv is None else [sys.argv[0], *argv])
    (out / "summary.json").write_text(json.dumps(
        {"created_at": created_at, "rows": rows, "ceilings": ceilings, "provenance": measured}, indent=2
    ))  # fmt: skip
    (out / "summary.md").write_text(summary_markdown(rows, ceilings, peaks))
    metrics = {m: load_card(f"builtin:{m}").accuracy.metric for m in args.models.split(",")}
    write_results_tar(out / "results.tar.gz", result_documents(rows, probe, created_at, metrics, measured))
    log(f"done in {time.perf_counter() - t0:.1f} s")
    (out / "log.txt").write_text("\n".join(LOG) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
