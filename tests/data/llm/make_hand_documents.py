"""Writes tests/data/llm/hand/*.json: hand-made llama-tiny result documents on cpu-local (issue 22).

Hand-written from the result schema (docs/schema/result.schema.json) before llm-load's streaming load generator
existed: four concurrency levels of llama-tiny (fp32, cpu-local, ISL 128 / OSL 64, ignore_eos), with figures of
the size a 2-core CPU gives. They test the report's arithmetic, not a measurement; they are labelled
`provenance.note = "hand-written test document"`. Rerun: `python tests/data/llm/make_hand_documents.py`.
"""

from __future__ import annotations

from pathlib import Path

from accelbench.documents import ResultDocument, dump_json

HERE = Path(__file__).resolve().parent / "hand"
# concurrency -> (TPOT p50 ms, TPOT p99 ms, TTFT p99 ms, output tok/s, its 95 % interval half-width)
LEVELS = {1: (6.25, 6.9, 21.0, 152.0, 4.0), 2: (8.0, 9.1, 33.0, 236.0, 6.0), 4: (12.5, 14.2, 58.0, 301.0, 9.0),
          8: (21.0, 25.5, 121.0, 352.0, 14.0)}  # fmt: skip
ISL, OSL = 128, 64


def interval(value: float, half: float) -> dict:
    return {"value": value, "low": value - half, "high": value + half, "confidence": 0.95}


def step(index: int, c: int) -> dict:
    tpot50, tpot99, ttft99, out_tps, half = LEVELS[c]
    rps = out_tps / OSL
    e2e99 = ttft99 + (OSL - 1) * tpot99
    duration = 60.0
    requests = int(rps * duration)
    us = 1000.0
    return {
        "index": index, "offered": {"concurrency": c}, "duration_s": duration, "requests": requests,
        "inferences": requests, "errors": {"connection": 0, "timeout": 0, "server": 0, "wrong_output": 0},
        "error_rate": 0.0, "throughput_rps": rps, "throughput_ips": rps,
        "latency_us": {"p50": (ttft99 / 2 + (OSL - 1) * tpot50) * us, "p99": e2e99 * us},
        "verdict": "VALID", "reasons": [],
        "generative": {
            "requests": requests, "failed": 0,
            "ttft_us": {"p50": ttft99 * 0.6 * us, "p99": ttft99 * us},
            "itl_us": {"p50": tpot50 * us, "p99": tpot99 * 1.2 * us},
            "tpot_us": {"p50": tpot50 * us, "p99": tpot99 * us},
            "e2e_us": {"p50": (ttft99 * 0.6 + (OSL - 1) * tpot50) * us, "p99": e2e99 * us},
            "intervals": {
                "ttft_us": {"p99": interval(ttft99 * us, ttft99 * 0.08 * us)},
                "tpot_us": {"p99": interval(tpot99 * us, tpot99 * 0.05 * us)},
            },
            "gaps": requests * (OSL - 1),
            "input_tokens": {"total": requests * ISL, "mean": ISL, "min": ISL, "max": ISL, "asked": ISL},
            "output_tokens": {"total": requests * OSL, "mean": OSL, "min": OSL, "max": OSL, "asked": OSL},
            "short_outputs": 0, "output_length_ratio": 1.0,
            "output_tokens_per_s": {**interval(out_tps, half), "se": half / 2.0, "df": 19},
            "input_tokens_per_s": rps * ISL, "requests_per_s": rps,
            "tokens_per_s_per_user": 1000.0 / tpot50, "tokens_per_s_per_user_by_throughput": out_tps / c,
        },
    }  # fmt: skip


def document(c: int) -> ResultDocument:
    # llama-tiny: hidden 256, 4 layers, 4 heads, 2 KV heads (head 64), intermediate 688, vocab 30522, tied:
    # params = 4 × (2·256·256 + 2·256·128 + 3·256·688) + 30522·256 + 9·256 = 10,715,904; FP32 weights 4 B each;
    # KV per token FP32 = 2 × 4 × 2 × 64 × 4 = 4,096 B
    params = 4 * (2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 688) + 30522 * 256 + 9 * 256
    return ResultDocument.model_validate({
        "schema": "accelbench.result/1", "run_id": f"llama-tiny-c{c}", "origin": "accelbench-loadtest",
        "model": "llama-tiny", "variant": "llama-tiny__cpu-local__fp32", "target": "cpu-local", "precision": "fp32",
        "batch_size": 1, "task": "text-generation",
        "graph_cost": {"params": params, "weight_bytes": 4 * params, "precision": "fp32",
                       "flops_per_decode_token": 2 * params, "kv_cache_bytes_per_token": 4096, "kv_dtype": "fp32",
                       "context_length": 2048},
        "provenance": {"host": {"hostname": "hand"}, "packages": {}, "created_at": "2026-12-01T17:00:00Z",
                       "note": "hand-written test document (tests/data/llm/make_hand_documents.py)"},
        "load_profile": {"kind": "closed", "levels": [c], "duration_s": 60,
                         "workload": {"api": "triton", "isl": ISL, "osl": OSL, "ignore_eos": True,
                                      "prompts": "synthetic", "tokenizer": "builtin:minilm-wordpiece",
                                      "slo_ttft_p99_ms": 2000, "slo_tpot_p99_ms": 100}},
        "steps": [step(0, c)], "complete": True,
    })  # fmt: skip


if __name__ == "__main__":
    HERE.mkdir(parents=True, exist_ok=True)
    for c in LEVELS:
        (HERE / f"llama-tiny-c{c}.json").write_text(dump_json(document(c)))
