"""In-flight batching through Triton: output tokens/s of the served generative model at concurrency C vs 1.

    .venv/bin/python bench/llm_batching.py [--precision fp32] [--compare-precision int4] [--concurrency 8]
        [--isl 64] [--osl 64] [--duration-s 20] [--rounds 2] [--threads 2]

Quantizes ``builtin:llama-tiny`` for cpu-local (cached), serves it on the embedded tritonserver (HTTP
generate_stream, closed loop, ``ignore_eos``) and measures, interleaved in one run (1, C, C, 1, ...), the output
tokens/s at concurrency 1 and C. With ``--compare-precision`` it serves both variants side by side and also
prints the per-sequence decode tokens/s at concurrency 1 of each and their ratio, beside the ratio of the
bytes a decode step reads (weights + KV cache, from the manifests' graph_cost). Timings on a shared 2-core
machine drift: read the per-round ratios as a range.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from accelbench.hardware.llm_roofline import decode_context
from accelbench.models.quantize import QuantizeRequest, quantize
from accelbench.serving import LocalTriton
from accelbench.serving.repository import write_repository


def make_variants(precisions: list[str], out: Path) -> dict[str, Path]:
    found = {}
    for precision in precisions:
        manifests = quantize(
            QuantizeRequest(model="builtin:llama-tiny", target="cpu-local", precision=precision, out_dir=out)
        )
        found[precision] = out / manifests[-1].name
    return found


def stream(url: str, prompt: list[int], osl: int, client: httpx.Client) -> tuple[int, float, float]:
    """(output tokens, seconds to the first token, seconds of the whole request)."""
    start = time.perf_counter()
    first = None
    tokens = 0
    body = {"input_ids": prompt, "max_tokens": osl, "ignore_eos": True}
    with client.stream("POST", url, json=body, timeout=300) as response:
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.read()[:200]!r}")
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if "error" in event:
                raise RuntimeError(event["error"])
            ids = event["output_ids"]
            tokens += len(ids) if isinstance(ids, list) else 1
            first = first if first is not None else time.perf_counter() - start
    return tokens, first or 0.0, time.perf_counter() - start


def closed_loop(url: str, concurrency: int, isl: int, osl: int, duration_s: float, seed: int) -> dict:
    """Each of ``concurrency`` users sends its next request when the last ends; requests that end after the
    window count in full (the window is the time until the last one ends)."""
    rng = np.random.default_rng(seed)
    prompts = [[101, *rng.integers(1000, 29000, isl - 1).tolist()] for _ in range(64)]
    totals = {"tokens": 0, "requests": 0, "decode_s": 0.0, "decode_tokens": 0}
    lock = threading.Lock()
    stop_at = time.perf_counter() + duration_s

    def user(index: int) -> None:
        with httpx.Client() as client:
            n = index
            while time.perf_counter() < stop_at:
                tokens, ttft, e2e = stream(url, prompts[n % len(prompts)], osl, client)
                with lock:
                    totals["tokens"] += tokens
                    totals["requests"] += 1
                    totals["decode_s"] += e2e - ttft
                    totals["decode_tokens"] += tokens - 1
                n += concurrency

    start = time.perf_counter()
    threads = [threading.Thread(target=user, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    return {
        "concurrency": concurrency,
        "output_tokens_per_s": totals["tokens"] / elapsed,
        "requests": totals["requests"],
        # per sequence, after the first token: 1 / TPOT
        "decode_tokens_per_s_per_seq": totals["decode_tokens"] / totals["decode_s"]
        if totals["decode_s"]
        else 0,
    }


def bytes_per_decode_token(variant: Path, context: float) -> float:
    cost = json.loads((variant / "manifest.json").read_text())["graph_cost"]
    return cost["weight_bytes"] + cost["kv_cache_bytes_per_token"] * context


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--compare-precision", default=None, help="also serve this precision (int4, int8)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--isl", type=int, default=64)
    parser.add_argument("--osl", type=int, default=64)
    parser.add_argument("--duration-s", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None, help="variant folder (default: a temporary one)")
    args = parser.parse_args()
    precisions = [args.precision] + ([args.compare_precision] if args.compare_precision else [])
    with tempfile.TemporaryDirectory(prefix="llm-batching-") as tmp:
        variants = make_variants(precisions, Path(args.out or tmp) / "variants")
        repo = Path(tmp) / "repo"
        models = write_repository(
            list(variants.values()), repo, "local", {"intra_op_threads": args.threads, "max_sequences": 16}
        )
        names = dict(zip(precisions, (m.name for m in models), strict=True))
        with LocalTriton(repo) as triton:
            urls = {p: f"{triton.http_url}/v2/models/{n}/generate_stream" for p, n in names.items()}
            for url in urls.values():  # warm-up: first sessions runs, allocations
                closed_loop(url, 2, args.isl, 8, 2.0, seed=99)
            results: dict[tuple[str, int], list[dict]] = {}
            order = [1, args.concurrency, args.concurrency, 1]
            for r in range(args.rounds):
                for c in order if r % 2 == 0 else order[::-1]:
                    for precision in precisions if c == 1 else precisions[:1]:
                        got = closed_loop(urls[precision], c, args.isl, args.osl, args.duration_s, seed=r)
                        results.setdefault((precision, c), []).append(got)
                        print(
                            f"round {r} {precision} c={c}: {got['output_tokens_per_s']:.1f} output tok/s, "
                            f"{got['decode_tokens_per_s_per_seq']:.1f} decode tok/s per sequence, "
                            f"{got['requests']} requests",
                            flush=True,
                        )
    base = args.precision

    def median(precision: str, c: int, key: str) -> float:
        return statistics.median(x[key] for x in results[(precision, c)])

    one, many = median(base, 1, "output_tokens_per_s"), median(base, args.concurrency, "output_tokens_per_s")
    print(f"\n{base}: output tok/s c=1 {one:.1f}, c={args.concurrency} {many:.1f}: ratio {many / one:.2f}x")
    if args.compare_precision:
        other = args.compare_precision
        a, b = median(base, 1, "decode_tokens_per_s_per_seq"), median(other, 1, "decode_tokens_per_s_per_seq")
        context = decode_context(args.isl, args.osl)
        ratio_bytes = bytes_per_decode_token(variants[base], context) / bytes_per_decode_token(
            variants[other], context
        )
        print(
            f"decode tok/s at c=1: {base} {a:.1f}, {other} {b:.1f}: {other}/{base} {b / a:.2f}x; bytes read per "
            f"decode token {base}/{other} {ratio_bytes:.2f}x (weights + KV at context {context:.0f})"
        )


if __name__ == "__main__":
    main()
