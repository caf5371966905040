"""TensorRT toolchain (datacenter GPUs and Jetson): a QDQ/FP16 ONNX here, the engine on the target.

The ONNX (made with ONNX Runtime's quantizer: symmetric S8 activations and weights, per-channel, QDQ) is
portable; a TensorRT engine is not — it is specific to the GPU model and the TensorRT version that built it
(DOMAIN.md §3.6). So the engine is built here only when ``tensorrt`` imports, a GPU is present and that GPU
is the target; otherwise ``build_engine.sh`` (trtexec, branching on TensorRT 10 vs 11) is written beside the
ONNX and the manifest says the engine must be built on the target.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError, ToolchainMissingError
from accelbench.hardware.catalog import HardwareTarget
from accelbench.models.toolchains import VariantOptions, VariantResult, attempts
from accelbench.models.toolchains import onnxruntime as ort_tc

PLAN_FILE = "model.plan"
SCRIPT_FILE = "build_engine.sh"
WORKSPACE_MIB = 4096
_RECIPE_FOR = {"int8": "qdq-int8-symmetric", "fp16": "fp16", "fp32": "fp32-reference"}
# words in catalog names that do not identify the GPU chip
_NAME_NOISE = {"NVIDIA", "JETSON", "AGX", "TESLA", "GEFORCE", "RTX"}


def available() -> str | None:
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        return "TensorRT is not installed here (pip install accelbench[tensorrt] on the GPU host)"
    return None


def precisions(target: HardwareTarget | None = None) -> tuple[str, ...]:
    return ("int8", "fp16", "fp32")


def default_precision(target: HardwareTarget | None = None) -> str:
    return "int8"


def default_recipe(precision: str, kind: str) -> str:
    """The recipe a TensorRT target gets: transformers' INT8 adds SmoothQuant (docs/quantization.md)."""
    if precision == "int8" and kind == "transformer":
        return "qdq-int8-symmetric-smoothquant"
    return _RECIPE_FOR[precision]


def host_requirement(target: HardwareTarget) -> str:
    cc = f" (compute capability {target.compute_capability})" if target.compute_capability else ""
    return f"an {target.name}{cc} with TensorRT 10 or 11 (engines are specific to the GPU model and TensorRT version)"


def make_variant(
    resolved: Any, target: HardwareTarget, precision: str, out_dir: str | Path, options: VariantOptions
) -> VariantResult:
    """Write model.onnx (QDQ INT8 / FP16 / FP32) and either model.plan or build_engine.sh."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recipes = attempts.chain(default_recipe(precision, ort_tc.model_kind(resolved.onnx_path)), options.recipe)
    onnx_path = out / ort_tc.MODEL_FILE
    card = resolved.card
    # shapes first: a card without fixed dims should fail before minutes of calibration, not after
    shapes = profile_shapes(card, target, static=options.dla_core is not None)
    # a failure inside ORT's quantizer is one line, recorded, and the next (symmetric) recipe is tried
    sample = options.calibration[0] if options.calibration else None
    recipe, calibration, tried = attempts.try_in_order(
        recipes,
        lambda r: ort_tc.run_recipe(r, Path(resolved.onnx_path), onnx_path, options),
        onnx_path,
        sample,
        f"{precision} variant of {out.name}",
    )
    script = build_script(target, precision, shapes, options.dla_core)
    (out / SCRIPT_FILE).write_text(script)
    (out / SCRIPT_FILE).chmod(0o755)
    result = VariantResult(
        precision=precision,
        recipe=f"{recipe}" if recipe != "fp16" else "fp16-keep-io",
        format="onnx",
        model_file=ort_tc.MODEL_FILE,
        toolchain={"name": "onnxruntime", "version": ort_tc.version()},
        calibration=calibration,
        attempts=tried,
        engine={
            "status": "must-build-on-target",
            "script": SCRIPT_FILE,
            "host_requirement": host_requirement(target),
        },
    )
    why_not = build_refusal(target, options.probe if options.probe is not None else probe_gpus())
    if options.require_engine and (why_not or available()):
        raise ToolchainMissingError(
            f"refusing to build the {target.id} engine here: {why_not or available()}"
        )
    if why_not is None and available() is None and options.build_engine:
        version = build_engine(onnx_path, out / PLAN_FILE, shapes, precision, options.dla_core)
        result.format, result.model_file = "tensorrt-plan", PLAN_FILE
        result.toolchain = {"name": "tensorrt", "version": version}
        result.engine = {
            "status": "built",
            "script": SCRIPT_FILE,
            "host_requirement": host_requirement(target),
        }
    else:
        result.notes.append(
            f"TensorRT engine not built here ({why_not or available() or 'disabled'}); it must be built on "
            f"{target.name}: run {SCRIPT_FILE} there"
        )
    return result


def probe_gpus() -> dict[str, Any]:
    """``{"gpus": [{"name", "compute_capability"}]}`` for this host (empty without an NVIDIA GPU)."""
    try:
        from accelbench.hardware import probe as hw_probe  # the hardware stage's probe, when present

        found = hw_probe.probe_host() if hasattr(hw_probe, "probe_host") else None
        if isinstance(found, dict) and "gpus" in found:
            return {
                "gpus": [
                    {"name": g.get("name", ""), "compute_capability": g.get("compute_capability")}
                    for g in found["gpus"]
                ]
            }
    except ImportError:
        pass
    try:
        text = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {"gpus": []}
    gpus = []
    for line in text.strip().splitlines():
        name, _, cc = line.partition(",")
        gpus.append({"name": name.strip(), "compute_capability": cc.strip() or None})
    return {"gpus": gpus}


def chip_key(name: str) -> str:
    """The word that identifies the GPU chip in a name: 'NVIDIA L40S' → 'L40S', 'Jetson AGX Orin 64GB' → 'ORIN'."""
    words = name.upper().replace("-", " ").replace("_", " ").split("(")[0].split()
    return next((w for w in words if w not in _NAME_NOISE), "")


def build_refusal(target: HardwareTarget, probe: dict[str, Any]) -> str | None:
    """Why this host must not build ``target``'s engine, or None when it is that GPU."""
    gpus = probe.get("gpus") or []
    if not gpus:
        return "no NVIDIA GPU on this host"
    want = chip_key(target.name)
    for gpu in gpus:
        words = gpu["name"].upper().replace("-", " ").split()
        cc_ok = not (target.compute_capability and gpu.get("compute_capability")) or (
            str(gpu["compute_capability"]) == str(target.compute_capability)
        )
        if want in words and cc_ok:
            return None
    found = ", ".join(f"{g['name']} (cc {g.get('compute_capability')})" for g in gpus)
    return f"this host has {found}, not {target.name}; an engine built here would not be valid there"


