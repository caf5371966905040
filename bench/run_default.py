"""Wall time of the default `accelbench run` from cold (fresh cache and output) and of the rerun that resumes.

    .venv/bin/python bench/run_default.py [--spec FILE] [--keep DIR]

Prints both times and their ratio; the issue's budget is 10 minutes cold on a 2-core machine (aim: 5).
Timings on shared machines drift a lot: run it when the machine is otherwise idle and report the load average.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(args: list[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "accelbench.cli", "run", *args], env=env, capture_output=True, text=True
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"accelbench run failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", help="spec file (default: the embedded default)")
    parser.add_argument("--keep", help="write the output here instead of a temporary folder")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="accelbench-bench-") as tmp:
        out = Path(opts.keep or Path(tmp) / "out")
        env = {
            **os.environ,
            "XDG_CACHE_HOME": str(Path(tmp) / "cache"),
        }  # cold: builtin models built, Triton set up
        args = ([opts.spec] if opts.spec else []) + ["--out", str(out), "--quiet"]
        load_before = os.getloadavg()[0]
        cold = _run(args, env)
        warm = _run(args, env)
        print(f"cold run   {cold:7.1f} s  (load average before: {load_before:.1f} on {os.cpu_count()} CPUs)")
        print(f"rerun      {warm:7.1f} s  (everything resumed)")
        print(f"cold/rerun {cold / warm:7.1f} x")


if __name__ == "__main__":
    main()
