"""Checks before the served GPU run spends its minutes: torch sees the GPU, the python-backend stub for this
Python is there and finds its libpython, tensors round-trip through DLPack, /dev/shm has room for batches.

    python3 bench/device/preflight.py --device cuda     # report; exit 1 on a blocker
    python3 bench/device/preflight.py --libpython-dir   # print a folder to add to LD_LIBRARY_PATH, if needed

The stub links ``libpython3.X.so.1.0`` dynamically; a venv or a distribution python may keep it outside the
loader's default path (sysconfig LIBDIR), and then every python-backend model fails to load.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import sysconfig
from pathlib import Path


def stub_path() -> Path | None:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "tritonserver"
    stub = (
        root
        / "python_backend_stubs"
        / f"{sys.version_info.major}.{sys.version_info.minor}"
        / "triton_python_backend_stub"
    )
    return stub if stub.is_file() else None


def missing_libraries(binary: Path, extra_dir: str | None = None) -> list[str]:
    env = None
    if extra_dir:
        import os

        env = dict(
            os.environ,
            LD_LIBRARY_PATH=os.pathsep.join(filter(None, [extra_dir, os.environ.get("LD_LIBRARY_PATH")])),
        )
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if "not found" in line]


def libpython_dir(stub: Path) -> str | None:
    """A folder that holds the stub's libpython when the loader does not find it on its own."""
    if not any(name.startswith("libpython") for name in missing_libraries(stub)):
        return None
    name = f"libpython{sys.version_info.major}.{sys.version_info.minor}.so.1.0"
    candidates = [sysconfig.get_config_var("LIBDIR"), str(Path(sys.base_prefix) / "lib"),
                  str(Path(sys.executable).resolve().parent.parent / "lib"), "/usr/lib/x86_64-linux-gnu"]  # fmt: skip
    for folder in filter(None, candidates):
        if (Path(folder) / name).is_file():
            return folder
    return None


def shm_bytes() -> int | None:
    import os

    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def check(device: str) -> int:
    import numpy
    import torch
    from torch.utils.dlpack import from_dlpack, to_dlpack

    print(
        f"python {sys.version.split()[0]} {sys.executable}; numpy {numpy.__version__}; torch {torch.__version__}"
    )
    blockers = []
    if device == "cuda":
        if torch.cuda.is_available():
            print(f"GPU: {torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda}")
            x = torch.arange(6, device="cuda", dtype=torch.float16)
            if not torch.equal(from_dlpack(to_dlpack(x)), x):
                blockers.append("a DLPack round trip changed a CUDA tensor")
        else:
            blockers.append("torch sees no GPU (torch.cuda.is_available() is False)")
    stub = stub_path()
    if stub is None:
        blockers.append(f"no python-backend stub for Python {sys.version_info.major}.{sys.version_info.minor} "
                        "(is the slim nvidia-pytriton wheel installed on PYTHONPATH?)")  # fmt: skip
    else:
        extra = libpython_dir(stub)
        missing = missing_libraries(stub, extra)
        print(f"stub {stub}: missing libraries {missing or 'none'}" + (f" (with {extra})" if extra else ""))
        if missing:
            blockers.append(f"the python-backend stub cannot load {missing}")
    shm = shm_bytes()
    if shm is not None:
        # the python backend moves every batch through /dev/shm: resnet50 at batch 128 is 77 MB of input
        print(
            f"/dev/shm: {shm / 2**30:.1f} GiB"
            + ("  (small: lower max_batch_size with SETS)" if shm < 2**30 else "")
        )
    for blocker in blockers:
        print(f"preflight: {blocker}", file=sys.stderr)
    return 1 if blockers else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--libpython-dir", action="store_true", help="print the folder to add, if one is needed")
    args = ap.parse_args(argv)
    if args.libpython_dir:
        stub = stub_path()
        folder = libpython_dir(stub) if stub else None
        if folder:
            print(folder)
        return 0
    return check(args.device)


if __name__ == "__main__":
    sys.exit(main())
