"""Generative result documents of a device run: per step, output tokens/s against the decode roofline.

    python bench/device/llm_summary.py RESULT.json… [--out DIR]    # prints Markdown; writes llm_summary.md

Decode bound at a step = the roofline (accelbench.hardware.roofline) of one decode step for ``concurrency``
sequences at the workload's mean context (ISL + OSL/2 tokens): the weights read once per step plus each
sequence's KV cache, or the FLOPs at the dense peak, whichever binds. The fraction of it reached is what an LLM
projection's decode efficiency is calibrated by (docs/llm-economics.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from accelbench.documents import load_result
from accelbench.errors import BadInputError
from accelbench.hardware.catalog import load_catalog
from accelbench.hardware.roofline import roofline_point


def rows(paths: list[str]) -> list[dict]:
    catalog = load_catalog()
    out = []
    for path in paths:
        doc = load_result(path)
        gc, workload = doc.graph_cost, doc.load_profile.workload
        if doc.task != "text-generation" or gc is None or workload is None:
            continue
        target = catalog.get(doc.target)
        context = (workload.isl or 0) + (workload.osl or 0) / 2
        for step in doc.steps:
            g = step.generative
            if g is None or g.output_tokens_per_s is None or not step.offered.concurrency:
                continue
            batch = int(step.offered.concurrency)
            bound = roofline_point(
                float(gc.flops_per_decode_token or 0), float(gc.kv_cache_bytes_per_token or 0) * context,
                batch, target, doc.precision, weight_bytes=float(gc.weight_bytes or 0),
            ).throughput_upper_bound_ips  # fmt: skip
            tok_s = float(g.output_tokens_per_s.value)
            out.append({"model": doc.model, "target": doc.target, "precision": doc.precision,
                        "concurrency": batch, "output_tok_s": tok_s, "decode_bound_tok_s": float(bound),
                        "fraction": tok_s / float(bound) if bound else None,
                        "ttft_p50_ms": g.ttft_us.p50 / 1e3 if g.ttft_us and g.ttft_us.p50 else None,
                        "itl_p50_ms": g.itl_us.p50 / 1e3 if g.itl_us and g.itl_us.p50 else None,
                        "verdict": step.verdict})  # fmt: skip
    return out


def markdown(table: list[dict]) -> str:
    lines = ["| model | target | precision | concurrency | output tok/s | decode roofline tok/s | fraction | "
             "TTFT p50 (ms) | ITL p50 (ms) | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in table:
        frac = f"{r['fraction']:.3g}" if r["fraction"] is not None else "—"
        ttft = f"{r['ttft_p50_ms']:.4g}" if r["ttft_p50_ms"] else "—"
        itl = f"{r['itl_p50_ms']:.4g}" if r["itl_p50_ms"] else "—"
        lines.append(f"| {r['model']} | {r['target']} | {r['precision']} | {r['concurrency']} | "
                     f"{r['output_tok_s']:.4g} | {r['decode_bound_tok_s']:.4g} | {frac} | {ttft} | {itl} | "
                     f"{r['verdict']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--out", default=None, help="folder for llm_summary.md")
    args = parser.parse_args()
    try:
        text = markdown(rows(args.results))
    except BadInputError as err:
        print(f"llm_summary: {err}", file=sys.stderr)
        sys.exit(2)
    print(text, end="")
    if args.out:
        Path(args.out, "llm_summary.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
