"""GPU board power beside a served load test: sample NVML while it runs, then J/request per result step.

    python3 bench/device/nvml_energy.py sample --out power.csv [--period-s 0.05]   # until SIGTERM/SIGINT
    python3 bench/device/nvml_energy.py attach --power power.csv RESULT.json...    # adds energy to the steps

The bundled tritonserver reads GPU power through DCGM, which may not start in the GPU machine's sandbox, so
its /metrics can lack ``nv_energy_consumption``; this sampler reads NVML directly (nvidia-ml-py, on the
device). A step's ``started_at`` has whole seconds, so its mean power is taken over the step's window less one
second at each end, and J/request = mean board power / the step's throughput (board power: idle included).
Attaching writes ``metrics.nvml_power_w`` and ``metrics.nvml_energy_method``, and ``energy_per_request_j``
where the server gave none.
"""

from __future__ import annotations

import argparse
import csv
import json
import signal
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

METHOD = (
    "mean NVML board power over the step (less 1 s each end) / throughput_rps; bench/device/nvml_energy.py"
)


def sample(out: Path, period_s: float, device_index: int = 0) -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
    except Exception as err:  # no nvidia-ml-py or no driver (a CPU rehearsal): one line, no samples
        print(
            f"nvml_energy: NVML unavailable ({type(err).__name__}: {err}); no power samples", file=sys.stderr
        )
        return 1
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    with out.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["unix_s", "power_w", "energy_mj"])
        while not stop:
            try:
                energy = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            except pynvml.NVMLError:
                energy = ""
            writer.writerow([f"{time.time():.3f}", pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0, energy])
            fh.flush()
            time.sleep(period_s)
    return 0


def read_power(path: Path) -> list[tuple[float, float]]:
    with path.open() as fh:
        return [(float(row["unix_s"]), float(row["power_w"])) for row in csv.DictReader(fh)]


def step_power(samples: list[tuple[float, float]], start_s: float, duration_s: float) -> float | None:
    """Mean power of the samples inside [start+1, start+duration-1] (start is known to the second only)."""
    lo, hi = start_s + 1.0, start_s + duration_s - 1.0
    inside = [w for t, w in samples if lo <= t <= hi]
    return statistics.fmean(inside) if len(inside) >= 3 else None


def attach(doc: dict, samples: list[tuple[float, float]]) -> list[dict]:
    """Add NVML power and J/request to each step of ``doc`` (in place); the rows for the summary."""
    rows = []
    for step in doc.get("steps") or []:
        if not step.get("started_at") or not step.get("duration_s"):
            continue
        start = datetime.fromisoformat(step["started_at"]).timestamp()
        power = step_power(samples, start, float(step["duration_s"]))
        rps = step.get("throughput_rps") or 0.0
        j_per_request = power / rps if power is not None and rps > 0 else None
        metrics = step.setdefault("metrics", {}) or {}
        step["metrics"] = metrics
        metrics["nvml_power_w"] = power
        metrics["nvml_energy_method"] = METHOD
        if step.get("energy_per_request_j") is None:
            step["energy_per_request_j"] = j_per_request
        rows.append({"variant": doc.get("variant"), "offered": step.get("offered"), "throughput_rps": rps,
                     "p99_us": (step.get("latency_us") or {}).get("p99"), "power_w": power,
                     "j_per_request": j_per_request, "verdict": step.get("verdict")})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--period-s", type=float, default=0.05)
    a = sub.add_parser("attach")
    a.add_argument("--power", type=Path, required=True)
    a.add_argument("docs", nargs="+", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "sample":
        return sample(args.out, args.period_s)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from accelbench.util import atomic_write_json

    samples = read_power(args.power)
    summary = []
    for path in args.docs:
        doc = json.loads(path.read_text())
        summary += attach(doc, samples)
        atomic_write_json(path, doc)  # accelbench's own layout: sorted keys, 2-space indent
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
