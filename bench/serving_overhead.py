"""Serving overhead: throughput of a model served by the local Triton (python backend → onnxruntime) vs
the same ONNX run in-process with onnxruntime, same batch size and thread count, interleaved in one run.

    .venv/bin/python bench/serving_overhead.py [--model builtin:minilm-l6] [--precision int8]
        [--batch 1] [--threads 2] [--concurrency 2] [--duration-s 10] [--rounds 2] [--protocol http]
        [--transport auto|dlpack|numpy]

Prints the throughput of each phase and the ratio triton/in-process (1.0 = no overhead). Timings on a
shared 2-core machine drift a lot: read the per-round ratios as a range, not a constant.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from accelbench.models.manifest import read_manifest
from accelbench.serving import LocalTriton, stats_delta, stats_snapshot
from accelbench.serving.repository import write_repository

NP_TO_TRITON = {"float32": "FP32", "int64": "INT64", "int32": "INT32", "float16": "FP16"}


def make_variant(model: str, target: str, precision: str, out: Path) -> Path:
    exe = Path(sys.executable).parent / "accelbench"
    cmd = [
        str(exe),
        "quantize",
        model,
        "--target",
        target,
        "--precision",
        precision,
        "--out",
        str(out),
        "--json",
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    [variant] = [
        p for p in out.iterdir() if p.name.endswith(f"__{precision}") and (p / "manifest.json").is_file()
    ]
    return variant


def batch_inputs(variant: Path, batch: int) -> dict[str, np.ndarray]:
    with np.load(variant / "reference" / "inputs.npz") as data:
        rows = {k: data[k] for k in data.files}
    # repeat reference rows when the batch is larger than the reference set
    return {k: np.ascontiguousarray(np.resize(v, (batch,) + v.shape[1:])) for k, v in rows.items()}


def run_in_process(variant: Path, feeds: dict, threads: int, duration_s: float) -> float:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # the same session settings as accelbench's python-backend model.py, so only serving differs
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(variant / "model.onnx"), options, providers=["CPUExecutionProvider"])
    batch = next(iter(feeds.values())).shape[0]
    session.run(None, feeds)  # warm-up outside the window
    count, start, cpu0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < duration_s:
        session.run(None, feeds)
        count += 1
    inferences = count * batch
    return inferences / (time.perf_counter() - start), (time.process_time() - cpu0) * 1000 / inferences


def run_triton(
    server: LocalTriton, model: str, feeds: dict, concurrency: int, duration_s: float, protocol: str
):
    if protocol == "grpc":
        import tritonclient.grpc as lib

        url = server.grpc_url
    else:
        import tritonclient.http as lib

        url = server.http_address
    batch = next(iter(feeds.values())).shape[0]
    counts = [0] * concurrency
    stop = threading.Event()

    def worker(i: int) -> None:
        client = lib.InferenceServerClient(url)
        inputs = []
        for name, array in feeds.items():
            tensor = lib.InferInput(name, list(array.shape), NP_TO_TRITON[str(array.dtype)])
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        client.infer(model, inputs)  # connection set-up outside the window
        barrier.wait()
        while not stop.is_set():
            client.infer(model, inputs)
            counts[i] += 1
        client.close()

    barrier = threading.Barrier(concurrency + 1)
    workers = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for w in workers:
        w.start()
    barrier.wait()
    before = stats_snapshot(server.http_url, model)
    cpu0 = _cpu_s(server.pid), time.process_time()
    start = time.perf_counter()
    time.sleep(duration_s)
    stop.set()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    server_cpu_s, client_cpu_s = _cpu_s(server.pid) - cpu0[0], time.process_time() - cpu0[1]
    inferences = sum(counts) * batch
    cpu = {"server_ms": server_cpu_s * 1000 / inferences, "client_ms": client_cpu_s * 1000 / inferences}
    return inferences / elapsed, cpu, stats_delta(before, stats_snapshot(server.http_url, model))


def _cpu_s(pid: int) -> float:
    """CPU seconds used so far by the server and its python-backend stubs (contention does not inflate it)."""
    import psutil

    total = 0.0
    server = psutil.Process(pid)
    for proc in [server, *server.children(recursive=True)]:
        times = proc.cpu_times()
        total += times.user + times.system
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="builtin:minilm-l6")
    parser.add_argument("--variant", type=Path, help="an existing variant folder (skips quantize)")
    parser.add_argument("--target", default="cpu-local")
    parser.add_argument("--precision", default="int8")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--protocol", choices=["http", "grpc"], default="http")
    parser.add_argument(
        "--transport",
        choices=["auto", "dlpack", "numpy"],
        default="auto",
        help="auto: as accelbench serves (the stub's numpy<2 environment when built, else DLPack); dlpack: "
        "DLPack with this environment's numpy; numpy: the stub's numpy bridge (docs/serving.md)",
    )
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="serving-overhead-") as tmp:
        variant = args.variant or make_variant(args.model, args.target, args.precision, Path(tmp) / "v")
        name = read_manifest(variant).name
        feeds = batch_inputs(variant, args.batch)
        overrides = {
            "instance_count": 1,
            "intra_op_threads": args.threads,
            "max_batch_size": max(8, args.batch),
            "tensor_transport": "numpy" if args.transport == "numpy" else "dlpack",
        }
        write_repository([variant], Path(tmp) / "repo", "local", overrides)
        rounds = []
        with LocalTriton(Path(tmp) / "repo", prefer_stub_env=args.transport != "dlpack") as server:
            for r in range(args.rounds):
                local_ips, local_cpu_ms = run_in_process(variant, feeds, args.threads, args.duration_s)
                triton_ips, cpu, server_stats = run_triton(
                    server, name, feeds, args.concurrency, args.duration_s, args.protocol
                )
                rounds.append(
                    {
                        "round": r,
                        "load_average_1m": os.getloadavg()[0],
                        "in_process_ips": local_ips,
                        "triton_ips": triton_ips,
                        "ratio": triton_ips / local_ips,
                        "in_process_cpu_ms_per_inference": local_cpu_ms,
                        "triton_server_cpu_ms_per_inference": cpu["server_ms"],
                        "client_cpu_ms_per_inference": cpu["client_ms"],
                        "cpu_ratio": cpu["server_ms"] / local_cpu_ms,
                        "server_stats": server_stats,
                    }
                )
                print(
                    f"round {r}: in-process {local_ips:7.1f} inf/s {local_cpu_ms:6.1f} cpu-ms/inf | triton "
                    f"{triton_ips:7.1f} inf/s server {cpu['server_ms']:6.1f} + client {cpu['client_ms']:5.1f} "
                    f"cpu-ms/inf | ratio {triton_ips / local_ips:.3f} | mean server batch "
                    f"{server_stats['mean_batch_size'] or 0:.2f} | load average {os.getloadavg()[0]:.1f}"
                )
    ratios = [r["ratio"] for r in rounds]
    print(
        f"{name}: batch {args.batch}, {args.threads} ORT threads, {args.concurrency} concurrent "
        f"{args.protocol} clients, {args.duration_s:.0f} s x {args.rounds} rounds interleaved, "
        f"tensor_transport {args.transport}"
    )
    print(
        f"triton/in-process throughput ratio: median {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f})"
    )
    cpu_ratios = [r["cpu_ratio"] for r in rounds]
    print(
        f"server CPU per inference / in-process CPU per inference: median {statistics.median(cpu_ratios):.3f} "
        f"(range {min(cpu_ratios):.3f}-{max(cpu_ratios):.3f}; client CPU not included)"
    )
    if args.json_out:
        args.json_out.write_text(
            json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rounds": rounds}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
