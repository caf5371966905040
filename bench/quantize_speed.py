"""ORT CPU latency of each INT8 variant relative to FP32, measured side by side, with its accuracy.

    .venv/bin/python bench/quantize_speed.py [--models bert-base minilm-l6] [--batches 1 8] [--rounds 5]

For each built-in model: make the FP32 reference, INT8 dynamic per-channel and INT8 static QDQ (CPU) variants
(``accelbench.models.quantize``, target c7i.xlarge), then time them interleaved — FP32, dyn, static, FP32, … —
so that drift on a shared machine hits all variants alike. Prints per batch the median latency and the
FP32/INT8 ratio (median and range over rounds), and the accuracy verdict from each manifest. Timings on
2 shared cores drift 30-70 %: read ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from accelbench.models.inputs import make_inputs
from accelbench.models.quantize import QuantizeRequest, quantize

RECIPES = ("ort-dynamic-int8-per-channel", "ort-static-qdq-int8")


def make_variants(model: str, out: Path) -> dict[str, dict]:
    """recipe -> manifest (with the folder under ``_dir``) for FP32 and each INT8 recipe."""
    found = {}
    for recipe in RECIPES:
        request = QuantizeRequest(
            model=f"builtin:{model}",
            target="c7i.xlarge",
            precision="int8",
            out_dir=out / recipe,
            recipe=recipe,
        )
        fp32, int8 = quantize(request)
        found.setdefault("fp32", {**fp32, "_dir": out / recipe / fp32["name"]})
        found[recipe] = {**int8, "_dir": out / recipe / int8["name"]}
    return found


def session(path: Path, threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def time_interleaved(sessions: dict, feed: dict, rounds: int, iters: int) -> dict[str, list[float]]:
    """Per variant, one median latency (ms) per round; variants alternate within every round."""
    for s in sessions.values():
        s.run(None, feed)  # warm-up
    per_round: dict[str, list[float]] = {k: [] for k in sessions}
    for _ in range(rounds):
        samples: dict[str, list[float]] = {k: [] for k in sessions}
        for _ in range(iters):
            for name, s in sessions.items():
                t0 = time.perf_counter()
                s.run(None, feed)
                samples[name].append((time.perf_counter() - t0) * 1e3)
        for name, values in samples.items():
            per_round[name].append(statistics.median(values))
    return per_round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["bert-base", "minilm-l6"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="variant folder (default: a temporary one)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="quantize_speed_"))
    print("model      batch variant                        p50_ms  fp32/int8 (median, range)  accuracy")
    for model in args.models:
        variants = make_variants(model, out / model)
        sessions = {k: session(v["_dir"] / "model.onnx", args.threads) for k, v in variants.items()}
        card = variants["fp32"]["card"]
        from accelbench.models.cards import card_from_dict

        for batch in args.batches:
            feed = make_inputs(card_from_dict(card), batch, 1, seed=7)[0]
            rounds = time_interleaved(sessions, feed, args.rounds, args.iters)
            base = rounds["fp32"]
            for name, values in rounds.items():
                ratios = [b / v for b, v in zip(base, values, strict=True)]
                acc = variants[name]["accuracy"]
                print(
                    f"{model:10s} {batch:5d} {name:30s} {statistics.median(values):7.1f}  "
                    f"{statistics.median(ratios):5.2f}x ({min(ratios):.2f}-{max(ratios):.2f})           "
                    f"{acc['metric']} {acc['value']:.4f} worst {acc['worst']:.4f} {acc['verdict']}",
                    flush=True,
                )
    print(f"variants in {out}; numpy {np.__version__}, onnxruntime {ort.__version__}")


if __name__ == "__main__":
    main()