def profile_shapes(
    card: Any, target: HardwareTarget, static: bool = False
) -> dict[str, dict[str, tuple[int, ...]]]:
    """min/opt/max shapes per input: batch 1 / the largest preferred batch / Triton's max batch."""
    triton = getattr(target, "triton", None)
    max_b = max(1, getattr(triton, "max_batch_size", 8))
    opt_b = min(max_b, max(getattr(triton, "preferred_batch_sizes", (8,)) or (8,)))
    shapes = {}
    fixed = _card_shapes(card)
    for spec in card.inputs:
        rest = tuple(fixed.get(spec.name, spec.shape)[1:])
        if any(d < 1 for d in rest):
            raise BadInputError(
                f"input {spec.name!r}: TensorRT needs fixed non-batch dims, got {rest}; "
                "give them in a model card (e.g. shape = [-1, 128]) or a tokens generator's seq_len"
            )
        lo = opt_b if static else 1  # DLA has no dynamic shapes: min = opt = max
        hi = opt_b if static else max_b
        shapes[spec.name] = {"min": (lo, *rest), "opt": (opt_b, *rest), "max": (hi, *rest)}
    return shapes


def _card_shapes(card: Any) -> dict[str, list[int]]:
    """The card's shapes with a dynamic sequence dim filled from its tokens generator, when it has one."""
    if getattr(card, "generator", None) is None:
        return {}
    from accelbench.models.roofline_report import card_input_shapes

    return card_input_shapes(card)


def _shape_flag(shapes: dict[str, dict[str, tuple[int, ...]]], which: str) -> str:
    return ",".join(f"{name}:{'x'.join(map(str, s[which]))}" for name, s in shapes.items())


