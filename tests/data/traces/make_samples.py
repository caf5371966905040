"""Writes the two sample traces of this folder (README.md): fixed seed, no download.

python tests/data/traces/make_samples.py
"""

import json
import random
from pathlib import Path

HERE = Path(__file__).parent


def main() -> None:
    rng = random.Random(7)
    t, lines = 0.0, []
    for i in range(60):  # about 20 requests/s, every tenth 5 ms after the one before (a burst)
        t += rng.expovariate(20) * 1000 if i % 10 else 5.0
        root = rng.randrange(3) * 10  # three shared two-block prefixes
        isl = rng.randint(20, 60)
        blocks = (isl + 15) // 16
        ids = [root, root + 1] + [1000 + i * 10 + k for k in range(max(0, blocks - 2))]
        lines.append(json.dumps({"timestamp": round(t), "input_length": isl, "output_length": rng.randint(2, 6),
                                 "hash_ids": ids[:blocks]}))  # fmt: skip
    (HERE / "mooncake_sample.jsonl").write_text("\n".join(lines) + "\n")
    rows, t = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"], 0.0
    for _ in range(40):
        t += rng.expovariate(10)
        a, b = rng.randint(10, 80), rng.randint(0, 8)
        rows.append(f"{t:.3f},ChatGPT,{a},{b},{a + b},Conversation log")
    (HERE / "burstgpt_sample.csv").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
