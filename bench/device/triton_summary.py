"""Summarise the served GPU run: one row per load-test step, and each model's peak served throughput next to
the in-process figure of the committed device check (bench/results/h200/<date>/summary.json).

    python3 bench/device/triton_summary.py RESULT.json... --out DIR [--in-process SUMMARY.json]

Writes DIR/summary.json and DIR/summary.md. The ratio served/in-process is the serving overhead on the GPU
(HTTP, Triton's queue and dynamic batcher, the python-backend stub, DLPack, the batch copy to host).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def latest_in_process() -> Path | None:
    found = sorted((ROOT / "bench" / "results" / "h200").glob("*/summary.json"))
    return found[-1] if found else None


def step_rows(doc: dict) -> list[dict]:
    rows = []
    for step in doc.get("steps") or []:
        metrics = step.get("metrics") or {}
        lat = step.get("latency_us") or {}
        rows.append({
            "model": doc.get("model"), "variant": doc.get("variant"), "precision": doc.get("precision"),
            "concurrency": (step.get("offered") or {}).get("concurrency"),
            "throughput_rps": step.get("throughput_rps"), "p50_us": lat.get("p50"), "p99_us": lat.get("p99"),
            "mean_batch_size": (step.get("server_stats") or {}).get("mean_batch_size"),
            "power_w": metrics.get("gpu_power_w") or metrics.get("nvml_power_w"),
            "j_per_request": step.get("energy_per_request_j"), "verdict": step.get("verdict"),
            "reasons": step.get("reasons") or [],
        })  # fmt: skip
    return rows


def peaks(rows: list[dict], in_process: dict | None) -> list[dict]:
    out = []
    reference = (in_process or {}).get("rows") or []
    for model in dict.fromkeys(r["model"] for r in rows):
        valid = [r for r in rows if r["model"] == model and r["verdict"] == "VALID" and r["throughput_rps"]]
        served = max((r["throughput_rps"] for r in valid), default=None)
        mine = [r for r in reference if r.get("model") == model]
        best = max(mine, key=lambda r: r["measured_ips"], default=None)
        out.append({
            "model": model, "served_peak_rps": served,
            "in_process_peak_ips": best["measured_ips"] if best else None,
            "in_process_batch": best["batch"] if best else None,
            "in_process_precision": best["precision"] if best else None,
            "served_over_in_process": served / best["measured_ips"] if served and best else None,
        })  # fmt: skip
    return out


def _fmt(value, pattern: str = "{:,.1f}") -> str:
    return "n/a" if value is None else pattern.format(value)


def markdown(rows: list[dict], summary: list[dict]) -> str:
    out = ["# Served through Triton (torch-cuda flavor)", "",
           "| variant | concurrency | req/s | p50 µs | p99 µs | mean batch | W | J/request | verdict |",
           "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        out.append(f"| {r['variant']} | {r['concurrency']} | {_fmt(r['throughput_rps'])} | {_fmt(r['p50_us'], '{:,.0f}')} | "
                   f"{_fmt(r['p99_us'], '{:,.0f}')} | {_fmt(r['mean_batch_size'], '{:.2f}')} | "
                   f"{_fmt(r['power_w'], '{:.0f}')} | {_fmt(r['j_per_request'], '{:.4f}')} | {r['verdict']} |")  # fmt: skip
    out += ["", "| model | served peak req/s | in-process peak inf/s (batch, precision) | served / in-process |",
            "|---|---|---|---|"]  # fmt: skip
    for p in summary:
        out.append(f"| {p['model']} | {_fmt(p['served_peak_rps'])} | {_fmt(p['in_process_peak_ips'])} "
                   f"({p['in_process_batch']}, {p['in_process_precision']}) | {_fmt(p['served_over_in_process'], '{:.3f}')} |")  # fmt: skip
    return "\n".join(out) + "\n"


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("docs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--in-process", type=Path, default=None, help="a device-check summary.json (default: latest)"
    )
    args = ap.parse_args(argv)
    rows = []
    for path in args.docs:
        rows += step_rows(json.loads(path.read_text()))
    reference_path = args.in_process or latest_in_process()
    reference = (
        json.loads(reference_path.read_text()) if reference_path and reference_path.is_file() else None
    )
    summary = peaks(rows, reference)
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {
        "rows": rows,
        "peaks": summary,
        "in_process_source": _relative(reference_path) if reference else None,
    }
    (args.out / "summary.json").write_text(json.dumps(doc, indent=2) + "\n")
    (args.out / "summary.md").write_text(markdown(rows, summary))
    print(markdown(rows, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
