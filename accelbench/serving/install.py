"""Install what the embedded tritonserver needs beyond ``pip install accelbench`` (``make`` runs this once):

    python -m accelbench.serving.install [--no-server] [--no-stub-env]

1. the ``nvidia-pytriton`` wheel, which carries tritonserver 2.51, with ``--no-deps``: its metadata pins
   ``numpy<2`` for its own Python client, which accelbench never imports (it runs only the binaries), so
   installing its dependencies would downgrade numpy and pandas;
2. the python-backend stub's own environment: the stub converts tensors for ``as_numpy()`` and
   ``Tensor(name, array)`` with a pybind11 built for numpy 1, which corrupts every tensor under numpy 2. Models
   that cross that bridge (BYTES tensors, the generative model, models accelbench did not write) run with this
   venv first on the server's PATH: its own site-packages hold ``numpy<2`` and a ``.pth`` adds this
   environment's site-packages after them, so the stub imports onnxruntime, tokenizers, torch from here and
   only numpy differs. Models written with ``tensor_transport: dlpack`` need neither (docs/serving.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

from accelbench.errors import ToolchainMissingError
from accelbench.serving.embedded import stub_env_dir, stub_env_ready

PYTRITON = "nvidia-pytriton"
PYTRITON_VERSION = "0.7.0"  # the last release (2025-08): tritonserver 2.51
STUB_NUMPY = "numpy>=1.24,<2"


def _pip(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]
    return subprocess.run(cmd, capture_output=True, text=True)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("WARNING:")]
    return lines[-1] if lines else "no output"


def install_server() -> str:
    """``nvidia-pytriton`` at the tested version, without its dependencies; what was done, in words."""
    try:
        if metadata.version(PYTRITON) == PYTRITON_VERSION:
            return f"{PYTRITON} {PYTRITON_VERSION} already installed"
    except metadata.PackageNotFoundError:
        pass
    done = _pip("--no-deps", f"{PYTRITON}=={PYTRITON_VERSION}")
    if done.returncode != 0:
        raise ToolchainMissingError(
            f"pip could not install {PYTRITON}=={PYTRITON_VERSION}: {_last_line(done.stderr)}"
        )
    return f"installed {PYTRITON} {PYTRITON_VERSION} (--no-deps: its numpy<2 pin is for its client)"


def build_stub_env(target: Path | None = None, parent_sites: tuple[str, ...] | None = None) -> Path:
    """The stub's environment at ``target`` (default: ``stub_env_dir()``), built once; its path.

    ``parent_sites``: the site-packages its ``.pth`` adds after numpy<2 (default: this environment's)."""
    target = target or stub_env_dir()
    if stub_env_ready(target):
        return target
    staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(staging)], check=True, capture_output=True
        )
        site = Path(sysconfig.get_path("purelib", vars={"base": str(staging), "platbase": str(staging)}))
        # wheels only: numpy<2 has none for Python >= 3.13, and a source build would take long and then fail
        done = _pip("--no-deps", "--only-binary=:all:", "--target", str(site), STUB_NUMPY)
        if done.returncode != 0:
            raise ToolchainMissingError(
                f"pip could not install {STUB_NUMPY} for the python-backend stub (Python "
                f"{sys.version_info.major}.{sys.version_info.minor}): {_last_line(done.stderr)}; models "
                "written with tensor_transport dlpack still serve without it"
            )
        ours = dict.fromkeys(parent_sites or [sysconfig.get_path(k) for k in ("purelib", "platlib")])
        # addsitedir, not a bare path: this environment's own .pth files (editable installs) apply too
        lines = [f"import site; site.addsitedir({path!r})" for path in ours]
        (site / "zz_accelbench_parent_env.pth").write_text("\n".join(lines) + "\n")
        (staging / ".complete").write_text(f"{STUB_NUMPY} over {sys.prefix}\n")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            staging.rename(target)
        except OSError:  # another process finished first (or an unfinished one is in the way)
            if not stub_env_ready(target):
                shutil.rmtree(target, ignore_errors=True)
                staging.rename(target)
    except subprocess.CalledProcessError as err:
        raise ToolchainMissingError(
            f"could not create the stub's venv: {_last_line(err.stderr.decode())}"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m accelbench.serving.install", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--no-server", action="store_true", help="skip the nvidia-pytriton wheel")
    parser.add_argument("--no-stub-env", action="store_true", help="skip the stub's numpy<2 environment")
    args = parser.parse_args(argv)
    try:
        if not args.no_server:
            print(install_server())
        if not args.no_stub_env:
            print(f"python-backend stub environment ({STUB_NUMPY}): {build_stub_env()}")
    except ToolchainMissingError as err:
        print(f"accelbench: {err}", file=sys.stderr)
        return err.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