def build_script(
    target: HardwareTarget,
    precision: str,
    shapes: dict[str, dict[str, tuple[int, ...]]],
    dla_core: int | None = None,
) -> str:
    """A bash script that builds model.plan with trtexec on the target, for TensorRT 10 or 11."""
    weak = {"int8": "--int8 --fp16", "fp16": "--fp16", "fp32": ""}[precision]
    shape_args = " ".join(f"--{w}Shapes={_shape_flag(shapes, w)}" for w in ("min", "opt", "max"))
    dla = f" --useDLACore={dla_core} --allowGPUFallback" if dla_core is not None else ""
    return f"""#!/usr/bin/env bash
# Build the TensorRT engine for this variant ON THE TARGET: {host_requirement(target)}.
# Engines are not portable across GPU models or TensorRT versions, so this cannot be done ahead of time.
set -euo pipefail
cd "$(dirname "$0")"
TRTEXEC="${{TRTEXEC:-$(command -v trtexec || echo /usr/src/tensorrt/bin/trtexec)}}"
{gpu_guard(target)}
# TensorRT version: trtexec prints e.g. [TensorRT v100300] (10.3.0); fall back to the Debian package
TRT_TAG="$("$TRTEXEC" --help 2>&1 | grep -oE 'TensorRT v[0-9]+' | head -n1 | grep -oE '[0-9]+' || true)"
if [[ -n "$TRT_TAG" ]]; then
  if (( TRT_TAG >= 10000 )); then TRT_MAJOR=$(( TRT_TAG / 10000 )); else TRT_MAJOR=$(( TRT_TAG / 1000 )); fi
else
  TRT_VERSION="$(dpkg-query -W -f='${{Version}}' tensorrt 2>/dev/null || dpkg-query -W -f='${{Version}}' libnvinfer-bin 2>/dev/null || echo 10)"
  TRT_MAJOR="${{TRT_VERSION%%.*}}"
fi
if (( TRT_MAJOR >= 11 )); then
  # TensorRT 11 is strongly typed: precision comes only from the graph (Q/DQ nodes, FP16 tensors)
  PRECISION_FLAGS=""
else
  # TensorRT 10: weak typing; the flags allow INT8/FP16 kernels, Q/DQ placement decides what is INT8
  PRECISION_FLAGS="{weak}"
fi
echo "building {PLAN_FILE} with TensorRT $TRT_MAJOR on $GPU" >&2
"$TRTEXEC" --onnx=model.onnx --saveEngine={PLAN_FILE} $PRECISION_FLAGS \\
  {shape_args} \\
  --memPoolSize=workspace:{WORKSPACE_MIB}{dla} --skipInference
"""


def gpu_guard(target: HardwareTarget, script: str = SCRIPT_FILE) -> str:
    """Bash lines that exit 1 unless this host's GPU is the target's (whole words: an L40S is not an L4)."""
    want = re.sub(r"[^A-Z0-9.]", "", chip_key(target.name))  # a plain word inside the quoted pattern
    return f"""GPU="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1 || true)"
# Whole words only: an "NVIDIA L40S" must not pass for an "NVIDIA L4"
GPU_WORDS=" $(echo "${{GPU^^}}" | tr -- '-_(),' '     ') "
if [[ "$GPU_WORDS" != *" {want} "* && -z "${{ACCELBENCH_FORCE:-}}" ]]; then
  echo "{script}: this host's GPU is '${{GPU:-none}}', not {target.name}; set ACCELBENCH_FORCE=1 to build anyway" >&2
  exit 1
fi"""


def build_engine(
    onnx_path: Path,
    plan_path: Path,
    shapes: dict[str, dict[str, tuple[int, ...]]],
    precision: str,
    dla_core: int | None = None,
) -> str:
    """Build a serialized engine with the TensorRT Python API (10 or 11); returns the TensorRT version."""
    import tensorrt as trt

    major = int(trt.__version__.split(".")[0])
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # 10: explicit batch is the only mode; 11: always strongly typed
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_path.read_bytes()):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BadInputError(f"{onnx_path}: TensorRT could not parse the ONNX: {errors[:300]}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_MIB << 20)
    if major < 11:  # 11 removed these flags: precision comes from the Q/DQ nodes and tensor types
        if precision == "int8":
            config.set_flag(trt.BuilderFlag.INT8)
        if precision in ("int8", "fp16"):
            config.set_flag(trt.BuilderFlag.FP16)
    if dla_core is not None:
        if builder.num_DLA_cores <= dla_core:
            raise ToolchainMissingError(
                f"DLA core {dla_core} requested, this device has {builder.num_DLA_cores}"
            )
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = dla_core
        config.set_flag(trt.BuilderFlag.GPU_FALLBACK)  # layers DLA cannot run go to the GPU
    profile = builder.create_optimization_profile()
    for name, s in shapes.items():
        profile.set_shape(name, s["min"], s["opt"], s["max"])
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise ToolchainMissingError(f"TensorRT {trt.__version__} failed to build an engine from {onnx_path}")
    plan_path.write_bytes(bytes(plan))
    return trt.__version__
