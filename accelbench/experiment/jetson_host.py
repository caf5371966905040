"""What `accelbench validate` reads from a Jetson: versions, module, power mode, engine, tegrastats.

Live reads (``/etc/nv_tegra_release``, ``/proc/device-tree/model``, ``nvpmodel -q``, ``jetson_clocks --show``,
a ``tegrastats`` child process) or recorded files in their place. Parsing of the text formats is pure and
lives in ``accelbench.hardware`` where it can be shared; this module does the I/O and the decisions.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError
from accelbench.hardware import tegrastats
from accelbench.hardware.jetson import parse_device_tree_model, parse_nv_tegra_release, parse_nvpmodel_query

RELEASE_FILE = "/etc/nv_tegra_release"
MODEL_FILES = ("/proc/device-tree/model", "/sys/firmware/devicetree/base/model")
# catalog id fragment -> the words the device-tree model string carries for that module family
_FAMILIES = (("agx-orin", "AGX Orin"), ("orin-nx", "Orin NX"), ("orin-nano", "Orin Nano"), ("thor", "Thor"))


_CLOCK = re.compile(
    r"^(?P<unit>GPU|EMC)\s+MinFreq=(?P<min>\d+)\s+MaxFreq=(?P<max>\d+)\s+CurrentFreq=(?P<cur>\d+)", re.M
)


def parse_jetson_clocks_show(text: str) -> dict[str, Any]:
    """GPU and EMC min/max/current Hz from ``jetson_clocks --show``; pinned when current == max for both."""
    clocks = {m["unit"].lower(): {k: int(m[k]) for k in ("min", "max", "cur")} for m in _CLOCK.finditer(text)}
    pinned = bool(clocks) and all(c["cur"] == c["max"] for c in clocks.values())
    soc = re.search(r"Machine:\s*(.+)", text)
    return {"clocks_hz": clocks, "pinned_to_max": pinned, "machine": soc.group(1).strip() if soc else None}


@dataclass(frozen=True)
class HostFacts:
    l4t: str | None
    jetpack: str | None
    device_model: str | None
    power_mode: dict[str, Any] | None
    clocks: dict[str, Any] | None
    tensorrt: str | None
    recorded_tegrastats: list[tegrastats.TegraSample] | None


def _read(path: str | None, what: str) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise BadInputError(f"{path}: cannot read the recorded {what} ({err.strerror})") from None


def _live_file(paths: tuple[str, ...]) -> str | None:
    for path in paths:
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace").replace("\x00", "").strip()
        except OSError:
            continue
    return None


def _live_command(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _tensorrt_version() -> str | None:
    try:
        import tensorrt  # only on GPU hosts and Jetsons
    except ImportError:
        return None
    return str(tensorrt.__version__)


def read_facts(inputs: Any) -> HostFacts:
    """Recorded files where given (``inputs`` is a JetsonInputs), the live device otherwise."""
    release = (
        _read(inputs.nv_tegra_release, "nv_tegra_release")
        if inputs.nv_tegra_release
        else _live_file((RELEASE_FILE,))
    )
    model = (
        _read(inputs.device_model, "device-tree model") if inputs.device_model else _live_file(MODEL_FILES)
    )
    nvp = (
        _read(inputs.nvpmodel, "nvpmodel -q output") if inputs.nvpmodel else _live_command(["nvpmodel", "-q"])
    )
    clocks = (
        _read(inputs.jetson_clocks, "jetson_clocks --show output")
        if inputs.jetson_clocks
        else _live_command(["jetson_clocks", "--show"])
    )
    model = parse_device_tree_model(model) if model else None
    recorded = None
    if inputs.tegrastats:
        recorded = tegrastats.parse_log((_read(inputs.tegrastats, "tegrastats log") or "").splitlines())
        if not recorded:
            raise BadInputError(f"{inputs.tegrastats}: no tegrastats lines in this file")
    version = _parse(parse_nv_tegra_release, release, inputs.nv_tegra_release)
    mode = _parse(parse_nvpmodel_query, nvp, inputs.nvpmodel)
    return HostFacts(
        l4t=version["l4t"] if version else None,
        jetpack=version["jetpack"] if version else None,
        device_model=next(iter(model.splitlines()), None) if model else None,
        power_mode={"name": mode["mode_name"], "id": mode["mode_id"]} if mode else None,
        clocks=parse_jetson_clocks_show(clocks) if clocks else None,
        tensorrt=_tensorrt_version(),
        recorded_tegrastats=recorded,
    )


def _parse(
    parser: Callable[[str], dict[str, Any]], text: str | None, path: str | None
) -> dict[str, Any] | None:
    """A recorded file that does not parse is bad input; a live read that does not parse is "unknown"."""
    if not text:
        return None
    try:
        return parser(text)
    except ValueError as err:
        if path:
            raise BadInputError(f"{path}: {err}") from None
        return None


def target_family(target_id: str) -> str | None:
    """The module family words for a Jetson catalog id (``jetson-agx-orin-64gb`` -> ``AGX Orin``)."""
    return next((words for fragment, words in _FAMILIES if fragment in target_id), None)


_VERSION_IN_TEXT = {
    "l4t": re.compile(r"(?:L4T|R)\s*(\d+(?:\.\d+){1,2})", re.I),
    "jetpack": re.compile(r"JetPack\s*(\d+(?:\.\d+){0,2})", re.I),
    "tensorrt": re.compile(r"TensorRT\s*(\d+(?:\.\d+){0,3})", re.I),
}


def required_versions(manifest: VariantManifest) -> dict[str, str]:
    """L4T / JetPack / TensorRT versions the variant was built for, from its engine and toolchain records."""
    wanted: dict[str, str] = {}
    engine = manifest.engine
    requirement = engine.host_requirement if engine else None
    if isinstance(requirement, dict):
        for key in ("l4t", "jetpack", "tensorrt"):
            if requirement.get(key):
                wanted[key] = str(requirement[key])
    elif isinstance(requirement, str):
        for key, pattern in _VERSION_IN_TEXT.items():
            if match := pattern.search(requirement):
                wanted[key] = match.group(1)
    toolchain = manifest.toolchain
    if toolchain.name == "tensorrt" and engine and engine.status == "built" and toolchain.version:
        wanted.setdefault("tensorrt", str(toolchain.version))
    return wanted


def version_matches(have: str, need: str) -> bool:
    """``36.4.3`` satisfies ``36.4``; engines need the same release, so no "at least" semantics."""
    have_parts, need_parts = have.split("."), need.split(".")
    return have_parts[: len(need_parts)] == need_parts


Session = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


def load_engine(vdir: Path, manifest: VariantManifest) -> tuple[Session | None, str]:
    """A callable running the variant, and how it runs: TensorRT when it is here, else ORT CPU stand-in."""
    plan = vdir / "model.plan"
    if plan.is_file() and _tensorrt_version():
        return _tensorrt_session(plan)
    onnx_file = vdir / manifest.model_file
    if manifest.format != "onnx":
        onnx_file = vdir / "model.onnx"
    if not onnx_file.is_file():
        return None, f"no engine here: {plan.name} needs TensorRT and {onnx_file.name} is missing"
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(onnx_file), opts, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types for malformed models
        return None, f"{onnx_file.name} does not load in onnxruntime: {str(err).splitlines()[0]}"
    names = [o.name for o in session.get_outputs()]

    def run(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(names, session.run(names, feed), strict=True))

    return (
        run,
        f"onnxruntime {ort.__version__} CPU stand-in loaded {onnx_file.name} (TensorRT not on this host)",
    )


def _tensorrt_session(plan: Path) -> tuple[Session | None, str]:  # pragma: no cover - needs a GPU/Jetson
    try:
        from polygraphy.backend.common import BytesFromPath
        from polygraphy.backend.trt import EngineFromBytes, TrtRunner
    except ImportError:
        return None, "model.plan found but polygraphy is not installed (pip install 'accelbench[tensorrt]')"
    try:
        runner = TrtRunner(EngineFromBytes(BytesFromPath(str(plan))))
        runner.activate()
    except Exception as err:  # a plan from another TensorRT version or GPU fails to deserialize here
        return None, f"{plan.name} does not deserialize: {str(err).splitlines()[0]}"
    return (
        lambda feed: dict(runner.infer(feed))
    ), f"TensorRT {_tensorrt_version()} engine {plan.name} loaded"


def reference_rows(vdir: Path) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]:
    """Held-out reference inputs and FP32 outputs, one batch-1 feed per sample."""
    from accelbench.models.accuracy import read_reference

    inputs, outputs = read_reference(vdir)
    count = len(next(iter(inputs.values())))
    feeds = [{k: v[i : i + 1] for k, v in inputs.items()} for i in range(count)]
    refs = [{k: v[i : i + 1] for k, v in outputs.items()} for i in range(count)]
    return feeds, refs


def metric_value(metric: str, got: list[np.ndarray], reference: list[np.ndarray]) -> float:
    """The card's metric (value, not worst) over all samples, as the quantize gate computes it."""
    from accelbench.models.accuracy import compare

    return compare(metric, np.concatenate(reference), np.concatenate(got).astype(np.float32))[0]


class TegrastatsSampler:
    """Samples tegrastats during the load (a child process at 100 ms), or replays a recorded file."""

    def __init__(self, recorded: list[tegrastats.TegraSample] | None) -> None:
        self.recorded = recorded is not None
        self.samples: list[tegrastats.TegraSample] = list(recorded or [])
        self._proc: subprocess.Popen | None = None
        self._lines: list[str] = []
        self._reader: threading.Thread | None = None

    def __enter__(self) -> TegrastatsSampler:
        if not self.recorded and shutil.which("tegrastats"):
            self._proc = subprocess.Popen(
                ["tegrastats", "--interval", "100"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.append(line)

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._reader is not None:
                self._reader.join(timeout=2)
            self.samples = tegrastats.parse_log(self._lines)
